//! Queue pairs once made (`qp_make`): modify through InfiniBand's state machine, query,
//! destroy.

use super::cq::cq;
use super::memory::pd;
use super::util::{qp_errno, status};
use crate::abi::*;
use crate::attrs::MAX_RD_ATOMIC;
use crate::devices::ip_of_gid;
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj, Object};
use crate::transitions;
use libc::c_int;
use rocelink_transport::{Access, Modify, Mtu, QpState, QpType};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A QP: its number in the endpoint, what it was created with, and the attributes set
/// since (what `ibv_query_qp` reports).
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) nic: Arc<Nic>,
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) sq_sig_all: bool,
    pub(crate) cap: ibv_qp_cap,
    pub(crate) pd: usize,
    pub(crate) send_cq: usize,
    pub(crate) recv_cq: usize,
    pub(crate) attr: Mutex<ibv_qp_attr>,
    /// The send operations it was created with (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`): with
    /// any, `ibv_qp_to_qp_ex` gives its work-request builder.
    pub(crate) send_ops: u64,
    /// The work requests being built (`ibv_wr_start` … `ibv_wr_complete`).
    pub(crate) builder: Mutex<super::wr::Builder>,
}

impl Obj for Qp {
    type C = ibv_qp_ex;
    const KIND: Kind = Kind::Qp;
}

/// The QP an `ibv_qp *` (or `ibv_qp_ex *`: the same address) names.
pub(crate) fn qp(p: *const ibv_qp) -> Option<&'static Object<ibv_qp_ex, Qp>> {
    objects::get::<Qp>(p.cast())
}

/// The QP's state as verbs names it: ERR once the transport has moved it there itself (a
/// fatal NAK, retries spent), else what was last set.
fn current_state(o: &Object<ibv_qp_ex, Qp>, stored: &ibv_qp_attr) -> u32 {
    let t = o.r.nic.lock().ok().and_then(|c| c.ep.qp_state(o.r.qpn));
    if t == Some(QpState::Error) {
        IBV_QPS_ERR
    } else {
        stored.qp_state
    }
}

/// A path MTU code as the transport's MTU.
fn mtu_of(code: u32) -> Result<Mtu, i32> {
    Ok(match code {
        1 => Mtu::M256,
        2 => Mtu::M512,
        3 => Mtu::M1024,
        4 => Mtu::M2048,
        5 => Mtu::M4096,
        _ => return Err(libc::EINVAL),
    })
}

/// The local ACK timeout of code `t`: 4.096 µs × 2^t, 0 meaning none (an hour here).
fn timeout_of(t: u8) -> Duration {
    if t == 0 {
        Duration::from_secs(3600)
    } else {
        Duration::from_nanos(4096 << t.min(31))
    }
}

/// Check the values of the attributes in `mask` (what rxe checks): port 1, P_Key index 0,
/// an MTU code, a global route with GID index 0 for RoCE, counts in range.
fn check_values(a: &ibv_qp_attr, mask: c_int) -> Result<(), i32> {
    let has = |m| mask & m != 0;
    let bad = (has(IBV_QP_PORT) && a.port_num != 1)
        || (has(IBV_QP_PKEY_INDEX) && a.pkey_index != 0)
        || (has(IBV_QP_PATH_MTU) && mtu_of(a.path_mtu).is_err())
        || (has(IBV_QP_AV) && (a.ah_attr.is_global == 0 || a.ah_attr.grh.sgid_index != 0))
        || (has(IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > MAX_RD_ATOMIC)
        || (has(IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > MAX_RD_ATOMIC)
        || (has(IBV_QP_RETRY_CNT) && a.retry_cnt > 7)
        || (has(IBV_QP_RNR_RETRY) && a.rnr_retry > 7)
        || (has(IBV_QP_TIMEOUT) && a.timeout > 31)
        || (has(IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31)
        || (has(IBV_QP_ACCESS_FLAGS) && a.qp_access_flags & !0xF != 0);
    if bad { Err(libc::EINVAL) } else { Ok(()) }
}

/// What a QP's access flags let its peer do (the local-write rule of regions does not
/// apply to a QP's flags).
fn remote_access_of(flags: std::ffi::c_uint) -> Access {
    let mut a = Access::NONE;
    for (flag, right) in [
        (IBV_ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, Access::REMOTE_READ),
        (IBV_ACCESS_REMOTE_ATOMIC, Access::REMOTE_ATOMIC),
    ] {
        if flags & flag as std::ffi::c_uint != 0 {
            a = a | right;
        }
    }
    a
}

/// Copy the attributes in `mask` from `a` into `stored`.
fn store(stored: &mut ibv_qp_attr, a: &ibv_qp_attr, mask: c_int) {
    let has = |m| mask & m != 0;
    if has(IBV_QP_STATE) {
        stored.qp_state = a.qp_state;
    }
    if has(IBV_QP_ACCESS_FLAGS) {
        stored.qp_access_flags = a.qp_access_flags;
    }
    if has(IBV_QP_PKEY_INDEX) {
        stored.pkey_index = a.pkey_index;
    }
    if has(IBV_QP_PORT) {
        stored.port_num = a.port_num;
    }
    if has(IBV_QP_QKEY) {
        stored.qkey = a.qkey;
    }
    if has(IBV_QP_AV) {
        stored.ah_attr = a.ah_attr;
    }
    if has(IBV_QP_PATH_MTU) {
        stored.path_mtu = a.path_mtu;
    }
    if has(IBV_QP_TIMEOUT) {
        stored.timeout = a.timeout;
    }
    if has(IBV_QP_RETRY_CNT) {
        stored.retry_cnt = a.retry_cnt;
    }
    if has(IBV_QP_RNR_RETRY) {
        stored.rnr_retry = a.rnr_retry;
    }
    if has(IBV_QP_RQ_PSN) {
        stored.rq_psn = a.rq_psn & 0xFF_FFFF;
    }
    if has(IBV_QP_SQ_PSN) {
        stored.sq_psn = a.sq_psn & 0xFF_FFFF;
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) {
        stored.max_rd_atomic = a.max_rd_atomic;
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
        stored.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(IBV_QP_MIN_RNR_TIMER) {
        stored.min_rnr_timer = a.min_rnr_timer;
    }
    if has(IBV_QP_DEST_QPN) {
        stored.dest_qp_num = a.dest_qp_num & 0xFF_FFFF;
    }
    if has(IBV_QP_PATH_MIG_STATE) {
        stored.path_mig_state = a.path_mig_state;
    }
}

/// What the transport does for `cur → next` with the attributes now in `s`.
/// (`ud_mtu`: the port's active MTU, which bounds a UD message.)
fn transport_step(
    t: QpType,
    cur: u32,
    next: u32,
    s: &ibv_qp_attr,
    ud_mtu: u32,
) -> Result<Option<Modify>, i32> {
    Ok(match (cur, next) {
        (_, IBV_QPS_RESET) => Some(Modify::Reset),
        (_, IBV_QPS_ERR) => Some(Modify::Error),
        (IBV_QPS_RESET, IBV_QPS_INIT) => Some(Modify::Init { qkey: s.qkey }),
        (IBV_QPS_INIT, IBV_QPS_RTR) => {
            let remote =
                (t != QpType::Ud).then(|| SocketAddr::new(ip_of_gid(s.ah_attr.grh.dgid.raw), 4791));
            Some(Modify::Rtr {
                remote,
                dest_qpn: s.dest_qp_num,
                rq_psn: s.rq_psn,
                mtu: if t == QpType::Ud {
                    mtu_of(ud_mtu)?
                } else {
                    mtu_of(s.path_mtu)?
                },
                min_rnr_timer: s.min_rnr_timer,
            })
        }
        (IBV_QPS_RTR, IBV_QPS_RTS) => Some(Modify::Rts {
            sq_psn: s.sq_psn,
            timeout: timeout_of(s.timeout),
            retry_cnt: if t == QpType::Rc { s.retry_cnt } else { 7 },
            rnr_retry: if t == QpType::Rc { s.rnr_retry } else { 7 },
        }),
        // INIT → INIT, RTS → RTS: attributes only
        _ => None,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(
    p: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    status(|| {
        let o = qp(p).ok_or(libc::EINVAL)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes an initialised attribute structure (non-null, checked).
        let a = unsafe { attr.read() };
        let mut stored = o.r.attr.lock().map_err(|_| libc::EIO)?;
        let cur = current_state(o, &stored);
        if mask & IBV_QP_CUR_STATE != 0 && a.cur_qp_state != cur {
            return Err(libc::EINVAL);
        }
        let next = if mask & IBV_QP_STATE != 0 {
            a.qp_state
        } else {
            cur
        };
        transitions::check(cur, next, o.r.qp_type, mask)?;
        check_values(&a, mask)?;
        let mut after = *stored;
        store(&mut after, &a, mask);
        after.qp_state = next;
        let ud_mtu = crate::devices::ib_mtu_for(o.r.nic.info.if_mtu);
        if mask & IBV_QP_AV != 0 {
            // the address vector's traffic class goes in the IP header (RoCE v2's DSCP)
            let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
            let tc = a.ah_attr.grh.traffic_class;
            core.ep.set_traffic_class(o.r.qpn, tc).map_err(qp_errno)?;
        }
        if mask & IBV_QP_ACCESS_FLAGS != 0 || next == IBV_QPS_RESET {
            let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
            let flags = if next == IBV_QPS_RESET {
                0
            } else {
                a.qp_access_flags
            };
            let remote = remote_access_of(flags);
            core.ep
                .set_remote_access(o.r.qpn, remote)
                .map_err(qp_errno)?;
        }
        if let Some(m) = transport_step(o.r.qp_type, cur, next, &after, ud_mtu)? {
            let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
            core.ep.modify_qp(o.r.qpn, m).map_err(qp_errno)?;
            if next == IBV_QPS_ERR {
                // flushed completions may wake a channel
                core.settle();
            }
        }
        if next == IBV_QPS_RESET {
            // back to what creation set
            after = ibv_qp_attr {
                cap: o.r.cap,
                port_num: 1,
                ..Default::default()
            };
        }
        *stored = after;
        // SAFETY: a live QP; `state` is a field libibverbs also keeps current this way,
        // written under the QP's attribute lock.
        unsafe { (*o.c()).qp_base.state = next };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    p: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    status(|| {
        let o = qp(p).ok_or(libc::EINVAL)?;
        if attr.is_null() || init.is_null() {
            return Err(libc::EINVAL);
        }
        let _ = mask;
        let stored = *o.r.attr.lock().map_err(|_| libc::EIO)?;
        let mut a = stored;
        a.qp_state = current_state(o, &stored);
        a.cur_qp_state = a.qp_state;
        a.cap = o.r.cap;
        // SAFETY: a live QP, whose C part holds what it was created with.
        let c = unsafe { &(*o.c()).qp_base };
        let i = ibv_qp_init_attr {
            qp_context: c.qp_context,
            send_cq: o.r.send_cq as *mut ibv_cq,
            recv_cq: o.r.recv_cq as *mut ibv_cq,
            srq: std::ptr::null_mut(),
            cap: o.r.cap,
            qp_type: c.qp_type,
            sq_sig_all: c_int::from(o.r.sq_sig_all),
        };
        // SAFETY: the caller passes room for both structures (non-null, checked).
        unsafe {
            attr.write(a);
            init.write(i);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(p: *mut ibv_qp) -> c_int {
    status(|| {
        let o = qp(p).ok_or(libc::EINVAL)?;
        let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
        // what arrived is acknowledged before the QP goes (an ACK held for an answer)
        core.ep.release_acks(o.r.qpn);
        core.transmit(std::time::Instant::now());
        core.ep.destroy_qp(o.r.qpn).map_err(qp_errno)?;
        drop(core);
        for c in [o.r.send_cq, o.r.recv_cq] {
            if let Some(q) = cq(c as *const ibv_cq) {
                q.r.users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        if let Some(d) = pd(o.r.pd as *const ibv_pd) {
            d.users.fetch_sub(1, Ordering::AcqRel);
        }
        objects::retire::<Qp>(p.cast())
            .map(drop)
            .ok_or(libc::EINVAL)
    })
}
