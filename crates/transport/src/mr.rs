//! Memory regions: byte buffers registered with a virtual-address base, access flags and
//! keys. Every remote access is checked against R_Key, access flags and `[va, va + len)`
//! before a byte moves.

use crate::holds::Holds;
use crate::keymap::KeyMap;
use std::ops::Range;
use std::sync::Arc;

/// Access rights of a region (`ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// The local QP may write (RECV buffers, READ destinations).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ.
    pub const REMOTE_READ: Access = Access(4);
    /// Peers may run atomics (compare-and-swap, fetch-and-add) on 8-byte words.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// No rights beyond local read.
    pub const NONE: Access = Access(0);

    /// True when every right in `o` is granted.
    pub const fn contains(self, o: Access) -> bool {
        self.0 & o.0 == o.0
    }

    /// These rights less those of `o`.
    pub const fn without(self, o: Access) -> Access {
        Access(self.0 & !o.0)
    }

    /// The rights granted by both.
    pub const fn intersection(self, o: Access) -> Access {
        Access(self.0 & o.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// Keys of a registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    /// Local key (used in scatter/gather entries).
    pub lkey: u32,
    /// Remote key (what a peer puts in a RETH).
    pub rkey: u32,
    /// VA of the first byte.
    pub va: u64,
    /// Length in bytes.
    pub len: usize,
}

/// Why an access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// No region has this key.
    #[error("unknown key {0:#x}")]
    UnknownKey(u32),
    /// The region does not grant the access.
    #[error("access not permitted")]
    Denied,
    /// `[va, va+len)` is not inside the region.
    #[error("range {va:#x}+{len} outside the region")]
    OutOfBounds {
        /// Start.
        va: u64,
        /// Length.
        len: u64,
    },
    /// `[va, va+len)` is not inside the write window of a ring region
    /// ([`AddressMap::Ring`]): the consumer has not freed that space yet (or has already
    /// moved past it).
    #[error("range {va:#x}+{len} outside the ring's window")]
    OutsideWindow {
        /// Start.
        va: u64,
        /// Length.
        len: u64,
    },
    /// `[va, va+len)` touches a page the application still holds ([`crate::Holds`]).
    #[error("range {va:#x}+{len} touches a page the application holds")]
    Held {
        /// Start.
        va: u64,
        /// Length.
        len: u64,
    },
    /// The region's memory is shared with the application ([`SharedMemory`]): it is only
    /// ever copied, never lent out as a slice.
    #[error("the region's memory is the application's: it is copied, not lent")]
    Shared,
}

/// Memory a region is registered over: the caller's own bytes (a boxed slice, a vector,
/// page-aligned or hugepage memory, later AF_XDP UMEM), owned by the region while it is
/// registered and given back by [`crate::Endpoint::deregister_mr`]. Anything that is
/// `AsRef<[u8]> + AsMut<[u8]> + Send` is region memory, so other crates' buffer types need
/// no dependency on this one.
pub trait RegionMemory: Send + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, mutable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<T: AsRef<[u8]> + AsMut<[u8]> + Send + 'static> RegionMemory for T {
    fn bytes(&self) -> &[u8] {
        self.as_ref()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut()
    }
}

/// Memory that stays someone else's while it is registered — a verbs program's buffer,
/// which its threads read and write whenever they like (a latency test polls the byte a
/// peer's WRITE changes). The endpoint therefore never lends it out as a slice: every
/// access is a copy through these calls, and the implementation (`rocelink-io`'s raw
/// memory) goes through raw pointers, never through a Rust reference to those bytes.
/// Each call copies nothing and returns false when its range is not inside.
pub trait SharedMemory: Send + Sync + 'static {
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copy the `dst.len()` bytes at `offset` into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]) -> bool;
    /// Copy `src` to `offset`.
    fn write(&self, offset: usize, src: &[u8]) -> bool;
}

/// What a region is registered over: memory it owns, or memory it shares.
pub enum Memory {
    /// Owned by the region while registered ([`RegionMemory`]).
    Owned(Box<dyn RegionMemory>),
    /// The application's, copied in and out ([`SharedMemory`]).
    Shared(Box<dyn SharedMemory>),
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Memory::Owned(m) => write!(f, "Owned({} bytes)", m.bytes().len()),
            Memory::Shared(m) => write!(f, "Shared({} bytes)", m.len()),
        }
    }
}

impl Memory {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Memory::Owned(m) => m.bytes().len(),
            Memory::Shared(m) => m.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owned memory (`None` for shared memory).
    pub fn into_owned(self) -> Option<Box<dyn RegionMemory>> {
        match self {
            Memory::Owned(m) => Some(m),
            Memory::Shared(_) => None,
        }
    }

    /// Copy the bytes at `offset` into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        match self {
            Memory::Owned(m) => match offset
                .checked_add(dst.len())
                .and_then(|end| m.bytes().get(offset..end))
            {
                Some(b) => {
                    dst.copy_from_slice(b);
                    true
                }
                None => false,
            },
            Memory::Shared(m) => m.read(offset, dst),
        }
    }

    /// Copy `src` to `offset`.
    fn write(&mut self, offset: usize, src: &[u8]) -> bool {
        match self {
            Memory::Owned(m) => match offset
                .checked_add(src.len())
                .and_then(|end| m.bytes_mut().get_mut(offset..end))
            {
                Some(b) => {
                    b.copy_from_slice(src);
                    true
                }
                None => false,
            },
            Memory::Shared(m) => m.write(offset, src),
        }
    }

    /// The bytes, if the region owns them.
    fn owned(&self) -> Option<&[u8]> {
        match self {
            Memory::Owned(m) => Some(m.bytes()),
            Memory::Shared(_) => None,
        }
    }

    /// The bytes, mutable, if the region owns them.
    fn owned_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Memory::Owned(m) => Some(m.bytes_mut()),
            Memory::Shared(_) => None,
        }
    }
}

/// How virtual addresses map to a region's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressMap {
    /// `[va, va + len)` onto the bytes in order (verbs' regions).
    Linear,
    /// The whole 64-bit VA space onto a ring: address `va` is byte `va mod len`, and an
    /// access is allowed only inside the window `[start, start + window)` (taken modulo
    /// 2⁶⁴) and only if it does not straddle the ring's end — the IMS ring buffer, whose
    /// window the consumer moves forward as it frees space.
    Ring {
        /// First VA of the window.
        start: u64,
        /// Window length in bytes (at most the ring's length).
        window: u64,
    },
}

/// The bytes of a linear region that a run of remote writes may fill in place, as
/// [`MemoryRegion::in_place_span`] found them: REMOTE_WRITE granted, in bounds, no page
/// held. It holds while the region's map and holds do not change: for one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InPlaceSpan<'r> {
    /// The VA of the region's byte 0.
    va0: u64,
    /// The region's bytes, up to the end of the span.
    bytes: &'r [u8],
}

impl<'r> InPlaceSpan<'r> {
    /// The bytes at `offset`, if the remote write of `[va, va + len)` lies there, inside
    /// the span.
    #[inline]
    pub(crate) fn bytes(&self, va: u64, len: usize, offset: usize) -> Option<&'r [u8]> {
        if va.wrapping_sub(self.va0) != offset as u64 {
            return None;
        }
        self.bytes.get(offset..offset.checked_add(len)?)
    }
}

/// A registered region.
pub struct MemoryRegion {
    keys: MrKeys,
    access: Access,
    map: AddressMap,
    mem: Memory,
    holds: Option<Arc<Holds>>,
    /// The protection domain it belongs to (0 unless set): only QPs of the same one reach it.
    pd: u32,
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("keys", &self.keys)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl MemoryRegion {
    /// Keys and bounds.
    pub fn keys(&self) -> MrKeys {
        self.keys
    }
    /// Access flags.
    pub fn access(&self) -> Access {
        self.access
    }
    /// The bytes (none for a region over [`SharedMemory`], which is never lent out).
    pub fn bytes(&self) -> &[u8] {
        self.mem.owned().unwrap_or(&[])
    }
    /// The bytes, mutable (local access by the owner; none for [`SharedMemory`]).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.mem.owned_mut().unwrap_or(&mut [])
    }

    /// Whether the region is over [`SharedMemory`] (copied, never lent out as a slice).
    pub fn is_shared(&self) -> bool {
        matches!(self.mem, Memory::Shared(_))
    }

    /// Copy `dst.len()` bytes at `va` into `dst`, checked for `need` and bounds (the
    /// application's own read, or the endpoint's of a shared region).
    pub fn read(&self, va: u64, dst: &mut [u8], need: Access) -> Result<(), AccessError> {
        let len = dst.len() as u64;
        let off = self.check(va, len, need)?;
        if self.mem.read(off, dst) {
            Ok(())
        } else {
            Err(AccessError::OutOfBounds { va, len })
        }
    }

    /// Copy `src` to `va`, checked for `need` and bounds.
    pub fn write(&mut self, va: u64, src: &[u8], need: Access) -> Result<(), AccessError> {
        let len = src.len() as u64;
        let off = self.check(va, len, need)?;
        if self.mem.write(off, src) {
            Ok(())
        } else {
            Err(AccessError::OutOfBounds { va, len })
        }
    }

    /// Check an access of `[va, va + len)` needing `need` (rights, bounds), without
    /// touching the bytes; returns its byte offset in the region.
    pub fn check(&self, va: u64, len: u64, need: Access) -> Result<usize, AccessError> {
        if !self.access.contains(need) {
            return Err(AccessError::Denied);
        }
        let off = self.offset_of(va, len)?;
        if off as u64 + len > self.mem.len() as u64 {
            return Err(AccessError::OutOfBounds { va, len });
        }
        Ok(off)
    }

    /// How VAs map to the bytes.
    pub fn address_map(&self) -> AddressMap {
        self.map
    }

    /// Byte offset of `[va, va+len)` in the region, or why not.
    pub fn offset_of(&self, va: u64, len: u64) -> Result<usize, AccessError> {
        let oob = AccessError::OutOfBounds { va, len };
        if let AddressMap::Ring { start, window } = self.map {
            let ring = self.keys.len as u64;
            // inside the window (modulo 2^64), then inside the ring without wrapping
            if ring == 0 || len > window || va.wrapping_sub(start) > window - len {
                return Err(AccessError::OutsideWindow { va, len });
            }
            let off = va % ring;
            if off + len > ring {
                return Err(oob);
            }
            return Ok(off as usize);
        }
        let off = va.checked_sub(self.keys.va).ok_or(oob)?;
        let end = off.checked_add(len).ok_or(oob)?;
        if end > self.keys.len as u64 {
            return Err(oob);
        }
        Ok(off as usize)
    }

    /// Check a remote write of `[va, va + len)` (REMOTE_WRITE, bounds or window) without
    /// placing it. Unlike [`MemoryRegion::offset_of`], a ring region accepts a range that
    /// wraps past its end (as the ring memory of a buffer unit does): only the window counts.
    pub(crate) fn check_remote_write(&self, va: u64, len: u64) -> Result<(), AccessError> {
        if !self.access.contains(Access::REMOTE_WRITE) {
            return Err(AccessError::Denied);
        }
        match self.map {
            AddressMap::Ring { start, window } => {
                if self.keys.len == 0 || len > window || va.wrapping_sub(start) > window - len {
                    return Err(AccessError::OutsideWindow { va, len });
                }
                Ok(())
            }
            AddressMap::Linear => self
                .offset_of(va, len)
                .and_then(|o| self.not_held(o, va, len)),
        }
    }

    /// Refuse `[offset, offset + len)` (the write of `[va, va + len)`) if it touches a
    /// held page.
    fn not_held(&self, offset: usize, va: u64, len: u64) -> Result<(), AccessError> {
        match &self.holds {
            Some(h) if h.overlaps(offset as u64, len) => Err(AccessError::Held { va, len }),
            _ => Ok(()),
        }
    }

    /// Pages the application holds, if it lends them ([`MrTable::set_holds`]).
    pub fn holds(&self) -> Option<&Arc<Holds>> {
        self.holds.as_ref()
    }

    /// Place the remote write of `data` at `va` (checked as by
    /// [`MemoryRegion::check_remote_write`]; on error nothing was written). A write that
    /// wraps past a ring's end continues at its start.
    pub(crate) fn write_remote(&mut self, va: u64, data: &[u8]) -> Result<(), AccessError> {
        let len = data.len() as u64;
        self.check_remote_write(va, len)?;
        let [a, b] = self.ring_ranges(va, len)?;
        let oob = AccessError::OutOfBounds { va, len };
        let end = (a.end.max(b.end)) as u64;
        if end > self.mem.len() as u64 {
            return Err(oob);
        }
        let (head, tail) = data.split_at(a.len());
        if self.mem.write(a.start, head) && self.mem.write(b.start, tail) {
            Ok(())
        } else {
            Err(oob)
        }
    }

    /// The bytes of `[va, va + len)` for the local application, in two pieces: for a ring
    /// region a range that wraps past its end is its tail then its head (otherwise the
    /// second piece is empty). The window does not apply (it limits remote writes); the
    /// range must lie in the region (a ring: at most its length).
    pub fn pieces(&self, va: u64, len: u64) -> Result<[&[u8]; 2], AccessError> {
        let [a, b] = self.ring_ranges(va, len)?;
        let mem = self.mem.owned().ok_or(AccessError::Shared)?;
        let oob = AccessError::OutOfBounds { va, len };
        Ok([mem.get(a).ok_or(oob)?, mem.get(b).ok_or(oob)?])
    }

    /// Byte ranges of `[va, va + len)`: one for a linear region, up to two for a ring.
    pub(crate) fn ring_ranges(&self, va: u64, len: u64) -> Result<[Range<usize>; 2], AccessError> {
        let AddressMap::Ring { .. } = self.map else {
            let off = self.offset_of(va, len)?;
            return Ok([off..off + len as usize, 0..0]);
        };
        let ring = self.keys.len as u64;
        if ring == 0 || len > ring {
            return Err(AccessError::OutOfBounds { va, len });
        }
        let off = va % ring;
        let first = len.min(ring - off);
        Ok([
            off as usize..(off + first) as usize,
            0..(len - first) as usize,
        ])
    }

    /// Where a remote write of `[va, va + len)` goes in this region (REMOTE_WRITE, bounds),
    /// for bytes that landed at `from` of it (inside it).
    fn write_target(&self, va: u64, len: u64, from: &Range<usize>) -> Result<usize, AccessError> {
        if !self.access.contains(Access::REMOTE_WRITE) {
            return Err(AccessError::Denied);
        }
        let to = self.offset_of(va, len)?;
        if from.end > self.keys.len {
            return Err(AccessError::OutOfBounds { va, len });
        }
        self.not_held(to, va, len)?;
        Ok(to)
    }

    /// The bytes at `offset` if the remote write of `[va, va + len)` goes exactly there
    /// (REMOTE_WRITE, bounds, no held page); `None` otherwise.
    #[inline]
    pub(crate) fn in_place(&self, va: u64, len: usize, offset: usize) -> Option<&[u8]> {
        let from = offset..offset.checked_add(len)?;
        if self.write_target(va, len as u64, &from).ok()? != offset {
            return None;
        }
        self.mem.owned()?.get(from)
    }

    /// Where a run of remote writes landed from `offset` on may lie in place without
    /// looking at the region again ([`InPlaceSpan::bytes`]): up to the region's end or its
    /// first held page, at most `max` bytes on. `None` without REMOTE_WRITE, for memory
    /// the endpoint does not own, or for a ring map (its writes wrap): those are looked at
    /// write by write ([`MemoryRegion::in_place`]).
    pub(crate) fn in_place_span(&self, offset: usize, max: usize) -> Option<InPlaceSpan<'_>> {
        if !self.access.contains(Access::REMOTE_WRITE) || !matches!(self.map, AddressMap::Linear) {
            return None;
        }
        let bytes = self.mem.owned()?;
        let end = match &self.holds {
            Some(h) => h.clear_until(offset as u64, max as u64) as usize,
            None => offset.saturating_add(max),
        };
        Some(InPlaceSpan {
            va0: self.keys.va,
            bytes: &bytes[..end.min(self.keys.len).min(bytes.len())],
        })
    }

    /// Checked slice for a remote or local access needing `need`.
    pub fn slice(&self, va: u64, len: u64, need: Access) -> Result<&[u8], AccessError> {
        self.slice_at(va, len, need).map(|(s, _)| s)
    }

    /// As [`MemoryRegion::slice`], with the slice's byte offset in the region (where a
    /// gather send takes it from).
    pub fn slice_at(&self, va: u64, len: u64, need: Access) -> Result<(&[u8], usize), AccessError> {
        if !self.access.contains(need) {
            return Err(AccessError::Denied);
        }
        let off = self.offset_of(va, len)?;
        // bounds were checked against the registered length; `get` keeps a memory type
        // that shrank from panicking
        self.mem
            .owned()
            .ok_or(AccessError::Shared)?
            .get(off..off + len as usize)
            .map(|s| (s, off))
            .ok_or(AccessError::OutOfBounds { va, len })
    }

    /// The owned bytes of `[va, va + len)` and their offset, where the region has them: a
    /// read needing no right but the local one, as a gathered send makes ([`Self::slice_at`]
    /// with [`Access::NONE`], without the reason when not).
    #[inline]
    pub fn readable_at(&self, va: u64, len: u64) -> Option<(&[u8], usize)> {
        let off = self.offset_of(va, len).ok()?;
        let end = off.checked_add(usize::try_from(len).ok()?)?;
        self.mem.owned()?.get(off..end).map(|s| (s, off))
    }

    /// The owned bytes `[offset, offset + len)`, where the region has them: for an offset
    /// already checked against it ([`Self::check`]).
    #[inline]
    pub(crate) fn bytes_at(&self, offset: usize, len: usize) -> Option<&[u8]> {
        self.mem.owned()?.get(offset..offset.checked_add(len)?)
    }

    /// Checked mutable slice.
    pub fn slice_mut(&mut self, va: u64, len: u64, need: Access) -> Result<&mut [u8], AccessError> {
        if !self.access.contains(need) {
            return Err(AccessError::Denied);
        }
        let off = self.offset_of(va, len)?;
        self.mem
            .owned_mut()
            .ok_or(AccessError::Shared)?
            .get_mut(off..off + len as usize)
            .ok_or(AccessError::OutOfBounds { va, len })
    }
}

/// All regions of an endpoint ("protection domain").
#[derive(Debug, Default)]
pub struct MrTable {
    by_key: KeyMap<MemoryRegion>,
    next: u32,
    tag: u32,
    /// Changes whenever a region leaves or its address map or domain changes: an offset
    /// found while it had one value still holds while it has it.
    generation: u64,
}

impl MrTable {
    /// A table whose keys start from `seed` (0: 0x19e, 0x23c, … as by default).
    pub fn seeded(seed: u64) -> MrTable {
        MrTable {
            by_key: KeyMap::default(),
            next: (seed as u32) & 0xFF_FFFF,
            tag: (seed >> 32) as u32 & 0xFF,
            generation: 0,
        }
    }

    /// Register `mem` at `va` with `access`; returns its keys. The key is never 0.
    pub fn register(&mut self, mem: impl RegionMemory, va: u64, access: Access) -> MrKeys {
        self.register_memory(Memory::Owned(Box::new(mem)), va, access)
    }

    /// Register owned or shared memory at `va` with `access`; returns its keys.
    pub fn register_memory(&mut self, mem: Memory, va: u64, access: Access) -> MrKeys {
        // Spread keys (index in the upper bits, a rotating tag below) so a stale or guessed
        // key is unlikely to name another region.
        self.next = self.next.wrapping_add(1);
        let key_of = |n: u32, tag: u32| (n << 8) | ((n.wrapping_mul(0x9E) ^ tag) & 0xFF);
        let mut key = key_of(self.next, self.tag);
        while key == 0 || self.by_key.contains_key(&key) {
            self.next = self.next.wrapping_add(1);
            key = key_of(self.next, self.tag);
        }
        self.insert(key, mem, va, access)
    }

    fn insert(&mut self, key: u32, mem: Memory, va: u64, access: Access) -> MrKeys {
        let keys = MrKeys {
            lkey: key,
            rkey: key,
            va,
            len: mem.len(),
        };
        let map = AddressMap::Linear;
        self.by_key.insert(
            key,
            MemoryRegion {
                keys,
                access,
                map,
                mem,
                holds: None,
                pd: 0,
            },
        );
        keys
    }

    /// Register with a chosen key; `None` if it is 0 or taken.
    pub fn register_keyed(
        &mut self,
        mem: impl RegionMemory,
        va: u64,
        access: Access,
        key: u32,
    ) -> Option<MrKeys> {
        if key == 0 || self.by_key.contains_key(&key) {
            return None;
        }
        Some(self.insert(key, Memory::Owned(Box::new(mem)), va, access))
    }

    /// Register `mem` as a ring over the whole 64-bit VA space (see [`AddressMap::Ring`]),
    /// accepting accesses inside `[start, start + window)`. `None` if the window is longer
    /// than the ring.
    pub fn register_ring(
        &mut self,
        mem: impl RegionMemory,
        access: Access,
        start: u64,
        window: u64,
    ) -> Option<MrKeys> {
        if window > mem.bytes().len() as u64 {
            return None;
        }
        let keys = self.register(mem, 0, access);
        self.generation += 1;
        let r = self.by_key.get_mut(&keys.lkey)?;
        r.map = AddressMap::Ring { start, window };
        Some(keys)
    }

    /// Move a ring region's window (the consumer freed space, or took it back).
    pub fn set_window(&mut self, key: u32, start: u64, window: u64) -> Result<(), AccessError> {
        self.generation += 1;
        let r = self.get_mut(key)?;
        match r.map {
            AddressMap::Ring { .. } if window <= r.keys.len as u64 => {
                r.map = AddressMap::Ring { start, window };
                Ok(())
            }
            _ => Err(AccessError::Denied),
        }
    }

    /// Refuse remote writes into the pages of a linear region `key` that `holds` says the
    /// application holds (see [`Holds`]); `holds` covers the region from its first byte.
    pub fn set_holds(&mut self, key: u32, holds: Arc<Holds>) -> Result<(), AccessError> {
        let r = self.get_mut(key)?;
        match r.map {
            AddressMap::Linear => {
                r.holds = Some(holds);
                Ok(())
            }
            AddressMap::Ring { .. } => Err(AccessError::Denied),
        }
    }

    /// Whether `[offset, offset + len)` of region `key` touches a held page.
    pub(crate) fn held(&self, key: u32, offset: usize, len: usize) -> bool {
        self.get(key)
            .ok()
            .and_then(|r| r.holds.as_ref())
            .is_some_and(|h| h.overlaps(offset as u64, len as u64))
    }

    /// Remove a region, giving its owned memory back (`None` also for shared memory,
    /// which [`MrTable::remove`] gives back).
    pub fn deregister(&mut self, key: u32) -> Option<Box<dyn RegionMemory>> {
        self.remove(key).and_then(Memory::into_owned)
    }

    /// Remove a region, giving its memory back.
    pub fn remove(&mut self, key: u32) -> Option<Memory> {
        self.generation += 1;
        self.by_key.remove(&key).map(|m| m.mem)
    }

    /// The table's generation: equal to an earlier reading only while no region has left
    /// or changed its address map or domain since (an offset checked then still holds).
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Check that `[offset, offset + len)` of a message may be scattered into `sg`
    /// (every segment's region, LOCAL_WRITE access and bounds; discard segments always).
    pub(crate) fn check_scatter(
        &self,
        sg: &crate::wr::SgList,
        offset: u64,
        len: u64,
    ) -> Result<(), AccessError> {
        let pieces = sg
            .pieces(offset, len)
            .ok_or(AccessError::OutOfBounds { va: offset, len })?;
        for (s, off, n) in pieces {
            if !s.is_discard() {
                self.get(s.lkey)?
                    .check(s.va + off, n, Access::LOCAL_WRITE)?;
            }
        }
        Ok(())
    }

    /// Check that a receive of protection domain `pd` may scatter into `sg`: every
    /// segment's region in that domain, with LOCAL_WRITE access, the segment inside it
    /// (discard segments always may). One lookup per segment.
    pub(crate) fn check_recv(&self, pd: u32, sg: &crate::wr::SgList) -> Result<(), AccessError> {
        for s in sg.as_slice().iter().filter(|s| !s.is_discard()) {
            self.get_in(pd, s.lkey)?
                .check(s.va, u64::from(s.len), Access::LOCAL_WRITE)?;
        }
        Ok(())
    }

    /// Whether the `len` bytes at `offset` of a message scattered into `sg` go to one
    /// place: bytes `at..at + len` of region `lkey` (LOCAL_WRITE). True when a payload that
    /// landed there is already where the receive puts it.
    pub(crate) fn scatters_to(
        &self,
        sg: &crate::wr::SgList,
        offset: u64,
        len: u64,
        lkey: u32,
        at: usize,
    ) -> bool {
        let Some(mut pieces) = sg.pieces(offset, len) else {
            return false;
        };
        let (Some((s, off, n)), None) = (pieces.next(), pieces.next()) else {
            return false;
        };
        if s.is_discard() || s.lkey != lkey || n != len {
            return false;
        }
        let Ok(r) = self.get(lkey) else {
            return false;
        };
        match (
            r.offset_of(s.va + off, n),
            r.access.contains(Access::LOCAL_WRITE),
        ) {
            (Ok(o), true) => o == at,
            _ => false,
        }
    }

    /// Scatter `data` at `offset` of a message into `sg`: bytes inside a range of `sg` the
    /// caller checked with [`MrTable::check_scatter`] since the table last changed (that
    /// check up front keeps a failure from leaving a part written; a UD receive checks its
    /// GRH slot and payload together). Each piece is still checked as it is written, so
    /// nothing lands outside a region.
    pub(crate) fn scatter_within(
        &mut self,
        sg: &crate::wr::SgList,
        offset: u64,
        data: &[u8],
    ) -> Result<(), AccessError> {
        let pieces = sg
            .pieces(offset, data.len() as u64)
            .ok_or(AccessError::OutOfBounds {
                va: offset,
                len: data.len() as u64,
            })?;
        let mut at = 0usize;
        for (s, off, n) in pieces {
            let n = n as usize;
            if !s.is_discard() {
                self.get_mut(s.lkey)?
                    .write(s.va + off, &data[at..at + n], Access::LOCAL_WRITE)?;
            }
            at += n;
        }
        Ok(())
    }

    /// Accept `len` bytes a backend put at byte `src_offset` of region `src_lkey` as the
    /// remote write of `[va, va + len)` into region `rkey` (REMOTE_WRITE, bounds): nothing
    /// moves when they already sit there, otherwise they are copied.
    pub(crate) fn place_landed(
        &mut self,
        pd: u32,
        rkey: u32,
        va: u64,
        len: u64,
        src_lkey: u32,
        src_offset: usize,
    ) -> Result<bool, AccessError> {
        let oob = AccessError::OutOfBounds { va, len };
        let n = len as usize;
        let from = src_offset..src_offset.checked_add(n).ok_or(oob)?;
        if src_lkey == rkey {
            // one region: in place (the common case) or a move within it
            let r = self.get_mut_in(pd, rkey)?;
            let to = match r.write_target(va, len, &from) {
                Ok(to) => to,
                // a write that wraps past a ring's end: copied in two pieces
                Err(AccessError::OutOfBounds { .. })
                    if r.check_remote_write(va, len).is_ok() && from.end <= r.keys.len =>
                {
                    let bytes = r.mem.owned().and_then(|m| m.get(from)).ok_or(oob)?.to_vec();
                    r.write_remote(va, &bytes)?;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            if from.start == to {
                return Ok(true);
            }
            let mem = r.mem.owned_mut().ok_or(AccessError::Shared)?;
            if to + n > mem.len() || from.end > mem.len() {
                return Err(oob);
            }
            mem.copy_within(from, to);
            return Ok(false);
        }
        self.get_in(pd, rkey)?.check_remote_write(va, len)?;
        let src = self.get(src_lkey)?;
        let src_mem = src.mem.owned().ok_or(AccessError::Shared)?;
        if from.end > src.keys.len || from.end > src_mem.len() {
            return Err(oob);
        }
        // two regions: a copy out first (this is not the in-place path)
        let bytes = src_mem[from].to_vec();
        self.get_mut_in(pd, rkey)?.write_remote(va, &bytes)?;
        Ok(false)
    }

    /// Region `lkey`'s bytes for a backend to put received payloads into (LOCAL_WRITE).
    pub(crate) fn landing_zone(&mut self, lkey: u32) -> Result<&mut [u8], AccessError> {
        let r = self.get_mut(lkey)?;
        if !r.access.contains(Access::LOCAL_WRITE) {
            return Err(AccessError::Denied);
        }
        let n = r.keys.len;
        let mem = r.mem.owned_mut().ok_or(AccessError::Shared)?;
        let n = n.min(mem.len());
        Ok(&mut mem[..n])
    }

    /// The bytes landed at `offset` of region `key` if they already sit where the remote
    /// write of `[va, va + len)` into that region goes (REMOTE_WRITE, bounds: the checks of
    /// [`MrTable::place_landed`]); `None` otherwise. One lookup for the landed lane.
    pub(crate) fn in_place(
        &self,
        pd: u32,
        key: u32,
        va: u64,
        len: usize,
        offset: usize,
    ) -> Option<&[u8]> {
        self.get_in(pd, key).ok()?.in_place(va, len, offset)
    }

    /// The region with `key`.
    #[inline]
    pub fn get(&self, key: u32) -> Result<&MemoryRegion, AccessError> {
        self.by_key.get(&key).ok_or(AccessError::UnknownKey(key))
    }

    /// The region with `key` if it belongs to protection domain `pd` — what a QP of that
    /// domain may reach: another domain's key is as unknown to it as no key.
    pub fn get_in(&self, pd: u32, key: u32) -> Result<&MemoryRegion, AccessError> {
        match self.by_key.get(&key) {
            Some(r) if r.pd == pd => Ok(r),
            _ => Err(AccessError::UnknownKey(key)),
        }
    }

    /// As [`MrTable::get_in`], mutable.
    pub fn get_mut_in(&mut self, pd: u32, key: u32) -> Result<&mut MemoryRegion, AccessError> {
        match self.by_key.get_mut(&key) {
            Some(r) if r.pd == pd => Ok(r),
            _ => Err(AccessError::UnknownKey(key)),
        }
    }

    /// Put region `key` in protection domain `pd`.
    pub fn set_pd(&mut self, key: u32, pd: u32) -> Result<(), AccessError> {
        self.generation += 1;
        self.get_mut(key)?.pd = pd;
        Ok(())
    }

    /// The region with `key`, mutable.
    pub fn get_mut(&mut self, key: u32) -> Result<&mut MemoryRegion, AccessError> {
        self.by_key
            .get_mut(&key)
            .ok_or(AccessError::UnknownKey(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_access() {
        let mut t = MrTable::default();
        let k = t.register(vec![0u8; 100].into_boxed_slice(), 0, Access::REMOTE_WRITE);
        assert_ne!(k.rkey, 0);
        let mr = t.get_mut(k.rkey).unwrap();
        assert!(mr.slice_mut(0, 100, Access::REMOTE_WRITE).is_ok());
        assert!(mr.slice_mut(99, 1, Access::REMOTE_WRITE).is_ok());
        assert_eq!(
            mr.slice_mut(99, 2, Access::REMOTE_WRITE).unwrap_err(),
            AccessError::OutOfBounds { va: 99, len: 2 }
        );
        assert!(mr.slice_mut(u64::MAX, 2, Access::REMOTE_WRITE).is_err());
        assert_eq!(
            mr.slice(0, 1, Access::REMOTE_READ).unwrap_err(),
            AccessError::Denied
        );
        assert!(t.get(k.rkey ^ 1).is_err());
        let k2 = t.register(
            vec![0u8; 8].into_boxed_slice(),
            0x1000,
            Access::REMOTE_READ | Access::LOCAL_WRITE,
        );
        assert_ne!(k2.rkey, k.rkey);
        let mr2 = t.get(k2.rkey).unwrap();
        assert!(mr2.slice(0xFFF, 1, Access::REMOTE_READ).is_err());
        assert_eq!(mr2.slice(0x1000, 8, Access::REMOTE_READ).unwrap().len(), 8);
        assert_eq!(t.deregister(k2.rkey).unwrap().bytes().len(), 8);
        assert!(t.get(k2.rkey).is_err());
    }
}
