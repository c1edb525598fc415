//! Shared receive queues: create, modify (size, limit), query, destroy, and
//! `post_srq_recv` (reached through the context's ops table). A QP created with one takes
//! its receives there; the transport keeps the queue and checks every receive's buffers.

use super::memory::{Pd, next_handle};
use super::util::{ptr_or_errno, qp_errno, status};
use super::wr::{each_wr, sg_list};
use crate::abi::*;
use crate::attrs::MAX_QP_WR;
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj, Object};
use libc::c_int;
use rocelink_transport::{MAX_SGE, RecvWr, SrqInit};
use std::sync::Arc;

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) nic: Arc<Nic>,
    /// Its number in the endpoint.
    pub(crate) id: u32,
    /// The PD it was made in (a QP of another PD may not use it).
    pub(crate) pd: usize,
    max_sge: u32,
}

impl Obj for Srq {
    type C = ibv_srq;
    const KIND: Kind = Kind::Srq;
}

/// The SRQ an `ibv_srq *` names.
pub(crate) fn srq(p: *const ibv_srq) -> Option<&'static Object<ibv_srq, Srq>> {
    objects::get::<Srq>(p)
}

/// `IBV_SRQ_MAX_WR`, `IBV_SRQ_LIMIT` (`enum ibv_srq_attr_mask`).
const IBV_SRQ_MAX_WR: c_int = 1;
const IBV_SRQ_LIMIT: c_int = 1 << 1;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(
    p: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    ptr_or_errno(|| {
        let d = objects::get::<Pd>(p).ok_or(libc::EINVAL)?;
        if init.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's initialised attributes (non-null, checked); the actual
        // values are written back, as a provider does.
        let a = unsafe { &mut *init };
        let max_sge = a.attr.max_sge.max(1);
        if a.attr.max_wr == 0 || a.attr.max_wr > MAX_QP_WR || max_sge as usize > MAX_SGE {
            return Err(libc::EINVAL);
        }
        let id = {
            let mut core = d.r.nic.lock().map_err(|e| e.errno())?;
            core.ep
                .create_srq(SrqInit {
                    max_wr: a.attr.max_wr as usize,
                    pd: d.r.id,
                })
                .ok_or(libc::ENOMEM)?
        };
        a.attr.max_sge = max_sge;
        d.r.users.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        // SAFETY: `ibv_srq` is C data whose all-zero bytes are valid (null pointers, zero
        // integers, glibc's static initialisers for the mutex and condition).
        let mut c: ibv_srq = unsafe { std::mem::zeroed() };
        // SAFETY: `p` is a live PD (checked): its context pointer was set when it was made.
        c.context = unsafe { (*p).context };
        c.srq_context = a.srq_context;
        c.pd = p;
        c.handle = next_handle();
        Ok(objects::publish(
            c,
            Srq {
                nic: d.r.nic.clone(),
                id,
                pd: p as usize,
                max_sge,
            },
        ))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(
    s: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    status(|| {
        let o = srq(s).ok_or(libc::EINVAL)?;
        if attr.is_null() || mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's initialised attributes (non-null, checked).
        let a = unsafe { attr.read() };
        let max_wr = (mask & IBV_SRQ_MAX_WR != 0).then_some(a.max_wr as usize);
        if max_wr.is_some_and(|m| m == 0 || m > MAX_QP_WR as usize) {
            return Err(libc::EINVAL);
        }
        let limit = (mask & IBV_SRQ_LIMIT != 0).then_some(a.srq_limit);
        let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
        core.ep.modify_srq(o.r.id, max_wr, limit).map_err(qp_errno)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(s: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    status(|| {
        let o = srq(s).ok_or(libc::EINVAL)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        let info = {
            let core = o.r.nic.lock().map_err(|e| e.errno())?;
            core.ep.srq_info(o.r.id).ok_or(libc::EINVAL)?
        };
        let a = ibv_srq_attr {
            max_wr: info.max_wr as u32,
            max_sge: o.r.max_sge,
            srq_limit: info.limit,
        };
        // SAFETY: room for the attributes (non-null, checked).
        unsafe { attr.write(a) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int {
    status(|| {
        let o = srq(s).ok_or(libc::EINVAL)?;
        {
            let mut core = o.r.nic.lock().map_err(|e| e.errno())?;
            core.ep.destroy_srq(o.r.id).map_err(qp_errno)?;
        }
        if let Some(d) = objects::get::<Pd>(o.r.pd as *const ibv_pd) {
            d.r.users.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
        objects::retire::<Srq>(s).map(drop).ok_or(libc::EINVAL)
    })
}

/// `ops.post_srq_recv`.
pub unsafe extern "C" fn post_srq_recv(
    s: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    super::util::guard(libc::EIO, || {
        let Some(o) = srq(s) else {
            if !bad.is_null() {
                // SAFETY: room for the pointer (non-null, checked).
                unsafe { bad.write(wr) };
            }
            return libc::EINVAL;
        };
        let Ok(mut core) = o.r.nic.lock() else {
            return libc::EIO;
        };
        // SAFETY: the program's WR list and bad-WR slot, as the verb takes them.
        unsafe {
            each_wr(
                wr,
                bad,
                |w| w.next,
                |w| {
                    // SAFETY: the WR's list has `num_sge` entries (the program's WR).
                    let (sg_list, _) = sg_list(w.sg_list, w.num_sge, o.r.max_sge)?;
                    let r = RecvWr {
                        wr_id: w.wr_id,
                        sg_list,
                    };
                    core.ep.post_srq_recv(o.r.id, r).map_err(qp_errno)
                },
            )
        }
    })
}
