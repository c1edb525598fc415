//! Memory another program part owns: a verbs application's buffer, registered with the
//! library and written by remote peers while the application's own threads read it.
//!
//! # The soundness argument
//! Such bytes are never a Rust value of ours: the application may read or write them on
//! another thread at any moment (a latency test spins on the byte a peer's WRITE changes;
//! a careless one refills a send buffer before its completion). A `&[u8]` or `&mut [u8]`
//! over them would promise the compiler that nobody else touches them while it lives, which
//! is exactly what cannot be promised. So [`RawMemory`] never forms one: it holds the
//! address and length, and every access is one `ptr::copy` between those bytes and a
//! buffer of ours (which is a Rust value, and is the only side a reference is formed to).
//! The compiler sees the foreign side only as memory behind a raw pointer that escaped to
//! other code, so it cannot assume the bytes stay put, cache them, or read them twice; what
//! a copy sees when the application writes at the same time is whatever bytes were there
//! (torn, at worst), as a NIC's DMA engine would see them, and nothing of ours depends on
//! their values (they are plain `u8`, with no invalid bit patterns). InfiniBand leaves such
//! contents undefined too: a send buffer changed before its completion, or a receive
//! buffer read before its completion.
//!
//! What the caller of [`RawMemory::new`] must promise in turn is that the range stays
//! mapped (readable, and writable where written) while the value lives; the verbs library
//! checks the mapping when memory is registered ([`mapped`]) and documents that memory must
//! be deregistered before it is unmapped — the rule InfiniBand devices state too.

use std::io;

/// A range of someone else's memory, accessed only by copies through raw pointers (see the
/// module documentation).
#[derive(Debug)]
pub struct RawMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the value is an address and a length; every access copies through raw pointers
// (never a reference), so moving it to or sharing it with another thread adds no aliasing
// promise. Concurrent accesses to the bytes themselves are the application's, as for a
// NIC writing its memory.
unsafe impl Send for RawMemory {}
// SAFETY: as above; `read` and `write` take `&self` and form no reference to the bytes.
unsafe impl Sync for RawMemory {}

impl RawMemory {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must stay mapped, readable, and writable if [`RawMemory::write`]
    /// is used, for as long as this value lives; `ptr + len` must not wrap.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> RawMemory {
        RawMemory { ptr, len }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its first byte's address.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    fn inside(&self, offset: usize, n: usize) -> bool {
        offset.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// Copy the `dst.len()` bytes at `offset` into `dst`; false (nothing copied) when they
    /// are not all inside.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.inside(offset, dst.len()) {
            return false;
        }
        if !dst.is_empty() {
            // SAFETY: `[offset, offset + dst.len())` lies inside the range the constructor's
            // caller promised mapped and readable; `dst` is our own buffer. `ptr::copy`
            // (memmove) also stays defined if a careless caller registered memory that
            // overlaps `dst`.
            unsafe { std::ptr::copy(self.ptr.add(offset), dst.as_mut_ptr(), dst.len()) };
        }
        true
    }

    /// Copy `src` to `offset`; false (nothing copied) when it does not fit inside.
    pub fn write(&self, offset: usize, src: &[u8]) -> bool {
        if !self.inside(offset, src.len()) {
            return false;
        }
        if !src.is_empty() {
            // SAFETY: inside the range promised mapped and writable; `src` is our own
            // buffer; memmove as in `read`.
            unsafe { std::ptr::copy(src.as_ptr(), self.ptr.add(offset), src.len()) };
        }
        true
    }
}

/// Copy the bytes at address `addr` of this process into `dst` (as many as it holds: an
/// inline send's data, read once when it is posted); an error when the range wraps.
///
/// # Safety
/// `[addr, addr + dst.len())` must be mapped and readable for the duration of the call.
pub unsafe fn copy_from_address(addr: usize, dst: &mut [u8]) -> io::Result<()> {
    let len = dst.len();
    if addr.checked_add(len).is_none() || (len > 0 && addr == 0) {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    if len > 0 {
        // SAFETY: the caller promises the range readable; `dst` is ours and `len` long,
        // and a Rust buffer cannot overlap memory the caller names as the program's.
        unsafe { std::ptr::copy(addr as *const u8, dst.as_mut_ptr(), len) };
    }
    Ok(())
}

/// Whether every page of `[addr, addr + len)` is mapped in this process with read access,
/// and write access if `write` (from `/proc/self/maps`), as `ibv_reg_mr` requires of the
/// memory it pins. `Err` when the map cannot be read.
pub fn mapped(addr: usize, len: usize, write: bool) -> io::Result<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(covered(&maps, addr, len, write))
}

/// Whether the mappings listed in `maps` (the format of `/proc/PID/maps`) cover
/// `[addr, addr + len)` with the access asked for, without a hole.
fn covered(maps: &str, addr: usize, len: usize, write: bool) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    if len == 0 || addr == 0 {
        return false;
    }
    let mut at = addr;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if b <= at || a > at {
            // the list is sorted: a mapping that starts past `at` leaves a hole
            if a > at {
                return false;
            }
            continue;
        }
        let p = perms.as_bytes();
        if p.first() != Some(&b'r') || (write && p.get(1) != Some(&b'w')) {
            return false;
        }
        at = b;
        if at >= end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_and_see_the_bytes() {
        let mut backing = vec![0u8; 64];
        // SAFETY: `backing` outlives `m` and is not otherwise touched while `m` is used.
        let m = unsafe { RawMemory::new(backing.as_mut_ptr(), backing.len()) };
        assert!(m.write(10, &[1, 2, 3]));
        assert!(!m.write(62, &[1, 2, 3]) && !m.write(usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(m.read(9, &mut out));
        assert_eq!(out, [0, 1, 2, 3]);
        assert!(!m.read(61, &mut out));
        assert!(m.read(64, &mut []));
        let _ = m;
        assert_eq!(&backing[10..13], &[1, 2, 3]);
    }

    #[test]
    fn the_map_must_cover_every_byte_with_the_access_asked() {
        let maps = "\
1000-3000 rw-p 00000000 00:00 0
3000-4000 r--p 00000000 00:00 0
5000-6000 rw-p 00000000 00:00 0 [heap]
";
        assert!(covered(maps, 0x1000, 0x2000, true));
        assert!(covered(maps, 0x2fff, 0x1001, false));
        assert!(!covered(maps, 0x2fff, 0x1001, true), "read-only page");
        assert!(!covered(maps, 0x3800, 0x1000, false), "hole at 0x4000");
        assert!(!covered(maps, 0x500, 0x10, false));
        assert!(!covered(maps, 0x5000, 0, false) && !covered(maps, 0, 16, false));
        assert!(!covered(maps, usize::MAX, 2, false));
        // this process's own stack is mapped
        let x = [0u8; 32];
        assert!(mapped(x.as_ptr() as usize, 32, true).unwrap());
        assert!(!mapped(8, 32, false).unwrap());
    }
}
