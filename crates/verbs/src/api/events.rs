//! Asynchronous events (`ibv_get_async_event`, `ibv_ack_async_event`): a responder QP's
//! error that no completion reports (`IBV_EVENT_QP_REQ_ERR` for an invalid request from
//! its peer, `IBV_EVENT_QP_ACCESS_ERR` for a refused access), the last WQE of a QP on a
//! shared receive queue once it is in error (`IBV_EVENT_QP_LAST_WQE_REACHED`), and a
//! shared receive queue below its armed limit (`IBV_EVENT_SRQ_LIMIT_REACHED`). The
//! context's `async_fd` is readable while one waits; the device keeps at most 1024
//! (`MAX_ASYNC_EVENTS`).

use super::context::context;
use super::qp::Qp;
use super::srq::Srq;
use super::util::{guard, minus_one};
use crate::abi::*;
use crate::core::AsyncEvent;
use crate::nic::Nic;
use crate::objects;
use libc::{c_int, c_void};
use std::sync::Arc;

/// The program's object an event names, if it still has it.
fn element(nic: &Arc<Nic>, e: AsyncEvent) -> Option<*mut c_void> {
    if e.kind == IBV_EVENT_SRQ_LIMIT_REACHED {
        let p = objects::find::<Srq>(|s| Arc::ptr_eq(&s.nic, nic) && s.id == e.id)?;
        Some(p.cast())
    } else {
        let p = objects::find::<Qp>(|q| Arc::ptr_eq(&q.nic, nic) && q.qpn == e.id)?;
        Some(p.cast())
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    minus_one(|| {
        let c = context(ctx).ok_or(libc::EINVAL)?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        loop {
            // one count per event: this sleeps until one comes (or fails with EAGAIN
            // where the program made the descriptor non-blocking)
            c.async_fd
                .take()
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
            let next = c.nic.lock().map_err(|e| e.errno())?.asyncs.pop();
            let Some(e) = next else { continue };
            // an event of an object the program destroyed since is passed over
            if let Some(p) = element(&c.nic, e) {
                // SAFETY: room for the event (non-null, checked).
                unsafe {
                    event.write(ibv_async_event {
                        element: p,
                        event_type: e.kind,
                    })
                };
                return Ok(());
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    guard((), || {
        if event.is_null() {
            return;
        }
        // SAFETY: an event `ibv_get_async_event` filled (non-null, checked).
        let e = unsafe { event.read() };
        // the object's count of events acknowledged, as libibverbs keeps it
        if e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED {
            if let Some(s) = super::srq::srq(e.element.cast()) {
                // SAFETY: a live SRQ; the count is ours to write.
                unsafe { (*s.c()).events_completed += 1 };
            }
        } else if let Some(q) = super::qp::qp(e.element.cast()) {
            // SAFETY: a live QP; the count is ours to write.
            unsafe { (*q.c()).qp_base.events_completed += 1 };
        }
    })
}
