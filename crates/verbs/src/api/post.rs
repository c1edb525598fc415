//! Posting work (`ops.post_send`, `ops.post_recv`, reached through the header's inline
//! `ibv_post_send`/`ibv_post_recv`): each WR of the list checked and queued in turn; the
//! first refused is returned in `bad_wr` with its errno, those before it stay posted. What
//! was posted is sent before the call returns.

use super::ah::ah_dest;
use super::qp::{Qp, qp};
use super::util::{guard, qp_errno};
use super::wr::{each_wr, sg_list};
use crate::abi::*;
use crate::convert::send_op;
use crate::core::Core;
use libc::c_int;
use rocelink_transport::{MAX_INLINE, QpError, QpType, RecvWr, SendWr};

/// Read an inline send's bytes (its entries' memory, read now) into `buf`; returns how
/// many.
fn inline_data(sges: &[ibv_sge], max: u32, buf: &mut [u8; MAX_INLINE]) -> Result<usize, i32> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(max) || total > MAX_INLINE as u64 {
        return Err(libc::EINVAL);
    }
    let mut at = 0;
    for s in sges {
        let dst = &mut buf[at..at + s.length as usize];
        // SAFETY: the program names its own readable memory for an inline send (the verbs
        // contract: the bytes are read during the call and may change after it).
        unsafe { rocelink_io::raw::copy_from_address(s.addr as usize, dst) }
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
        at += dst.len();
    }
    Ok(at)
}

/// Queue one send WR.
fn post_one_send(core: &mut Core, q: &Qp, wr: &ibv_send_wr) -> Result<(), i32> {
    // SAFETY: the WR's list has `num_sge` entries (the program's WR).
    let (sg_list, raw) = unsafe { sg_list(wr.sg_list, wr.num_sge, q.cap.max_send_sge.max(1)) }?;
    let ah = if q.qp_type == QpType::Ud {
        Some(ah_dest(wr.ud_ah()).ok_or(libc::EINVAL)?)
    } else {
        None
    };
    let op = send_op(wr, q.qp_type, ah)?;
    let flags = wr.send_flags;
    let w = SendWr {
        wr_id: wr.wr_id,
        op,
        sg_list,
        signaled: q.sq_sig_all || flags & IBV_SEND_SIGNALED != 0,
        solicited: flags & IBV_SEND_SOLICITED != 0,
        marks: 0,
    };
    let r = if flags & IBV_SEND_INLINE != 0 {
        // on the stack: a small post is a latency test's every round trip
        let mut buf = [0u8; MAX_INLINE];
        let n = inline_data(raw, q.cap.max_inline_data, &mut buf)?;
        core.ep.post_send_inline(q.qpn, w, &buf[..n])
    } else {
        core.ep.post_send(q.qpn, w)
    };
    r.map_err(|e| match e {
        // rxe: posting before RTS is EINVAL; a full queue ENOMEM
        QpError::BadState(_) => libc::EINVAL,
        e => qp_errno(e),
    })
}

/// Run `f` on the live QP `p` and its device's state, locked: EINVAL for a QP that is not
/// one, EIO for a device that cannot be used (a panic, too).
fn on_qp(p: *mut ibv_qp, f: impl FnOnce(&Qp, &mut Core) -> c_int) -> c_int {
    guard(libc::EIO, || {
        let Some(o) = qp(p) else {
            return libc::EINVAL;
        };
        match o.r.nic.lock() {
            Ok(mut core) => f(&o.r, &mut core),
            Err(_) => libc::EIO,
        }
    })
}

/// Queue one receive WR.
fn post_one_recv(core: &mut Core, q: &Qp, w: &ibv_recv_wr) -> Result<(), i32> {
    // SAFETY: the WR's list has `num_sge` entries (the program's WR).
    let (sg_list, _) = unsafe { sg_list(w.sg_list, w.num_sge, q.cap.max_recv_sge.max(1)) }?;
    let r = RecvWr {
        wr_id: w.wr_id,
        sg_list,
    };
    core.ep.post_recv(q.qpn, r).map_err(|e| match e {
        QpError::BadState(_) => libc::EINVAL,
        e => qp_errno(e),
    })
}

pub unsafe extern "C" fn post_send(
    p: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    on_qp(p, |q, core| {
        // SAFETY: the program's WR list and bad-WR slot, as the verb takes them.
        let r = unsafe { each_wr(wr, bad, |w| w.next, |w| post_one_send(core, q, w)) };
        q.nic.app_transmit(core);
        r
    })
}

/// Post the WRs an extended QP's builder made, in order, as `post_send` posts a list: 0, or
/// the errno of the first refused (those before it stay posted).
pub(crate) fn post_built(p: *mut ibv_qp, wrs: &[ibv_send_wr]) -> c_int {
    on_qp(p, |q, core| {
        let r = wrs
            .iter()
            .find_map(|w| post_one_send(core, q, w).err())
            .unwrap_or(0);
        q.nic.app_transmit(core);
        r
    })
}

pub unsafe extern "C" fn post_recv(
    p: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    on_qp(p, |q, core| {
        // SAFETY: the program's WR list and bad-WR slot, as the verb takes them.
        let r = unsafe { each_wr(wr, bad, |w| w.next, |w| post_one_recv(core, q, w)) };
        if r == 0 {
            // a flushed receive (QP in ERROR) may wake a channel
            core.settle();
        }
        r
    })
}
