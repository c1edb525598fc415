//! The structures and constants of `<infiniband/verbs.h>` (rdma-core 44, the ABI every
//! libibverbs since 1.1 keeps) that programs read and write directly — through the static
//! inline `ibv_post_send`, `ibv_poll_cq`, … and the fields they look at — laid out exactly
//! as the header does. `tests/layout.rs` compiles a C program against the installed header
//! and checks every size and offset here against it.
//!
//! Only what this library fills or reads is spelt out; the rest of a structure is opaque
//! padding of the right size (its bytes are zero).
#![allow(non_camel_case_types, missing_docs, missing_debug_implementations)]

use libc::{c_char, c_int, c_uint, c_void, pthread_cond_t, pthread_mutex_t};

/// `union ibv_gid` (16 bytes; the header's `__be64` members align it to 8).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
/// `enum ibv_gid_type_sysfs`, what `ibv_query_gid_type` reports (not `ibv_gid_type`).
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: u32 = 1;

pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

#[repr(C)]
pub struct ibv_device {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

pub type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type ReqNotifyCq = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type PostSend =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub type PostRecv =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PostSrqRecv =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

/// `struct ibv_context_ops`: the calls the header's inline functions make. Memory windows
/// (`alloc_mw`, `bind_mw`, `dealloc_mw`) stay null, which the inline wrappers answer with
/// EOPNOTSUPP / ENOSYS.
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: *mut c_void,
    pub _compat_query_port: *mut c_void,
    pub _compat_alloc_pd: *mut c_void,
    pub _compat_dealloc_pd: *mut c_void,
    pub _compat_reg_mr: *mut c_void,
    pub _compat_rereg_mr: *mut c_void,
    pub _compat_dereg_mr: *mut c_void,
    pub alloc_mw: *mut c_void,
    pub bind_mw: *mut c_void,
    pub dealloc_mw: *mut c_void,
    pub _compat_create_cq: *mut c_void,
    pub poll_cq: Option<PollCq>,
    pub req_notify_cq: Option<ReqNotifyCq>,
    pub _compat_cq_event: *mut c_void,
    pub _compat_resize_cq: *mut c_void,
    pub _compat_destroy_cq: *mut c_void,
    pub _compat_create_srq: *mut c_void,
    pub _compat_modify_srq: *mut c_void,
    pub _compat_query_srq: *mut c_void,
    pub _compat_destroy_srq: *mut c_void,
    pub post_srq_recv: Option<PostSrqRecv>,
    pub _compat_create_qp: *mut c_void,
    pub _compat_query_qp: *mut c_void,
    pub _compat_modify_qp: *mut c_void,
    pub _compat_destroy_qp: *mut c_void,
    pub post_send: Option<PostSend>,
    pub post_recv: Option<PostRecv>,
    pub _compat_create_ah: *mut c_void,
    pub _compat_destroy_ah: *mut c_void,
    pub _compat_attach_mcast: *mut c_void,
    pub _compat_detach_mcast: *mut c_void,
    pub _compat_async_event: *mut c_void,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: `abi_compat` says a `verbs_context` surrounds the context.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

pub type QueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;
pub type QueryDeviceEx =
    unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut ibv_device_attr_ex, usize) -> c_int;

/// `struct verbs_context`: the extended operations, found by the header's inline functions
/// just before the `ibv_context` (`verbs_get_ctx_op`). Null members mean "not supported".
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<QueryPort>,
    /// advise_mr … query_rt_values (24 operations).
    pub _ops1: [*mut c_void; 24],
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceEx>,
    /// ibv_destroy_flow … open_qp (5 members).
    pub _ops2: [*mut c_void; 5],
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    /// get_srq_num, create_srq_ex, open_xrcd, close_xrcd.
    pub _ops3: [*mut c_void; 4],
    pub _abi_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_device_attr_ex`: the classic attributes, then extensions this device leaves
/// zero (no ODP, TSO, RSS, tag matching, …).
#[repr(C)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    /// `struct ibv_odp_caps` (no on-demand paging here: zero).
    pub odp_caps: [u64; 3],
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    /// TSO, RSS, WQ, packet pacing, raw packet, tag matching, CQ moderation, device
    /// memory, PCI atomic and XRC ODP capabilities: none here (zero).
    pub _caps: [u32; 27],
    pub phys_port_cnt_ex: u32,
}

pub const IBV_DEVICE_RC_RNR_NAK_GEN: c_uint = 1 << 12;
pub const IBV_DEVICE_PORT_ACTIVE_EVENT: c_uint = 1 << 10;
pub const IBV_DEVICE_SYS_IMAGE_GUID: c_uint = 1 << 11;
pub const IBV_DEVICE_CHANGE_PHY_PORT: c_uint = 1 << 9;
pub const IBV_ATOMIC_NONE: c_int = 0;
pub const IBV_ATOMIC_HCA: c_int = 1;

pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `phys_state` 5: LinkUp.
pub const IBV_PORT_PHYS_LINK_UP: u8 = 5;
pub const IBV_PORT_IP_BASED_GIDS: u32 = 1 << 26;
pub const IBV_PORT_CM_SUP: u32 = 1 << 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The bytes of `ibv_port_attr` the exported `ibv_query_port` (the 1.1 ABI, without
/// `port_cap_flags2`) writes.
pub const COMPAT_PORT_ATTR_LEN: usize = 48;

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;
pub const IBV_ACCESS_MW_BIND: c_int = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: c_int = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: c_int = 1 << 6;
pub const IBV_ACCESS_HUGETLB: c_int = 1 << 7;
/// `IBV_ACCESS_OPTIONAL_RANGE`: flags a device may ignore (relaxed ordering, …).
pub const IBV_ACCESS_OPTIONAL_RANGE: c_int = 0x3ff0_0000;

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_cq_ex`: an `ibv_cq` followed by the current completion's status and WR ID
/// and the extended polling functions. Every CQ of this library is one.
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    /// read_completion_ts, read_cvlan, read_flow_tag, read_tm_info,
    /// read_completion_wallclock_ns: null (a CQ cannot be created with them).
    pub _read_unsupported: [*mut c_void; 5],
}

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `IBV_WC_STANDARD_FLAGS`: byte length, immediate, QP number, source QP, SLID, SL, DLID
/// path bits — what an extended CQ here can report.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7F;
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 2;
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;

/// `struct ibv_qp_ex`: an `ibv_qp` followed by the work-request builder's functions. Every
/// QP of this library is one; `ibv_qp_to_qp_ex` gives it to QPs created with send
/// operations.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u32, *const c_void)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `struct ibv_data_buf`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_qp_init_attr_ex` (the receive-hash configuration as opaque words).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
/// The send operations an extended QP here builds: RDMA WRITE (with immediate), SEND (with
/// immediate), RDMA READ, compare-and-swap, fetch-and-add.
pub const IBV_QP_EX_SUPPORTED_OPS: u64 = 0x7F;

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_grh`: the 40 bytes in front of a UD receive's data.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}

pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPT_UC: u32 = 3;
pub const IBV_QPT_UD: u32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_SQD: u32 = 4;
pub const IBV_QPS_SQE: u32 = 5;
pub const IBV_QPS_ERR: u32 = 6;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;

pub const IBV_SEND_FENCE: c_uint = 1;
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;
pub const IBV_SEND_IP_CSUM: c_uint = 1 << 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr`. Its `wr` union is four words: RDMA (`remote_addr`, `rkey`), atomic
/// (`remote_addr`, `compare_add`, `swap`, `rkey`) or UD (`ah`, `remote_qpn`, `remote_qkey`),
/// read by the accessors.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub wr: [u64; 4],
    pub qp_type: u32,
    pub _bind_mw_or_tso: [u64; 6],
}

impl ibv_send_wr {
    /// `wr.rdma.remote_addr` (also `wr.atomic.remote_addr`).
    pub fn remote_addr(&self) -> u64 {
        self.wr[0]
    }
    /// `wr.rdma.rkey`.
    pub fn rdma_rkey(&self) -> u32 {
        self.wr[1] as u32
    }
    /// `wr.atomic.compare_add`.
    pub fn atomic_compare_add(&self) -> u64 {
        self.wr[1]
    }
    /// `wr.atomic.swap`.
    pub fn atomic_swap(&self) -> u64 {
        self.wr[2]
    }
    /// `wr.atomic.rkey`.
    pub fn atomic_rkey(&self) -> u32 {
        self.wr[3] as u32
    }
    /// `wr.ud.ah`.
    pub fn ud_ah(&self) -> *mut ibv_ah {
        self.wr[0] as usize as *mut ibv_ah
    }
    /// `wr.ud.remote_qpn`.
    pub fn ud_remote_qpn(&self) -> u32 {
        self.wr[1] as u32
    }
    /// `wr.ud.remote_qkey`.
    pub fn ud_remote_qkey(&self) -> u32 {
        (self.wr[1] >> 32) as u32
    }
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
pub const IBV_WC_REM_OP_ERR: u32 = 11;
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
pub const IBV_WC_GENERAL_ERR: u32 = 21;

pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_COMP_SWAP: u32 = 3;
pub const IBV_WC_FETCH_ADD: u32 = 4;
pub const IBV_WC_RECV: u32 = 1 << 7;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;

pub const IBV_WC_GRH: c_uint = 1;
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_EVENT_QP_REQ_ERR: u32 = 2;
pub const IBV_EVENT_QP_ACCESS_ERR: u32 = 3;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;

#[repr(C)]
pub struct ibv_async_event {
    /// The element: a CQ, QP, SRQ or WQ pointer, or the port number.
    pub element: *mut c_void,
    pub event_type: u32,
}
