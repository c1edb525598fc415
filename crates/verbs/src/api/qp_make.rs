//! Making queue pairs: `ibv_create_qp` and the extended `ibv_create_qp_ex` (reached through
//! the context's `create_qp_ex`). Every QP is an `ibv_qp_ex` with the builder's functions
//! (`qp_ex`); `ibv_qp_to_qp_ex` gives them to a QP made with send operations.

use super::cq::cq;
use super::memory::{Pd, next_handle, pd};
use super::qp::Qp;
use super::util::{ptr_or_errno, qp_errno};
use crate::abi::*;
use crate::attrs::MAX_QP_WR;
use crate::objects;
use rocelink_transport::{Access, MAX_INLINE, MAX_SGE, QpInit, QpType};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

fn qp_type_of(t: u32) -> Result<QpType, i32> {
    match t {
        IBV_QPT_RC => Ok(QpType::Rc),
        IBV_QPT_UC => Ok(QpType::Uc),
        IBV_QPT_UD => Ok(QpType::Ud),
        // raw packet, XRC, driver-specific: not offered
        8..=10 | 0xff => Err(libc::EOPNOTSUPP),
        _ => Err(libc::EINVAL),
    }
}

fn check_cap(c: &ibv_qp_cap) -> Result<(), i32> {
    let ok = c.max_send_wr <= MAX_QP_WR
        && c.max_recv_wr <= MAX_QP_WR
        && c.max_send_sge as usize <= MAX_SGE
        && c.max_recv_sge as usize <= MAX_SGE
        && c.max_inline_data as usize <= MAX_INLINE;
    if ok { Ok(()) } else { Err(libc::EINVAL) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(p: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    ptr_or_errno(|| {
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes an initialised `ibv_qp_init_attr` (non-null, checked),
        // which it does not touch during the call.
        let a = unsafe { &mut *init };
        create(p, a, 0).map(|q| q.cast::<ibv_qp>())
    })
}

/// A QP of PD `p` as `a` describes it (its capabilities written back), building the send
/// operations `send_ops` through `ibv_qp_ex` if any.
pub(crate) fn create(
    p: *mut ibv_pd,
    a: &mut ibv_qp_init_attr,
    send_ops: u64,
) -> Result<*mut ibv_qp_ex, i32> {
    {
        let d: &Pd = pd(p).ok_or(libc::EINVAL)?;
        let qp_type = qp_type_of(a.qp_type)?;
        let shared = shared_srq(p, a)?;
        check_cap(&a.cap)?;
        let (scq, rcq) = (
            cq(a.send_cq).ok_or(libc::EINVAL)?,
            cq(a.recv_cq).ok_or(libc::EINVAL)?,
        );
        if !Arc::ptr_eq(&scq.r.nic, &d.nic) || !Arc::ptr_eq(&rcq.r.nic, &d.nic) {
            return Err(libc::EINVAL);
        }
        let mut core = d.nic.lock().map_err(|e| e.errno())?;
        if let Err(e) = d.nic.start_io(&mut core) {
            crate::diag::warn(&format!("{}: {e}", d.nic.info.name));
            return Err(e.errno());
        }
        let mut qi = QpInit::new(qp_type);
        qi.max_send_wr = a.cap.max_send_wr as usize;
        qi.max_recv_wr = a.cap.max_recv_wr as usize;
        qi.send_cq = scq.r.id;
        qi.recv_cq = rcq.r.id;
        qi.pd = d.id;
        qi.srq = shared;
        // as on an RNIC, the peer may do nothing until IBV_QP_ACCESS_FLAGS says otherwise
        qi.remote_access = Access::NONE;
        let qpn = core.ep.create_qp(qi).map_err(qp_errno)?;
        drop(core);
        for c in [scq, rcq] {
            c.r.users.fetch_add(1, Ordering::AcqRel);
            if qp_type == QpType::Ud {
                c.r.ud.store(true, Ordering::Relaxed);
            }
        }
        d.users.fetch_add(1, Ordering::AcqRel);
        Ok(objects::publish(
            c_qp(p, a, qpn),
            Qp {
                nic: d.nic.clone(),
                qpn,
                qp_type,
                sq_sig_all: a.sq_sig_all != 0,
                cap: a.cap,
                pd: p as usize,
                send_cq: a.send_cq as usize,
                recv_cq: a.recv_cq as usize,
                attr: Mutex::new(ibv_qp_attr {
                    cap: a.cap,
                    port_num: 1,
                    ..Default::default()
                }),
                send_ops,
                builder: Mutex::new(super::wr::Builder::default()),
            },
        ))
    }
}

/// The QP's shared receive queue, if it names one: it must be of the same PD (the QP's
/// receives are taken there).
fn shared_srq(p: *mut ibv_pd, a: &ibv_qp_init_attr) -> Result<Option<u32>, i32> {
    if a.srq.is_null() {
        return Ok(None);
    }
    let s = super::srq::srq(a.srq).ok_or(libc::EINVAL)?;
    if s.r.pd != p as usize {
        return Err(libc::EINVAL);
    }
    Ok(Some(s.r.id))
}

/// The C side of QP `qpn` of PD `p` made as `a` asks: in RESET, with the extended QP's
/// builder functions.
fn c_qp(p: *mut ibv_pd, a: &ibv_qp_init_attr, qpn: u32) -> ibv_qp_ex {
    // SAFETY: `ibv_qp` is C data whose all-zero bytes are valid (null pointers, zero
    // integers, glibc's static initialisers).
    let mut c: ibv_qp = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is a live PD (checked by the caller): its context pointer was set when
    // made.
    c.context = unsafe { (*p).context };
    c.qp_context = a.qp_context;
    c.pd = p;
    c.send_cq = a.send_cq;
    c.recv_cq = a.recv_cq;
    c.handle = next_handle();
    c.qp_num = qpn;
    c.state = IBV_QPS_RESET;
    c.qp_type = a.qp_type;
    // SAFETY: `ibv_qp_ex` is C data whose all-zero bytes are valid (absent functions,
    // zero integers).
    let mut x: ibv_qp_ex = unsafe { std::mem::zeroed() };
    x.qp_base = c;
    super::qp_ex::fill_ops(&mut x);
    x
}

/// `verbs_context.create_qp_ex`: a QP of the attribute's PD, with the builder if send
/// operations are asked for. XRC, TSO, RSS, creation flags and source QPNs are not offered
/// (EOPNOTSUPP).
pub(crate) unsafe extern "C" fn vctx_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    ptr_or_errno(|| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes an initialised attribute structure (non-null, checked),
        // which it does not touch during the call.
        let a = unsafe { &mut *attr };
        // creation flags are accepted when there are none
        let known =
            IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
        let flags = a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0;
        if a.comp_mask & !known != 0 || flags {
            return Err(libc::EOPNOTSUPP);
        }
        if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a non-null PD pointer is checked against the live PDs by `create`; its
        // context is read only if it is one.
        let pd_ctx = super::memory::pd(a.pd).map(|_| unsafe { (*a.pd).context });
        if pd_ctx != Some(ctx) {
            return Err(libc::EINVAL);
        }
        let ops = if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            a.send_ops_flags
        } else {
            0
        };
        if ops & !IBV_QP_EX_SUPPORTED_OPS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let mut init = ibv_qp_init_attr {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        let q = create(a.pd, &mut init, ops)?;
        a.cap = init.cap;
        Ok(q.cast::<ibv_qp>())
    })
}
