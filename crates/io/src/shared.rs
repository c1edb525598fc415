//! Receive memory whose pages are lent to readers without a copy.
//!
//! A [`SharedBuf`] is region memory with one owner — the receiver that writes into it — and
//! any number of [`SharedView`]s, each a range lent to a reader (a numpy array in Python,
//! say) that may outlive the receiver: the memory is freed when the owner and the last view
//! are gone. The owner must not write a range while a view of it exists; the receivers
//! here keep that promise with their transport's page holds (`rocelink_transport::Holds`),
//! which refuse every remote write into a lent page until its view is given back.

use crate::aligned::AlignedBuf;
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::Arc;

/// The memory, shared by the owner and its views.
#[derive(Debug)]
struct Inner {
    /// Owns (and frees) the memory `ptr` points into.
    _buf: UnsafeCell<AlignedBuf>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is written only through the unique owner (`SharedBuf::as_mut`, which
// takes `&mut`), and never in a range a view reads (the owner's promise, kept by page
// holds); views only read. Moving or sharing the allocation between threads is then as
// safe as for a `Vec<u8>` behind a lock.
unsafe impl Send for Inner {}
// SAFETY: as above: no two threads write the same bytes, and no byte is written while a
// view of it is read.
unsafe impl Sync for Inner {}

/// Region memory that can lend ranges of itself ([`SharedBuf::view`]).
#[derive(Debug)]
pub struct SharedBuf(Arc<Inner>);

impl SharedBuf {
    /// Share `buf` (its bytes in use).
    pub fn new(mut buf: AlignedBuf) -> SharedBuf {
        let len = buf.len();
        let ptr = buf.as_mut().as_mut_ptr();
        SharedBuf(Arc::new(Inner {
            _buf: UnsafeCell::new(buf),
            ptr,
            len,
        }))
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Lend `range` to a reader; `None` if it is not inside. The owner must not write it
    /// while the view lives.
    pub fn view(&self, range: Range<usize>) -> Option<SharedView> {
        view(&self.0, range)
    }

    /// A handle that lends views once the owner is out of reach (moved into a region).
    pub fn lender(&self) -> Lender {
        Lender(self.0.clone())
    }
}

fn view(mem: &Arc<Inner>, range: Range<usize>) -> Option<SharedView> {
    (range.start <= range.end && range.end <= mem.len).then(|| SharedView {
        mem: mem.clone(),
        range,
    })
}

/// Lends views of a [`SharedBuf`] (it keeps the memory allocated, and never writes it).
#[derive(Debug, Clone)]
pub struct Lender(Arc<Inner>);

impl Lender {
    /// As [`SharedBuf::view`].
    pub fn view(&self, range: Range<usize>) -> Option<SharedView> {
        view(&self.0, range)
    }
}

impl AsRef<[u8]> for SharedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised bytes for as long as `Inner` lives;
        // writes come only through `as_mut`, which needs `&mut self`.
        unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) }
    }
}

impl AsMut<[u8]> for SharedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is valid for `len` bytes; the owner is unique (`SharedBuf` is not
        // Clone) and views read only ranges the owner does not write while they live.
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len) }
    }
}

/// A range of a [`SharedBuf`] lent to a reader: the memory stays allocated while it lives.
#[derive(Debug, Clone)]
pub struct SharedView {
    mem: Arc<Inner>,
    range: Range<usize>,
}

impl SharedView {
    /// The first byte (valid for [`SharedView::len`] bytes while the view lives).
    pub fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }

    /// The lent bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the range lies inside the allocation (checked in `SharedBuf::view`),
        // which lives as long as `mem`; the owner does not write it while a view lives.
        unsafe { std::slice::from_raw_parts(self.mem.ptr.add(self.range.start), self.range.len()) }
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_outlives_its_owner_and_sees_what_was_written_before() {
        let mut b = SharedBuf::new(AlignedBuf::zeroed(10_000));
        b.as_mut()[100..104].copy_from_slice(&[1, 2, 3, 4]);
        let v = b.view(98..106).unwrap();
        assert!(b.view(9_999..10_001).is_none() && b.view(Range { start: 5, end: 4 }).is_none());
        let l = b.lender();
        drop(b);
        assert_eq!(l.view(100..102).unwrap().as_slice(), &[1, 2]);
        assert_eq!(v.as_slice(), &[0, 0, 1, 2, 3, 4, 0, 0]);
        assert_eq!(v.len(), 8);
    }
}
