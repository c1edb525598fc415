//! Completion channels, and completion queues once made (`cq_make`): destroy and resize,
//! `poll_cq` and `req_notify_cq` (reached through the context's ops table), and the events
//! a channel delivers.

use super::context::context;
use super::util::{guard, minus_one, ptr_or_errno, status};
use crate::abi::*;
use crate::attrs::MAX_CQE;
use crate::channel::{Channel, CqEvent};
use crate::convert::wc_of;
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj};
use libc::{c_int, c_uint, c_void};
use rocelink_transport::CqId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A completion channel.
#[derive(Debug)]
pub(crate) struct ChannelObj {
    pub(crate) chan: Arc<Channel>,
    /// CQs that deliver to it.
    pub(crate) users: AtomicUsize,
}

impl Obj for ChannelObj {
    type C = ibv_comp_channel;
    const KIND: Kind = Kind::Channel;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    ptr_or_errno(|| {
        context(ctx).ok_or(libc::EINVAL)?;
        let chan = Arc::new(Channel::new().map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?);
        Ok(objects::publish(
            ibv_comp_channel {
                context: ctx,
                fd: chan.fd(),
                refcnt: 0,
            },
            ChannelObj {
                chan,
                users: AtomicUsize::new(0),
            },
        ))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    status(|| {
        let c = objects::get::<ChannelObj>(ch).ok_or(libc::EINVAL)?;
        if c.r.users.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        objects::retire::<ChannelObj>(ch)
            .map(drop)
            .ok_or(libc::EINVAL)
    })
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct Cq {
    pub(crate) nic: Arc<Nic>,
    pub(crate) id: CqId,
    /// The channel its events go to, and that channel's handle.
    pub(crate) channel: Option<(usize, Arc<Channel>)>,
    /// Events delivered and acknowledged (`ibv_ack_cq_events`).
    pub(crate) events: Mutex<(u64, u64)>,
    /// QPs that complete into it.
    pub(crate) users: AtomicUsize,
    /// Whether its QPs are UD (their receives carry a GRH): set by the first QP.
    pub(crate) ud: std::sync::atomic::AtomicBool,
    /// The completion the extended polling functions read (between `start_poll` and
    /// `end_poll`).
    pub(crate) current: Mutex<ibv_wc>,
}

impl Obj for Cq {
    type C = ibv_cq_ex;
    const KIND: Kind = Kind::Cq;
}

/// The CQ an `ibv_cq *` (or `ibv_cq_ex *`: the same address) names.
pub(crate) fn cq(p: *const ibv_cq) -> Option<&'static objects::Object<ibv_cq_ex, Cq>> {
    objects::get::<Cq>(p.cast())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(p: *mut ibv_cq) -> c_int {
    status(|| {
        let q = cq(p).ok_or(libc::EINVAL)?;
        if q.r.users.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        let mut core = q.r.nic.lock().map_err(|e| e.errno())?;
        core.ep.destroy_cq(q.r.id).map_err(super::util::qp_errno)?;
        core.disarm(q.r.id);
        q.r.nic.note_armed(&core);
        drop(core);
        if let Some((h, _)) = &q.r.channel
            && let Some(ch) = objects::get::<ChannelObj>(*h as *const ibv_comp_channel)
        {
            ch.r.users.fetch_sub(1, Ordering::AcqRel);
            // SAFETY: a live channel: its refcnt is ours to write.
            unsafe { (*ch.c()).refcnt -= 1 };
        }
        objects::retire::<Cq>(p.cast())
            .map(drop)
            .ok_or(libc::EINVAL)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resize_cq(p: *mut ibv_cq, cqe: c_int) -> c_int {
    status(|| {
        let q = cq(p).ok_or(libc::EINVAL)?;
        if cqe < 1 || cqe as u32 > MAX_CQE {
            return Err(libc::EINVAL);
        }
        let waiting = q.r.nic.lock().map_err(|e| e.errno())?.ep.cq_len(q.r.id);
        if (cqe as usize) < waiting {
            return Err(libc::EINVAL);
        }
        // SAFETY: a live CQ; `cqe` is an int the program reads and we write.
        unsafe { (*q.c()).cq.cqe = cqe };
        Ok(())
    })
}

/// `ops.poll_cq`: up to `n` completions into `wc`, after running the device once when
/// fewer than `n` wait. Returns how many, or -1 for a bad argument.
pub unsafe extern "C" fn poll_cq(p: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard(-1, || {
        let Some(q) = cq(p) else { return -1 };
        if n < 0 || (n > 0 && wc.is_null()) {
            return -1;
        }
        let Ok(mut core) = q.r.nic.lock() else {
            return -1;
        };
        if core.ep.cq_len(q.r.id) < n as usize {
            q.r.nic.app_progress(&mut core);
        }
        let ud = q.r.ud.load(Ordering::Relaxed);
        let mut got = 0;
        while got < n {
            let Some(c) = core.ep.poll_cq(q.r.id) else {
                break;
            };
            // SAFETY: the caller passes room for `n` completions (`got < n`).
            unsafe { wc.add(got as usize).write(wc_of(&c, ud)) };
            got += 1;
        }
        got
    })
}

/// `ops.req_notify_cq`: one event on the CQ's channel at its next completion (with
/// `solicited_only`, its next solicited receive or error).
pub unsafe extern "C" fn req_notify_cq(p: *mut ibv_cq, solicited_only: c_int) -> c_int {
    status(|| {
        let q = cq(p).ok_or(libc::EINVAL)?;
        let (_, chan) = q.r.channel.as_ref().ok_or(libc::EINVAL)?;
        // SAFETY: a live CQ: its `cq_context` was set when it was made.
        let context = unsafe { (*q.c()).cq.cq_context } as usize;
        let ev = CqEvent {
            cq: p as usize,
            context,
        };
        let mut core = q.r.nic.lock().map_err(|e| e.errno())?;
        core.arm(q.r.id, solicited_only != 0, chan.clone(), ev);
        q.r.nic.note_armed(&core);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    context_out: *mut *mut c_void,
) -> c_int {
    minus_one(|| {
        let c = objects::get::<ChannelObj>(ch).ok_or(libc::EINVAL)?;
        if cq_out.is_null() || context_out.is_null() {
            return Err(libc::EINVAL);
        }
        let ev =
            c.r.chan
                .next()
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EAGAIN))?;
        if let Some(q) = cq(ev.cq as *const ibv_cq)
            && let Ok(mut e) = q.r.events.lock()
        {
            e.0 += 1;
        }
        // SAFETY: the caller passes room for the two pointers (non-null, checked).
        unsafe {
            cq_out.write(ev.cq as *mut ibv_cq);
            context_out.write(ev.context as *mut c_void);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(p: *mut ibv_cq, nevents: c_uint) {
    guard((), || {
        let Some(q) = cq(p) else { return };
        if let Ok(mut e) = q.r.events.lock() {
            e.1 = (e.1 + u64::from(nevents)).min(e.0);
            // SAFETY: a live CQ; the count is ours to write, under `events`' lock.
            unsafe { (*q.c()).cq.comp_events_completed = e.1 as u32 };
        }
    })
}
