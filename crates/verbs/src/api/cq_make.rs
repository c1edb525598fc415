//! Making completion queues: `ibv_create_cq` and the extended `ibv_create_cq_ex` (reached
//! through the context's `create_cq_ex`). Every CQ is an `ibv_cq_ex` with the extended
//! polling functions (`cq_ex`); one made by `ibv_create_cq_ex` reports the standard fields
//! (byte length, immediate, QP numbers, SLID, SL, DLID path bits) — a timestamp, VLAN, flow
//! tag or tag-matching field is refused with EOPNOTSUPP, as on a device without them.

use super::context::context;
use super::cq::{ChannelObj, Cq};
use super::util::ptr_or_errno;
use crate::abi::*;
use crate::attrs::MAX_CQE;
use crate::objects;
use libc::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    ptr_or_errno(|| {
        let cqe = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        let vector = u32::try_from(comp_vector).map_err(|_| libc::EINVAL)?;
        create(ctx, cqe, cq_context, channel, vector).map(|p| p.cast::<ibv_cq>())
    })
}

/// A CQ of `cqe` entries on context `ctx` (its events to `channel`, if not null).
pub(crate) fn create(
    ctx: *mut ibv_context,
    cqe: u32,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: u32,
) -> Result<*mut ibv_cq_ex, i32> {
    let c = context(ctx).ok_or(libc::EINVAL)?;
    if !(1..=MAX_CQE).contains(&cqe) || comp_vector != 0 {
        return Err(libc::EINVAL);
    }
    let chan = if channel.is_null() {
        None
    } else {
        let ch = objects::get::<ChannelObj>(channel).ok_or(libc::EINVAL)?;
        Some((channel as usize, ch))
    };
    let id = c.nic.lock().map_err(|e| e.errno())?.ep.create_cq();
    if let Some((_, ch)) = chan {
        ch.r.users.fetch_add(1, Ordering::AcqRel);
        // SAFETY: a live channel (checked): its refcnt is an int we own the writes of.
        unsafe { (*ch.c()).refcnt += 1 };
    }
    // SAFETY: `ibv_cq_ex` is C data whose all-zero bytes are valid (null pointers and
    // absent functions, zero integers, glibc's static initialisers for the mutex and
    // condition).
    let mut c_cq: ibv_cq_ex = unsafe { std::mem::zeroed() };
    c_cq.cq.context = ctx;
    c_cq.cq.channel = channel;
    c_cq.cq.cq_context = cq_context;
    c_cq.cq.handle = super::memory::next_handle();
    c_cq.cq.cqe = cqe as c_int;
    super::cq_ex::fill_ops(&mut c_cq);
    Ok(objects::publish(
        c_cq,
        Cq {
            nic: c.nic.clone(),
            id,
            channel: chan.map(|(h, ch)| (h, ch.r.chan.clone())),
            events: Mutex::new((0, 0)),
            users: AtomicUsize::new(0),
            ud: std::sync::atomic::AtomicBool::new(false),
            current: Mutex::new(ibv_wc::default()),
        },
    ))
}

/// `verbs_context.create_cq_ex`.
pub(crate) unsafe extern "C" fn vctx_create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    ptr_or_errno(|| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes an initialised attribute structure (non-null, checked).
        let a = unsafe { attr.read() };
        check_ex_attr(&a)?;
        create(ctx, a.cqe, a.cq_context, a.channel, a.comp_vector)
    })
}

/// What an extended CQ may ask for: the standard fields, the single-threaded hint; no
/// parent domain, no overrun-ignoring CQ.
fn check_ex_attr(a: &ibv_cq_init_attr_ex) -> Result<(), i32> {
    if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
        return Err(libc::EINVAL);
    }
    let flags = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        a.flags
    } else {
        0
    };
    let unsupported = a.wc_flags & !IBV_WC_STANDARD_FLAGS != 0
        || a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0
        || flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0;
    if unsupported {
        Err(libc::EOPNOTSUPP)
    } else {
        Ok(())
    }
}
