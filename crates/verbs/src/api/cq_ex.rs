//! The extended CQ's polling: completions read one at a time between `start_poll` and
//! `end_poll`, each field by its own function. Every CQ of this library carries these
//! functions (an `ibv_cq_ex` is an `ibv_cq` with more behind it, `cq_make` puts them in),
//! so a CQ polls either way.

use super::cq::{Cq, cq};
use super::util::guard;
use crate::abi::*;
use crate::convert::wc_of;
use crate::objects::Object;
use libc::{c_int, c_uint};
use std::sync::atomic::Ordering;

/// Put the extended polling functions in a CQ being made.
pub(crate) fn fill_ops(c: &mut ibv_cq_ex) {
    c.start_poll = Some(start_poll);
    c.next_poll = Some(next_poll);
    c.end_poll = Some(end_poll);
    c.read_opcode = Some(read_opcode);
    c.read_vendor_err = Some(read_vendor_err);
    c.read_byte_len = Some(read_byte_len);
    c.read_imm_data = Some(read_imm_data);
    c.read_qp_num = Some(read_qp_num);
    c.read_src_qp = Some(read_src_qp);
    c.read_wc_flags = Some(read_wc_flags);
    c.read_slid = Some(read_slid);
    c.read_sl = Some(read_sl);
    c.read_dlid_path_bits = Some(read_dlid_path_bits);
}

/// The live CQ behind an extended CQ pointer.
fn cq_of(p: *mut ibv_cq_ex) -> Option<&'static Object<ibv_cq_ex, Cq>> {
    cq(p.cast::<ibv_cq>())
}

/// Take the next completion as the current one: 0, or ENOENT when none waits (after
/// running the device once if `progress`).
fn advance(p: *mut ibv_cq_ex, progress: bool) -> c_int {
    guard(libc::EIO, || {
        let Some(q) = cq_of(p) else {
            return libc::EINVAL;
        };
        let Ok(mut core) = q.r.nic.lock() else {
            return libc::EIO;
        };
        if progress && core.ep.cq_len(q.r.id) == 0 {
            q.r.nic.app_progress(&mut core);
        }
        let Some(c) = core.ep.poll_cq(q.r.id) else {
            return libc::ENOENT;
        };
        drop(core);
        let wc = wc_of(&c, q.r.ud.load(Ordering::Relaxed));
        let Ok(mut cur) = q.r.current.lock() else {
            return libc::EIO;
        };
        *cur = wc;
        // SAFETY: a live CQ: the status and WR ID are the program's to read after this
        // call, ours to write during it.
        unsafe {
            (*q.c()).status = wc.status;
            (*q.c()).wr_id = wc.wr_id;
        }
        0
    })
}

unsafe extern "C" fn start_poll(p: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: null or the caller's attribute structure.
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    advance(p, true)
}

unsafe extern "C" fn next_poll(p: *mut ibv_cq_ex) -> c_int {
    advance(p, false)
}

unsafe extern "C" fn end_poll(_p: *mut ibv_cq_ex) {}

/// A field of the current completion (zero for a CQ that is not one).
fn current<T: Default>(p: *mut ibv_cq_ex, f: impl FnOnce(&ibv_wc) -> T) -> T {
    guard(T::default(), || {
        cq_of(p)
            .and_then(|q| q.r.current.lock().ok().map(|w| f(&w)))
            .unwrap_or_default()
    })
}

unsafe extern "C" fn read_opcode(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.opcode)
}
unsafe extern "C" fn read_vendor_err(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.vendor_err)
}
unsafe extern "C" fn read_byte_len(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.byte_len)
}
unsafe extern "C" fn read_imm_data(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.imm_data)
}
unsafe extern "C" fn read_qp_num(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.qp_num)
}
unsafe extern "C" fn read_src_qp(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| w.src_qp)
}
unsafe extern "C" fn read_wc_flags(p: *mut ibv_cq_ex) -> c_uint {
    current(p, |w| w.wc_flags)
}
unsafe extern "C" fn read_slid(p: *mut ibv_cq_ex) -> u32 {
    current(p, |w| u32::from(w.slid))
}
unsafe extern "C" fn read_sl(p: *mut ibv_cq_ex) -> u8 {
    current(p, |w| w.sl)
}
unsafe extern "C" fn read_dlid_path_bits(p: *mut ibv_cq_ex) -> u8 {
    current(p, |w| w.dlid_path_bits)
}
