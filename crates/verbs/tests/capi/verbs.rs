//! The C API as a program calls it — the exported `ibv_*` functions and the ops-table calls
//! the header's inline functions make — wrapped for the tests: two devices, buffers,
//! connected QPs, posts and polls.
#![allow(dead_code, clippy::unwrap_used)]

use rocelink_verbs::abi::*;
use rocelink_verbs::api::{
    ah::*, cq::*, cq_make::*, device::*, memory::*, qp::*, qp_make::*, query::*,
};
use std::time::{Duration, Instant};

/// The thread's errno.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The devices of this process (`ROCELINK_VERBS` set by `main`).
pub(crate) fn device(i: usize) -> *mut ibv_device {
    let mut n = 0;
    // SAFETY: the C API as documented.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        assert!(i < n as usize, "{n} devices");
        let d = *list.add(i);
        ibv_free_device_list(list);
        d
    }
}

/// One side: a context, a PD, a CQ, a 1 MiB buffer registered for everything.
pub(crate) struct Side {
    pub(crate) ctx: *mut ibv_context,
    pub(crate) pd: *mut ibv_pd,
    pub(crate) cq: *mut ibv_cq,
    pub(crate) buf: Vec<u8>,
    pub(crate) mr: *mut ibv_mr,
    pub(crate) gid: ibv_gid,
}

pub(crate) const ALL: i32 =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

impl Side {
    pub(crate) fn open(dev: usize) -> Side {
        // SAFETY: the C API as documented; the buffer outlives its registration (dropped
        // with the side, after `close`).
        unsafe {
            let ctx = ibv_open_device(device(dev));
            assert!(!ctx.is_null());
            let pd = ibv_alloc_pd(ctx);
            let cq = ibv_create_cq(ctx, 256, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            let mut buf = vec![0u8; 1 << 20];
            let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), buf.len(), ALL);
            assert!(
                !pd.is_null() && !cq.is_null() && !mr.is_null(),
                "errno {}",
                errno()
            );
            let mut gid = ibv_gid::default();
            assert_eq!(ibv_query_gid(ctx, 1, 0, &mut gid), 0);
            Side {
                ctx,
                pd,
                cq,
                buf,
                mr,
                gid,
            }
        }
    }

    pub(crate) fn qp(&self, t: u32) -> *mut ibv_qp {
        let mut init = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: self.cq,
            recv_cq: self.cq,
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 64,
                max_recv_wr: 64,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
            qp_type: t,
            sq_sig_all: 0,
        };
        // SAFETY: a live PD and an initialised attribute.
        let qp = unsafe { ibv_create_qp(self.pd, &mut init) };
        assert!(!qp.is_null(), "create_qp: errno {}", errno());
        qp
    }

    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).lkey }
    }
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).rkey }
    }
    pub(crate) fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    /// Wait up to `limit` for `n` completions.
    pub(crate) fn completions(&self, n: usize, limit: Duration) -> Vec<ibv_wc> {
        let end = Instant::now() + limit;
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < end {
            let mut wc = [ibv_wc::default(); 8];
            let got = poll(self.cq, &mut wc);
            assert!(got >= 0, "poll_cq failed");
            out.extend_from_slice(&wc[..got as usize]);
        }
        out
    }

    pub(crate) fn close(self) {
        // SAFETY: the objects this side made, destroyed in order.
        unsafe {
            assert_eq!(ibv_dereg_mr(self.mr), 0);
            assert_eq!(ibv_destroy_cq(self.cq), 0);
            assert_eq!(ibv_dealloc_pd(self.pd), 0);
            assert_eq!(ibv_close_device(self.ctx), 0);
        }
    }
}

/// `ibv_poll_cq` as the header's inline function makes it.
pub(crate) fn poll(cq: *mut ibv_cq, wc: &mut [ibv_wc]) -> i32 {
    // SAFETY: a live CQ, whose context's ops table we filled; room for `wc.len()`.
    unsafe { ((*(*cq).context).ops.poll_cq.unwrap())(cq, wc.len() as i32, wc.as_mut_ptr()) }
}

/// `ibv_post_send` as the inline function makes it; the errno and the bad WR's id.
pub(crate) fn post_send(qp: *mut ibv_qp, wr: &mut ibv_send_wr) -> (i32, Option<u64>) {
    let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
    // SAFETY: a live QP's ops table; `wr` is an initialised list.
    let r = unsafe { ((*(*qp).context).ops.post_send.unwrap())(qp, wr, &mut bad) };
    // SAFETY: `bad` is null or one of our WRs.
    (r, (!bad.is_null()).then(|| unsafe { (*bad).wr_id }))
}

/// `ibv_post_recv` as the inline function makes it.
pub(crate) fn post_recv(qp: *mut ibv_qp, wr: &mut ibv_recv_wr) -> i32 {
    let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
    // SAFETY: a live QP's ops table; `wr` is an initialised list.
    unsafe { ((*(*qp).context).ops.post_recv.unwrap())(qp, wr, &mut bad) }
}

/// A send WR of `opcode` over `sge`, signaled, to `remote_addr`/`rkey`.
pub(crate) fn send_wr(
    wr_id: u64,
    opcode: u32,
    sge: &mut ibv_sge,
    remote_addr: u64,
    rkey: u32,
) -> ibv_send_wr {
    ibv_send_wr {
        wr_id,
        next: std::ptr::null_mut(),
        sg_list: sge,
        num_sge: 1,
        opcode,
        send_flags: IBV_SEND_SIGNALED,
        imm_data: 0,
        wr: [remote_addr, u64::from(rkey), 0, 0],
        qp_type: 0,
        _bind_mw_or_tso: [0; 6],
    }
}

pub(crate) fn recv_wr(wr_id: u64, sge: &mut ibv_sge) -> ibv_recv_wr {
    ibv_recv_wr {
        wr_id,
        next: std::ptr::null_mut(),
        sg_list: sge,
        num_sge: 1,
    }
}

/// How to bring an RC/UC QP to RTS.
#[derive(Clone, Copy)]
pub(crate) struct Path {
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
}

pub(crate) const PATIENT: Path = Path {
    timeout: 14,
    retry_cnt: 7,
    rnr_retry: 7,
    min_rnr_timer: 12,
};

/// Move `qp` through INIT and RTR to RTS, connected to `dest_qpn` at `dgid`; the errno of
/// the first refused step.
pub(crate) fn connect(qp: *mut ibv_qp, t: u32, dgid: ibv_gid, dest_qpn: u32, p: Path) -> i32 {
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        pkey_index: 0,
        port_num: 1,
        qp_access_flags: ALL as u32,
        qkey: 0x1111_1111,
        ..Default::default()
    };
    let init_mask = IBV_QP_STATE
        | IBV_QP_PKEY_INDEX
        | IBV_QP_PORT
        | if t == IBV_QPT_UD {
            IBV_QP_QKEY
        } else {
            IBV_QP_ACCESS_FLAGS
        };
    // SAFETY: a live QP and initialised attributes.
    unsafe {
        let r = ibv_modify_qp(qp, &mut a, init_mask);
        if r != 0 {
            return r;
        }
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = 3;
        a.dest_qp_num = dest_qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = p.min_rnr_timer;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = dgid;
        a.ah_attr.port_num = 1;
        let rtr = match t {
            IBV_QPT_UD => IBV_QP_STATE,
            IBV_QPT_UC => {
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
            }
            _ => {
                IBV_QP_STATE
                    | IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER
            }
        };
        let r = ibv_modify_qp(qp, &mut a, rtr);
        if r != 0 {
            return r;
        }
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        a.timeout = p.timeout;
        a.retry_cnt = p.retry_cnt;
        a.rnr_retry = p.rnr_retry;
        a.max_rd_atomic = 1;
        let rts = match t {
            IBV_QPT_RC => {
                IBV_QP_STATE
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC
            }
            _ => IBV_QP_STATE | IBV_QP_SQ_PSN,
        };
        ibv_modify_qp(qp, &mut a, rts)
    }
}

pub(crate) fn qpn(qp: *mut ibv_qp) -> u32 {
    // SAFETY: a live QP.
    unsafe { (*qp).qp_num }
}

/// The QP's state as `ibv_query_qp` reports it.
pub(crate) fn state(qp: *mut ibv_qp) -> u32 {
    let mut a = ibv_qp_attr::default();
    // SAFETY: an all-zero init attribute is a valid output slot.
    let mut i: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    // SAFETY: a live QP and room for both.
    assert_eq!(unsafe { ibv_query_qp(qp, &mut a, IBV_QP_STATE, &mut i) }, 0);
    a.qp_state
}

pub(crate) fn destroy(qp: *mut ibv_qp) {
    // SAFETY: a live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

/// An address handle to `gid`.
pub(crate) fn ah(side: &Side, gid: ibv_gid) -> *mut ibv_ah {
    let mut a = ibv_ah_attr {
        is_global: 1,
        port_num: 1,
        ..Default::default()
    };
    a.grh.dgid = gid;
    // SAFETY: a live PD and an initialised attribute.
    unsafe { ibv_create_ah(side.pd, &mut a) }
}
