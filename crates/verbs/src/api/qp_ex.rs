//! The extended QP's work-request builder (`ibv_wr_start`, `ibv_wr_rdma_write`,
//! `ibv_wr_set_sge`, …, `ibv_wr_complete`), and `ibv_qp_to_qp_ex`. The builder collects the requests as `ibv_send_wr`s and posts them
//! with `ibv_post_send`'s own checks when completed, all or — at the first one refused —
//! those before it, as `ibv_post_send` does; a builder call this device cannot carry out
//! (memory windows, TSO, XRC, atomic write) makes `ibv_wr_complete` answer EOPNOTSUPP and
//! post nothing.

use super::post::post_built;
use super::qp::qp;
use super::util::{guard, ptr_or_errno};
use super::wr::{Builder, Pending};
use crate::abi::*;
use libc::{c_int, c_void};

/// Put the builder's functions in a QP being made.
pub(crate) fn fill_ops(x: &mut ibv_qp_ex) {
    x.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    x.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    x.wr_bind_mw = Some(wr_bind_mw);
    x.wr_local_inv = Some(wr_unsupported_u32);
    x.wr_rdma_read = Some(wr_rdma_read);
    x.wr_rdma_write = Some(wr_rdma_write);
    x.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    x.wr_send = Some(wr_send);
    x.wr_send_imm = Some(wr_send_imm);
    x.wr_send_inv = Some(wr_unsupported_u32);
    x.wr_send_tso = Some(wr_send_tso);
    x.wr_set_ud_addr = Some(wr_set_ud_addr);
    x.wr_set_xrc_srqn = Some(wr_unsupported_u32);
    x.wr_set_inline_data = Some(wr_set_inline_data);
    x.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    x.wr_set_sge = Some(wr_set_sge);
    x.wr_set_sge_list = Some(wr_set_sge_list);
    x.wr_start = Some(wr_start);
    x.wr_complete = Some(wr_complete);
    x.wr_abort = Some(wr_abort);
    x.wr_atomic_write = Some(wr_atomic_write);
}

/// `ibv_qp_to_qp_ex`: the builder of a QP created with send operations; null otherwise
/// (as providers answer for a QP made without them).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(p: *mut ibv_qp) -> *mut ibv_qp_ex {
    ptr_or_errno(|| {
        let o = qp(p).ok_or(libc::EINVAL)?;
        if o.r.send_ops == 0 {
            return Err(libc::EOPNOTSUPP);
        }
        Ok(o.c())
    })
}

/// Run `f` on the builder of QP `x` (nothing for a pointer that is no QP).
fn with_builder(x: *mut ibv_qp_ex, f: impl FnOnce(&mut Builder, &ibv_qp_ex)) {
    guard((), || {
        let Some(o) = qp(x.cast::<ibv_qp>()) else {
            return;
        };
        let Ok(mut b) = o.r.builder.lock() else {
            return;
        };
        // SAFETY: a live QP: the program set `wr_id` and `wr_flags` before this call and
        // does not write them during it.
        let c = unsafe { &*o.c() };
        f(&mut b, c);
    })
}

/// Start a request of `opcode` with the QP's current WR ID and flags; `fill` sets its
/// operation's fields (`wr.rdma`, `wr.atomic`, the immediate).
fn begin(x: *mut ibv_qp_ex, opcode: u32, fill: impl FnOnce(&mut ibv_send_wr)) {
    with_builder(x, |b, c| {
        // SAFETY: `ibv_send_wr` is C data whose all-zero bytes are valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = c.wr_id;
        wr.send_flags = c.wr_flags;
        wr.opcode = opcode;
        fill(&mut wr);
        b.pending.push(Pending {
            wr,
            sges: Vec::new(),
            inline: Vec::new(),
        });
    });
}

/// Change the request begun last (an error if none was).
fn last(x: *mut ibv_qp_ex, f: impl FnOnce(&mut Pending) -> Result<(), c_int>) {
    with_builder(x, |b, _| {
        let r = match b.pending.last_mut() {
            Some(p) => f(p),
            None => Err(libc::EINVAL),
        };
        if let Err(e) = r {
            b.error.get_or_insert(e);
        }
    });
}

/// Note an operation this device does not offer.
fn refuse(x: *mut ibv_qp_ex) {
    with_builder(x, |b, _| {
        b.error.get_or_insert(libc::EOPNOTSUPP);
    });
}

unsafe extern "C" fn wr_start(x: *mut ibv_qp_ex) {
    with_builder(x, |b, _| *b = Builder::default());
}

unsafe extern "C" fn wr_abort(x: *mut ibv_qp_ex) {
    with_builder(x, |b, _| *b = Builder::default());
}

unsafe extern "C" fn wr_complete(x: *mut ibv_qp_ex) -> c_int {
    guard(libc::EIO, || {
        let Some(o) = qp(x.cast::<ibv_qp>()) else {
            return libc::EINVAL;
        };
        let Ok(mut b) = o.r.builder.lock() else {
            return libc::EIO;
        };
        let Builder { mut pending, error } = std::mem::take(&mut *b);
        drop(b);
        if let Some(e) = error {
            return e;
        }
        // the lists point into each request's own vectors, which live until posted
        let wrs: Vec<ibv_send_wr> = pending
            .iter_mut()
            .map(|p| {
                let mut wr = p.wr;
                if !p.inline.is_empty() {
                    p.sges = vec![ibv_sge {
                        addr: p.inline.as_ptr() as u64,
                        length: p.inline.len() as u32,
                        lkey: 0,
                    }];
                }
                wr.num_sge = p.sges.len() as c_int;
                wr.sg_list = if p.sges.is_empty() {
                    std::ptr::null_mut()
                } else {
                    p.sges.as_mut_ptr()
                };
                wr
            })
            .collect();
        post_built(x.cast::<ibv_qp>(), &wrs)
    })
}

unsafe extern "C" fn wr_send(x: *mut ibv_qp_ex) {
    begin(x, IBV_WR_SEND, |_| {});
}

unsafe extern "C" fn wr_send_imm(x: *mut ibv_qp_ex, imm: u32) {
    begin(x, IBV_WR_SEND_WITH_IMM, |w| w.imm_data = imm);
}

unsafe extern "C" fn wr_rdma_write(x: *mut ibv_qp_ex, rkey: u32, va: u64) {
    begin(x, IBV_WR_RDMA_WRITE, |w| {
        w.wr[..2].copy_from_slice(&[va, u64::from(rkey)])
    });
}

unsafe extern "C" fn wr_rdma_write_imm(x: *mut ibv_qp_ex, rkey: u32, va: u64, imm: u32) {
    begin(x, IBV_WR_RDMA_WRITE_WITH_IMM, |w| {
        w.wr[..2].copy_from_slice(&[va, u64::from(rkey)]);
        w.imm_data = imm;
    });
}

unsafe extern "C" fn wr_rdma_read(x: *mut ibv_qp_ex, rkey: u32, va: u64) {
    begin(x, IBV_WR_RDMA_READ, |w| {
        w.wr[..2].copy_from_slice(&[va, u64::from(rkey)])
    });
}

unsafe extern "C" fn wr_atomic_cmp_swp(x: *mut ibv_qp_ex, rkey: u32, va: u64, cmp: u64, swap: u64) {
    begin(x, IBV_WR_ATOMIC_CMP_AND_SWP, |w| {
        w.wr = [va, cmp, swap, u64::from(rkey)];
    });
}

unsafe extern "C" fn wr_atomic_fetch_add(x: *mut ibv_qp_ex, rkey: u32, va: u64, add: u64) {
    begin(x, IBV_WR_ATOMIC_FETCH_AND_ADD, |w| {
        w.wr = [va, add, 0, u64::from(rkey)];
    });
}

unsafe extern "C" fn wr_set_ud_addr(x: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    last(x, |p| {
        p.wr.wr[0] = ah as usize as u64;
        p.wr.wr[1] = u64::from(qpn) | u64::from(qkey) << 32;
        Ok(())
    });
}

unsafe extern "C" fn wr_set_sge(x: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    last(x, |p| {
        p.sges = vec![ibv_sge { addr, length, lkey }];
        Ok(())
    });
}

unsafe extern "C" fn wr_set_sge_list(x: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    last(x, |p| {
        if n > rocelink_transport::MAX_SGE || (n > 0 && list.is_null()) {
            return Err(libc::EINVAL);
        }
        p.sges = if n == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `n` entries at `list` (non-null, checked).
            unsafe { std::slice::from_raw_parts(list, n) }.to_vec()
        };
        Ok(())
    });
}

unsafe extern "C" fn wr_set_inline_data(x: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buf = ibv_data_buf { addr, length };
    // SAFETY: one buffer, on the stack.
    unsafe { wr_set_inline_data_list(x, 1, &buf) };
}

unsafe extern "C" fn wr_set_inline_data_list(
    x: *mut ibv_qp_ex,
    n: usize,
    list: *const ibv_data_buf,
) {
    last(x, |p| {
        if n > 0 && list.is_null() {
            return Err(libc::EINVAL);
        }
        let bufs = if n == 0 {
            &[][..]
        } else {
            // SAFETY: the caller passes `n` buffer descriptions at `list` (non-null).
            unsafe { std::slice::from_raw_parts(list, n) }
        };
        let total = bufs
            .iter()
            .try_fold(0usize, |t, b| t.checked_add(b.length))
            .filter(|&t| t <= rocelink_transport::MAX_INLINE)
            .ok_or(libc::EINVAL)?;
        let mut data = vec![0u8; total];
        let mut at = 0;
        for b in bufs {
            let dst = &mut data[at..at + b.length];
            // SAFETY: the program names its own readable memory for inline data, read
            // now (the verbs contract).
            unsafe { rocelink_io::raw::copy_from_address(b.addr as usize, dst) }
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EFAULT))?;
            at += b.length;
        }
        p.inline = data;
        p.wr.send_flags |= IBV_SEND_INLINE;
        Ok(())
    });
}

unsafe extern "C" fn wr_bind_mw(
    x: *mut ibv_qp_ex,
    _mw: *mut c_void,
    _rkey: u32,
    _b: *const c_void,
) {
    refuse(x);
}

unsafe extern "C" fn wr_unsupported_u32(x: *mut ibv_qp_ex, _v: u32) {
    refuse(x);
}

unsafe extern "C" fn wr_send_tso(x: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    refuse(x);
}

unsafe extern "C" fn wr_atomic_write(x: *mut ibv_qp_ex, _rkey: u32, _va: u64, _wr: *const c_void) {
    refuse(x);
}
