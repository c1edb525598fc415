//! The objects handed to programs: each is a verbs.h structure — what the program reads, at
//! the address it holds — followed by this library's own state, allocated when created and
//! freed by the matching destroy call; and the registry of live ones, against which every
//! pointer a program passes is checked before it is used, so a stale, foreign or made-up
//! pointer is refused with EINVAL instead of followed.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `struct ibv_device` (lives as long as the process).
    Device,
    /// `struct ibv_context` (inside a `verbs_context`).
    Context,
    /// `struct ibv_pd`.
    Pd,
    /// `struct ibv_mr`.
    Mr,
    /// `struct ibv_comp_channel`.
    Channel,
    /// `struct ibv_cq`.
    Cq,
    /// `struct ibv_qp`.
    Qp,
    /// `struct ibv_ah`.
    Ah,
    /// `struct ibv_srq`.
    Srq,
}

/// An object: the C structure `C` first (so its address is the object's), then `R`.
/// The program may read (and, for a few fields, write) the C part at any time, so it sits
/// in an `UnsafeCell` and this library only ever touches it through raw pointers.
#[repr(C)]
#[derive(Debug)]
pub struct Object<C, R> {
    c: UnsafeCell<C>,
    /// This library's state.
    pub r: R,
}

// SAFETY: the C part is written only while the object is created (before it is published)
// and, for single fields, under the lock of the object's own state (`qp->state` under the
// QP's attributes lock, a CQ's event counts under its lock), through raw pointers; `R` is
// Sync itself. Concurrent reads by the program are of plain integers and pointers.
unsafe impl<C, R: Sync> Sync for Object<C, R> {}
// SAFETY: as above; moving the object moves plain C data and `R`, which is Send.
unsafe impl<C, R: Send> Send for Object<C, R> {}

impl<C, R> Object<C, R> {
    /// The C part, for reads and writes through the pointer.
    pub fn c(&self) -> *mut C {
        self.c.get()
    }
}

/// Library state that is the second half of an object of kind `KIND` over `C`.
pub trait Obj: Sized + Send + Sync + 'static {
    /// The C structure in front.
    type C;
    /// Its kind.
    const KIND: Kind;
    /// How far into the object the pointer programs hold lies (the `ibv_context` inside a
    /// `verbs_context`; 0 for the rest).
    const HANDLE_OFFSET: usize = 0;
}

/// Live objects: the address a program holds → kind and the object's address.
static LIVE: RwLock<BTreeMap<usize, (Kind, usize)>> = RwLock::new(BTreeMap::new());

/// Allocate an object and register it; returns the pointer the program is given.
pub fn publish<R: Obj>(c: R::C, r: R) -> *mut R::C {
    let obj = Box::into_raw(Box::new(Object {
        c: UnsafeCell::new(c),
        r,
    }));
    let base = obj as usize;
    let handle = base + R::HANDLE_OFFSET;
    if let Ok(mut live) = LIVE.write() {
        live.insert(handle, (R::KIND, base));
    }
    handle as *mut R::C
}

/// The live object of type `R` a program's pointer names, if it names one.
pub fn get<R: Obj>(handle: *const R::C) -> Option<&'static Object<R::C, R>> {
    let live = LIVE.read().ok()?;
    let &(kind, base) = live.get(&(handle as usize))?;
    if kind != R::KIND {
        return None;
    }
    // SAFETY: `base` came from `Box::into_raw` of an `Object<R::C, R>` (the kind says which
    // `R`: each kind has one), still registered, so not yet freed; it is freed only by
    // `retire`, which the program calls when it no longer uses the object (using it after
    // that, from another thread meanwhile, is the program's error, as with libibverbs).
    Some(unsafe { &*(base as *const Object<R::C, R>) })
}

/// The pointer programs hold of the first live object of type `R` whose state `pred`
/// accepts (a slow search, for rare look-ups by another key: an event's QP number).
pub fn find<R: Obj>(pred: impl Fn(&R) -> bool) -> Option<*mut R::C> {
    let live = LIVE.read().ok()?;
    live.iter().find_map(|(&handle, &(kind, base))| {
        if kind != R::KIND {
            return None;
        }
        // SAFETY: as in `get`: a registered object of this kind, not freed while the
        // registry's lock is held (`retire` takes it to unregister).
        let o = unsafe { &*(base as *const Object<R::C, R>) };
        pred(&o.r).then_some(handle as *mut R::C)
    })
}

/// Unregister the object a program's pointer names and give it back, to be dropped.
pub fn retire<R: Obj>(handle: *const R::C) -> Option<Box<Object<R::C, R>>> {
    let mut live = LIVE.write().ok()?;
    let &(kind, base) = live.get(&(handle as usize))?;
    if kind != R::KIND {
        return None;
    }
    live.remove(&(handle as usize));
    // SAFETY: as in `get`; removed from the registry under its write lock, so this is the
    // only `Box` made of it.
    Some(unsafe { Box::from_raw(base as *mut Object<R::C, R>) })
}

/// Register a static object (a device) under its address.
pub fn register_static(handle: usize, kind: Kind) {
    if let Ok(mut live) = LIVE.write() {
        live.insert(handle, (kind, handle));
    }
}

/// Whether `handle` is a live object of `kind`.
pub fn is_live(handle: usize, kind: Kind) -> bool {
    LIVE.read()
        .is_ok_and(|l| l.get(&handle).is_some_and(|&(k, _)| k == kind))
}

/// How many objects of `kind` are live (leak checks).
pub fn count(kind: Kind) -> usize {
    LIVE.read()
        .map_or(0, |l| l.values().filter(|&&(k, _)| k == kind).count())
}
