//! The four rings an AF_XDP socket shares with the kernel (fill, completion, RX, TX): each
//! an array of entries mmap'd from the socket with a producer and a consumer index. One side
//! produces, the other consumes; indices only grow (wrapping) and the array is indexed
//! modulo its power-of-two size.
//!
//! [`Ring`] keeps cached copies of both indices so the shared ones are read only when the
//! cached view runs out, and written once per batch (`publish`/`release`), as libxdp does.

use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// One RX/TX descriptor (`struct xdp_desc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Desc {
    /// Offset of the frame in the UMEM.
    pub addr: u64,
    /// Its length.
    pub len: u32,
    /// Option bits (unused here).
    pub options: u32,
}

/// Where a ring's parts lie in its mapping (`struct xdp_ring_offset`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// A memory mapping, unmapped when dropped.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which thread unmaps it does not
// matter.
unsafe impl Send for Mapping {}
// SAFETY: a shared `&Mapping` gives only the address and length; what is read or written
// through them is the business of the ring or frame code, which does so atomically or
// under its owner's `&mut`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` at page offset `pgoff` (a ring), or anonymous memory when
    /// `fd` is -1 (the UMEM), shared, populated up front.
    pub(crate) fn new(fd: i32, len: usize, pgoff: i64) -> io::Result<Mapping> {
        let flags = if fd < 0 {
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE
        } else {
            libc::MAP_SHARED | libc::MAP_POPULATE
        };
        // SAFETY: asks for a fresh mapping at an address of the kernel's choosing, so no
        // existing memory is touched; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        Ok(Mapping { ptr, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value made; nothing refers to it after
        // the owner is dropped (rings and frames borrow from their socket).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// One ring of entries `T` (u64 frame addresses or [`Desc`]).
#[derive(Debug)]
pub(crate) struct Ring<T: Copy> {
    /// Kept for its lifetime: unmapped when the ring and every [`Level`] of it are dropped.
    _map: Arc<Mapping>,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<u32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    /// Our view of the producer and consumer indices.
    prod: u32,
    cons: u32,
    _t: PhantomData<T>,
}

// SAFETY: the ring's memory is owned by its mapping; the shared indices are atomics and the
// entries are plain integers, so moving the owner to another thread is sound.
unsafe impl<T: Copy + Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Map the ring of `size` entries (a power of two) at `pgoff` of socket `fd`.
    pub(crate) fn map(fd: i32, off: RingOffset, size: u32, pgoff: i64) -> io::Result<Ring<T>> {
        let len = off.desc as usize + size as usize * size_of::<T>();
        let map = Arc::new(Mapping::new(fd, len, pgoff)?);
        let at = |o: u64| -> io::Result<NonNull<u8>> {
            if o as usize + 4 > len {
                // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
                return Err(io::Error::other("ring offsets outside the mapping"));
            }
            // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
            // SAFETY: `o` is inside the mapping (checked above).
            NonNull::new(unsafe { map.as_ptr().add(o as usize) })
                .ok_or_else(|| io::Error::other("null ring"))
        };
        let producer = at(off.producer)?.cast::<AtomicU32>();
        let consumer = at(off.consumer)?.cast::<AtomicU32>();
        let flags = at(off.flags)?.cast::<u32>();
        let entries = at(off.desc)?.cast::<T>();
        let mut r = Ring {
            _map: map,
            producer,
            consumer,
            flags,
            entries,
            mask: size - 1,
            size,
            prod: 0,
            cons: 0,
            _t: PhantomData,
        };
        r.prod = r.shared_prod();
        r.cons = r.shared_cons();
        Ok(r)
    }

    fn shared_prod(&self) -> u32 {
        // SAFETY: the index lies inside the live mapping, 4-byte aligned as the kernel
        // lays it out; it is only ever accessed atomically.
        unsafe { self.producer.as_ref() }.load(Ordering::Acquire)
    }

    fn shared_cons(&self) -> u32 {
        // SAFETY: as in `shared_prod`.
        unsafe { self.consumer.as_ref() }.load(Ordering::Acquire)
    }

    /// A handle that reads how full the ring is, from any thread.
    pub(crate) fn level(&self) -> Level {
        Level {
            _map: self._map.clone(),
            producer: self.producer,
            consumer: self.consumer,
            size: self.size,
        }
    }

    /// The ring's size.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The kernel asks to be woken (need_wakeup).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: the flags word lies inside the mapping; the kernel changes it at any time,
        // so it is read as a volatile.
        unsafe { self.flags.as_ptr().read_volatile() & 1 != 0 }
    }

    // ---- our side produces (fill, TX) ----

    /// Entries we may produce now, looking at the kernel's consumer index when the cached
    /// view shows fewer than `want` (a stale view would say too few: what does not fit
    /// must then go elsewhere).
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.prod.wrapping_sub(self.cons);
        if free >= want {
            return free;
        }
        self.cons = self.shared_cons();
        self.size - self.prod.wrapping_sub(self.cons)
    }

    /// Entries produced but not yet taken by the kernel.
    pub(crate) fn outstanding(&mut self) -> u32 {
        self.cons = self.shared_cons();
        self.prod.wrapping_sub(self.cons)
    }

    /// Write the next entry (the caller checked [`Ring::free`]); seen by the kernel after
    /// [`Ring::publish`].
    pub(crate) fn push(&mut self, v: T) {
        debug_assert!(self.prod.wrapping_sub(self.cons) < self.size);
        // SAFETY: the index is masked into the entry array, which lies inside the mapping;
        // the slot is ours (between the consumer and the ring's end, checked by `free`).
        unsafe {
            self.entries
                .as_ptr()
                .add((self.prod & self.mask) as usize)
                .write(v)
        };
        self.prod = self.prod.wrapping_add(1);
    }

    /// Hand what was pushed to the kernel.
    pub(crate) fn publish(&self) {
        // SAFETY: as in `shared_prod`; the release store orders the entry writes before it.
        unsafe { self.producer.as_ref() }.store(self.prod, Ordering::Release);
    }

    // ---- the kernel produces (RX, completion) ----

    /// Entries ready to consume.
    pub(crate) fn ready(&mut self) -> u32 {
        let ready = self.prod.wrapping_sub(self.cons);
        if ready > 0 {
            return ready;
        }
        self.prod = self.shared_prod();
        self.prod.wrapping_sub(self.cons)
    }

    /// Ready entry `i` (below [`Ring::ready`]).
    pub(crate) fn get(&self, i: u32) -> T {
        debug_assert!(i < self.prod.wrapping_sub(self.cons));
        // SAFETY: masked into the entry array; the kernel published the entry (acquire
        // load of its producer index) and does not touch it until we release it.
        unsafe {
            self.entries
                .as_ptr()
                .add((self.cons.wrapping_add(i) & self.mask) as usize)
                .read()
        }
    }

    /// Give `n` consumed entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        self.cons = self.cons.wrapping_add(n);
        // SAFETY: as in `shared_prod`; the release store orders our reads before it.
        unsafe { self.consumer.as_ref() }.store(self.cons, Ordering::Release);
    }
}

/// How full a ring is, read from its shared indices: for a thread that watches the ring
/// while another consumes it (flow control on the receive ring).
#[derive(Debug, Clone)]
pub struct Level {
    _map: Arc<Mapping>,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    size: u32,
}

// SAFETY: the two indices are atomics inside a mapping the `Arc` keeps alive; `Level` only
// loads them, which any thread may do while the ring's owner and the kernel store them.
unsafe impl Send for Level {}
// SAFETY: as for `Send`: loads only.
unsafe impl Sync for Level {}

impl Level {
    /// Entries produced and not yet released by the consumer.
    pub fn get(&self) -> u32 {
        // SAFETY: both indices lie inside the live mapping, 4-byte aligned as the kernel
        // lays them out, and are only ever accessed atomically.
        let (p, c) = unsafe {
            (
                self.producer.as_ref().load(Ordering::Acquire),
                self.consumer.as_ref().load(Ordering::Acquire),
            )
        };
        p.wrapping_sub(c).min(self.size)
    }

    /// The ring's size.
    pub fn size(&self) -> u32 {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fill-style ring of 8 entries on a memfd; the "kernel" side is the shared indices.
    fn ring() -> (Ring<u64>, NonNull<AtomicU32>) {
        // SAFETY: memfd_create with a NUL-terminated name; the result is checked.
        let fd = unsafe { libc::memfd_create(c"ring-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: sizes the memfd just made and owned here.
        assert_eq!(unsafe { libc::ftruncate(fd, 4096) }, 0);
        let off = RingOffset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        let r = Ring::<u64>::map(fd, off, 8, 0).unwrap();
        // SAFETY: the mapping keeps the memory; the descriptor is no longer needed.
        unsafe { libc::close(fd) };
        let cons = r.consumer;
        (r, cons)
    }

    #[test]
    fn a_stale_view_is_refreshed_when_it_shows_fewer_than_wanted() {
        let (mut r, cons) = ring();
        assert_eq!(r.free(1), 8);
        for a in 0..7 {
            r.push(a);
        }
        r.publish();
        assert_eq!(r.free(1), 1, "the cached view suffices for one");
        // the kernel takes all seven
        // SAFETY: the consumer index lies in the live mapping.
        unsafe { cons.as_ref() }.store(7, Ordering::Release);
        assert_eq!(r.free(5), 8, "five wanted: the kernel's index is read");
        for a in 0..8 {
            r.push(a);
        }
        assert_eq!(r.free(1), 0);
    }

    #[test]
    fn a_level_reads_what_is_published_and_not_yet_released_from_another_thread() {
        let (mut r, cons) = ring();
        let level = r.level();
        assert_eq!(level.size(), 8);
        for a in 0..5 {
            r.push(a);
        }
        assert_eq!(level.get(), 0, "pushed but not published");
        r.publish();
        let seen = std::thread::spawn(move || level.get()).join().unwrap();
        assert_eq!(seen, 5);
        let level = r.level();
        // SAFETY: the consumer index lies in the live mapping.
        unsafe { cons.as_ref() }.store(3, Ordering::Release);
        assert_eq!(level.get(), 2);
        drop(r);
        // the mapping lives on with the level
        assert_eq!(level.get(), 2);
    }
}
