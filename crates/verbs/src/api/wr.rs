//! Work requests as programs hand them over: scatter/gather lists, WR lists, and the
//! requests an extended QP's builder collects before `ibv_wr_complete` posts them.

use crate::abi::*;
use libc::c_int;
use rocelink_transport::{MAX_RECV_SGE, SgList, Sge};

/// The scatter/gather list of a WR: `num_sge` entries at `list` (at most `max`).
///
/// # Safety
/// `list` points at `num_sge` entries when `num_sge > 0`, unchanged for `'a` (the call).
pub(crate) unsafe fn sg_list<'a>(
    list: *const ibv_sge,
    num_sge: c_int,
    max: u32,
) -> Result<(SgList, &'a [ibv_sge]), i32> {
    if num_sge < 0 || num_sge as u32 > max || (num_sge > 0 && list.is_null()) {
        return Err(libc::EINVAL);
    }
    if num_sge == 0 {
        // no entries: a zero-length message
        return Ok((SgList::one(Sge::discard(0)), &[]));
    }
    // SAFETY: `num_sge` entries at `list` (the caller's promise; the count was checked),
    // which the program leaves alone until the verb returns.
    let raw = unsafe { std::slice::from_raw_parts(list, num_sge as usize) };
    if raw.len() > MAX_RECV_SGE {
        return Err(libc::EINVAL);
    }
    // no allocation: a post is on a latency test's every round trip
    let mut sges = [Sge::discard(0); MAX_RECV_SGE];
    for (d, s) in sges.iter_mut().zip(raw) {
        *d = Sge {
            lkey: s.lkey,
            va: s.addr,
            len: s.length,
        };
    }
    let l = SgList::new(&sges[..raw.len()]).ok_or(libc::EINVAL)?;
    Ok((l, raw))
}

/// Walk a WR list, `post` each, stop at the first refused (into `bad`).
///
/// # Safety
/// `first` is null or the head of a list of valid WRs; `bad` is null or writable.
pub(crate) unsafe fn each_wr<W>(
    first: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), i32>,
) -> c_int {
    let mut wr = first;
    while !wr.is_null() {
        // SAFETY: a WR of the program's list, not touched by it during the call.
        let w = unsafe { &*wr };
        if let Err(e) = post(w) {
            if !bad.is_null() {
                // SAFETY: room for the pointer (non-null, checked).
                unsafe { bad.write(wr) };
            }
            return e;
        }
        wr = next(w);
    }
    0
}

/// One request being built: the WR and what its lists point at.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) wr: ibv_send_wr,
    pub(crate) sges: Vec<ibv_sge>,
    /// Inline data, copied when set (the program may reuse its buffer at once).
    pub(crate) inline: Vec<u8>,
}

/// A QP's requests between `wr_start` and `wr_complete`, and the first error met.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    pub(crate) pending: Vec<Pending>,
    pub(crate) error: Option<c_int>,
}

// SAFETY: the raw pointers inside (`ibv_send_wr`'s list and next, an AH) are addresses
// the builder only hands to the posting code on the thread that completes the batch,
// under the QP's builder lock; they own nothing.
unsafe impl Send for Builder {}
