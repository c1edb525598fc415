//! Page-aligned buffers for direct I/O (`O_DIRECT` needs the memory, the file offset and
//! the length aligned to the device's logical block size; 4096 covers every device here).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// Alignment of [`AlignedBuf`] memory.
pub const ALIGN: usize = 4096;
/// A transparent huge page (x86-64, and arm64 with 4 KiB pages).
const HUGE: usize = 2 << 20;

/// A zero-initialised, 4096-aligned byte buffer whose capacity is a multiple of 4096.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
    /// From `mmap` (large buffers), not the allocator.
    mapped: bool,
}

// SAFETY: the buffer owns its allocation exclusively; moving it between threads moves
// that ownership, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer able to hold `cap` bytes (rounded up to 4096), length 0.
    pub fn new(cap: usize) -> AlignedBuf {
        let cap = cap.max(1).next_multiple_of(ALIGN);
        let layout = Layout::from_size_align(cap, ALIGN).unwrap_or(Layout::new::<u8>());
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf {
            ptr,
            cap,
            len: 0,
            mapped: false,
        }
    }

    /// A buffer of `len` zero bytes (capacity rounded up to 4096), in use: memory for a
    /// region whose payloads should start where cache lines and pages do (the kernel's
    /// copy into it is a fraction faster than into the 16-byte-aligned start a large
    /// `Vec` gets).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let mut b = AlignedBuf::new(len);
        b.len = len;
        b
    }

    /// As [`AlignedBuf::zeroed`], but an anonymous mapping whose pages are zero when first
    /// touched: a large ring costs nothing until it is written (the allocator's aligned
    /// zeroed path writes every byte up front, about a second per GiB here). Falls back to
    /// [`AlignedBuf::zeroed`] if the mapping fails.
    pub fn lazy_zeroed(len: usize) -> AlignedBuf {
        AlignedBuf::try_lazy_zeroed(len).unwrap_or_else(|| AlignedBuf::zeroed(len))
    }

    /// As [`AlignedBuf::lazy_zeroed`], but `None` where the mapping fails (more than the
    /// kernel will give), instead of an allocation that aborts the process.
    pub fn try_lazy_zeroed(len: usize) -> Option<AlignedBuf> {
        let cap = len.max(1).checked_next_multiple_of(ALIGN)?;
        // SAFETY: a fresh private anonymous mapping of `cap` bytes; no existing memory is
        // touched. The result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        match NonNull::new(raw.cast::<u8>()) {
            Some(ptr) if raw != libc::MAP_FAILED => Some(AlignedBuf {
                ptr,
                cap,
                len,
                mapped: true,
            }),
            _ => None,
        }
    }

    /// As [`AlignedBuf::zeroed`], but in an anonymous mapping aligned to 2 MiB that asks
    /// for transparent huge pages (`MADV_HUGEPAGE`, honoured where THP is `always` or
    /// `madvise`) and is populated up front (`MADV_POPULATE_WRITE`, Linux 5.14), so no page
    /// fault lands in a receive. For a ring the kernel copies payloads into and the ICRC
    /// reads back: one TLB entry per 2 MiB instead of per 4 KiB. Where huge pages are not
    /// given the pages are ordinary ones; where the mapping fails, [`AlignedBuf::zeroed`].
    pub fn huge_zeroed(len: usize) -> AlignedBuf {
        let cap = len.max(1).next_multiple_of(HUGE);
        let span = cap + HUGE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched. The
        // result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED || raw.is_null() {
            return AlignedBuf::zeroed(len);
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE);
        let (head, tail) = (aligned - start, start + span - (aligned + cap));
        // SAFETY: the head and tail are parts of the mapping just made that the buffer will
        // not use; unmapping them leaves exactly [aligned, aligned + cap) mapped, which
        // `Drop` unmaps as a whole. madvise only advises on that range.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + cap) as *mut libc::c_void, tail);
            }
            let p = aligned as *mut libc::c_void;
            libc::madvise(p, cap, libc::MADV_HUGEPAGE);
            libc::madvise(p, cap, libc::MADV_POPULATE_WRITE);
        }
        AlignedBuf {
            // SAFETY: `aligned` lies inside a successful mapping, so it is not null.
            ptr: unsafe { NonNull::new_unchecked(aligned as *mut u8) },
            cap,
            len,
            mapped: true,
        }
    }

    /// Capacity (a multiple of 4096).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Replace the contents with `data` (which must fit) and zero the tail up to the next
    /// 4096 boundary, so the padded length can be written with direct I/O.
    pub fn fill_from(&mut self, data: &[u8]) -> bool {
        if data.len() > self.cap {
            return false;
        }
        let padded = data.len().next_multiple_of(ALIGN);
        let all = self.as_mut_capacity();
        all[..data.len()].copy_from_slice(data);
        all[data.len()..padded].fill(0);
        self.len = data.len();
        true
    }

    /// The bytes in use.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `cap` initialised bytes (zeroed at allocation) and
        // `len <= cap`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes in use, padded with zeros to a multiple of 4096.
    pub fn padded(&self) -> &[u8] {
        let n = self.len.next_multiple_of(ALIGN).min(self.cap);
        // SAFETY: as in `as_slice`, with `n <= cap`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), n) }
    }

    fn as_mut_capacity(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is valid for `cap` initialised bytes and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for AlignedBuf {
    /// The bytes in use, mutable.
    fn as_mut(&mut self) -> &mut [u8] {
        let n = self.len;
        &mut self.as_mut_capacity()[..n]
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: mapped (`lazy_zeroed`, `huge_zeroed`) with exactly this length; no
            // reference outlives self.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.cap);
            }
            return;
        }
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.cap, ALIGN),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_padded() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.capacity(), 8192);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        assert!(b.fill_from(&[7u8; 4097]));
        assert_eq!(b.len(), 4097);
        assert_eq!(b.padded().len(), 8192);
        assert!(b.padded()[4097..].iter().all(|&x| x == 0));
        assert!(!b.fill_from(&[0u8; 9000]));
    }

    #[test]
    fn lazy_buffers_are_mapped_zeroed_and_writable() {
        let mut b = AlignedBuf::lazy_zeroed(3 << 20);
        assert!(b.mapped);
        assert_eq!((b.len(), b.capacity()), (3 << 20, 3 << 20));
        assert_eq!(b.as_ref().as_ptr() as usize % ALIGN, 0);
        assert!(b.as_ref().iter().step_by(4096).all(|&x| x == 0));
        b.as_mut()[(3 << 20) - 1] = 9;
        assert_eq!(b.as_ref()[(3 << 20) - 1], 9);
        assert!(!AlignedBuf::zeroed(3 << 20).mapped);
    }

    #[test]
    fn huge_buffers_are_2mib_aligned_zeroed_and_writable() {
        let mut b = AlignedBuf::huge_zeroed(5 << 20);
        assert!(b.mapped);
        assert_eq!((b.len(), b.capacity()), (5 << 20, 6 << 20));
        assert_eq!(b.as_ref().as_ptr() as usize % HUGE, 0);
        assert!(b.as_ref().iter().step_by(4096).all(|&x| x == 0));
        b.as_mut()[(5 << 20) - 1] = 9;
        assert_eq!(b.as_ref()[(5 << 20) - 1], 9);
        assert_eq!(b.as_mut().len(), 5 << 20);
    }

    #[test]
    fn zeroed_is_in_use_aligned_and_writable() {
        let mut b = AlignedBuf::zeroed(10_000);
        assert_eq!((b.len(), b.capacity()), (10_000, 12_288));
        assert_eq!(b.as_ref().as_ptr() as usize % ALIGN, 0);
        assert!(b.as_ref().iter().all(|&x| x == 0));
        b.as_mut()[9_999] = 5;
        assert_eq!(b.as_mut().len(), 10_000);
        assert_eq!(b.as_slice()[9_999], 5);
    }
}
