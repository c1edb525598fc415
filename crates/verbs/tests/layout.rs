//! Every structure the library shares with programs has `<infiniband/verbs.h>`'s exact
//! layout: a C program compiled against the installed header prints each size and offset,
//! and each must equal the Rust one.
#![allow(clippy::unwrap_used)]

use rocelink_verbs::abi::*;
use std::mem::{offset_of, size_of};
use std::process::Command;

/// (C expression, Rust value) pairs: `sizeof(struct S)` and `offsetof(struct S, f)`.
macro_rules! layout {
    ($($s:ident { $($f:ident $(= $cf:literal)?),* })*) => {{
        let mut v: Vec<(String, usize)> = Vec::new();
        $(
            v.push((format!("sizeof(struct {})", stringify!($s)), size_of::<$s>()));
            $(
                let cf = layout!(@name $f $($cf)?);
                v.push((format!("offsetof(struct {}, {})", stringify!($s), cf), offset_of!($s, $f)));
            )*
        )*
        v
    }};
    (@name $f:ident $cf:literal) => { $cf };
    (@name $f:ident) => { stringify!($f) };
}

fn rust_layouts() -> Vec<(String, usize)> {
    let mut v = layout! {
        ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        ibv_device { node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        ibv_context_ops { alloc_mw, bind_mw, dealloc_mw, poll_cq, req_notify_cq, post_srq_recv,
            post_send, post_recv, _compat_async_event }
        ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        verbs_context { query_port, create_cq_ex, priv_ = "priv", query_device_ex,
            create_qp_ex, sz, context }
        ibv_device_attr { fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap,
            vendor_id, vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge,
            max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_res_rd_atom,
            max_qp_init_rd_atom, atomic_cap, max_mw, max_mcast_grp, max_ah, max_srq,
            max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt }
        ibv_device_attr_ex { orig_attr, comp_mask, odp_caps, completion_timestamp_mask,
            hca_core_clock, device_cap_flags_ex, phys_port_cnt_ex }
        ibv_port_attr { state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz,
            bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl,
            subnet_timeout, init_type_reply, active_width, active_speed, phys_state,
            link_layer, flags, port_cap_flags2 }
        ibv_pd { context, handle }
        ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        ibv_comp_channel { context, fd, refcnt }
        ibv_cq { context, channel, cq_context, handle, cqe, mutex, cond,
            comp_events_completed, async_events_completed }
        ibv_cq_ex { comp_mask, status, wr_id, start_poll, next_poll, end_poll, read_opcode,
            read_vendor_err, read_byte_len, read_imm_data, read_qp_num, read_src_qp,
            read_wc_flags, read_slid, read_sl, read_dlid_path_bits,
            _read_unsupported = "read_completion_ts" }
        ibv_cq_init_attr_ex { cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags,
            parent_domain }
        ibv_qp_ex { comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add,
            wr_bind_mw, wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send,
            wr_send_imm, wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn,
            wr_set_inline_data, wr_set_inline_data_list, wr_set_sge, wr_set_sge_list,
            wr_start, wr_complete, wr_abort, wr_atomic_write }
        ibv_data_buf { addr, length }
        ibv_qp_init_attr_ex { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all,
            comp_mask, pd, xrcd, create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf,
            source_qpn, send_ops_flags }
        ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        ibv_qp { context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state,
            qp_type, mutex, cond, events_completed }
        ibv_ah { context, pd, handle }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_grh { version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_qp_attr { qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn,
            dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index,
            alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
            max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit }
        ibv_sge { addr, length, lkey }
        ibv_send_wr { wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr,
            qp_type }
        ibv_recv_wr { wr_id, next, sg_list, num_sge }
        ibv_wc { wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp,
            wc_flags, pkey_index, slid, sl, dlid_path_bits }
        ibv_srq_attr { max_wr, max_sge, srq_limit }
        ibv_srq_init_attr { srq_context, attr }
        ibv_async_event { element, event_type }
    };
    v.push(("sizeof(union ibv_gid)".into(), size_of::<ibv_gid>()));
    v.push((
        "__alignof__(union ibv_gid)".into(),
        std::mem::align_of::<ibv_gid>(),
    ));
    // the members of the send WR's unions the accessors read
    let wr = offset_of!(ibv_send_wr, wr);
    v.push(("offsetof(struct ibv_send_wr, wr.rdma.rkey)".into(), wr + 8));
    v.push(("offsetof(struct ibv_send_wr, wr.ud.ah)".into(), wr));
    v.push((
        "offsetof(struct ibv_send_wr, wr.ud.remote_qpn)".into(),
        wr + 8,
    ));
    v.push((
        "offsetof(struct ibv_send_wr, wr.ud.remote_qkey)".into(),
        wr + 12,
    ));
    v.push((
        "offsetof(struct ibv_send_wr, bind_mw)".into(),
        offset_of!(ibv_send_wr, _bind_mw_or_tso),
    ));
    v.push((
        "offsetof(struct ibv_context_ops, post_send)".into(),
        offset_of!(ibv_context_ops, post_send),
    ));
    v.push(("COMPAT_PORT_ATTR_LEN".into(), COMPAT_PORT_ATTR_LEN));
    v.push((
        "IBV_ACCESS_OPTIONAL_RANGE".into(),
        IBV_ACCESS_OPTIONAL_RANGE as usize,
    ));
    v.push((
        "IBV_WC_RECV_RDMA_WITH_IMM".into(),
        IBV_WC_RECV_RDMA_WITH_IMM as usize,
    ));
    v.push(("IBV_QP_RATE_LIMIT".into(), IBV_QP_RATE_LIMIT as usize));
    v.push((
        "(size_t)__VERBS_ABI_IS_EXTENDED".into(),
        VERBS_ABI_IS_EXTENDED as usize,
    ));
    v
}

#[test]
fn every_structure_matches_the_installed_verbs_h() {
    if !rocelink_testkit::netns::need("gcc", "gcc") {
        return;
    }
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    if !header.exists() {
        let msg = "this test needs <infiniband/verbs.h> (apt-get install libibverbs-dev, or scripts/install-test-deps)";
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipping: {msg}");
        return;
    }
    let rust = rust_layouts();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n\
         struct _compat_port { enum ibv_port_state a; enum ibv_mtu b, c; int d; uint32_t e, f, g, h;\n\
         uint16_t i, j, k; uint8_t l, m, n, o, p, q, r, s, t, u; };\n\
         #define COMPAT_PORT_ATTR_LEN sizeof(struct _compat_port)\nint main(void) {\n",
    );
    for (expr, _) in &rust {
        c.push_str(&format!("  printf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    c.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("rocelink-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, c).unwrap();
    let cc = Command::new("gcc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let c_values: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(c_values.len(), rust.len());
    let wrong: Vec<String> = rust
        .iter()
        .zip(&c_values)
        .filter(|((_, r), c)| r != *c)
        .map(|((e, r), c)| format!("{e}: C {c}, Rust {r}"))
        .collect();
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    eprintln!("{} sizes and offsets agree with verbs.h", rust.len());
}
