//! Protection domains and memory regions. A region is the program's own memory, registered
//! as shared memory of the endpoint ([`RawMemory`]): remote WRITEs, READ responses and
//! received SENDs are copied straight into it, READs and sends out of it, and nothing ever
//! holds a Rust reference to it (see `rocelink_io::raw`).

use super::context::{Context, context};
use super::util::{ptr_or_errno, status};
use crate::abi::*;
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj};
use libc::{c_int, c_void};
use rocelink_io::raw::RawMemory;
use rocelink_transport::{Access, SharedMemory};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A protection domain: the objects made in it count as its users (it cannot be freed
/// while any lives, as in libibverbs).
#[derive(Debug)]
pub(crate) struct Pd {
    pub(crate) nic: Arc<Nic>,
    pub(crate) users: AtomicUsize,
    /// Its number in the endpoint: its regions and QPs carry it, and a QP reaches only
    /// regions of its own PD.
    pub(crate) id: u32,
}

impl Obj for Pd {
    type C = ibv_pd;
    const KIND: Kind = Kind::Pd;
}

/// The PD an `ibv_pd *` names.
pub(crate) fn pd(p: *const ibv_pd) -> Option<&'static Pd> {
    objects::get::<Pd>(p).map(|o| &o.r)
}

/// A handle number for `ibv_*::handle` fields (unique per process; nothing reads it back).
pub(crate) fn next_handle() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    ptr_or_errno(|| {
        let c: &Context = context(ctx).ok_or(libc::EINVAL)?;
        let handle = next_handle();
        Ok(objects::publish(
            ibv_pd {
                context: ctx,
                handle,
            },
            Pd {
                nic: c.nic.clone(),
                users: AtomicUsize::new(0),
                id: handle,
            },
        ))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    status(|| {
        let d = pd(p).ok_or(libc::EINVAL)?;
        if d.users.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        objects::retire::<Pd>(p).map(drop).ok_or(libc::EINVAL)
    })
}

/// A registered region.
#[derive(Debug)]
pub(crate) struct Mr {
    nic: Arc<Nic>,
    lkey: u32,
    pd: usize,
}

impl Obj for Mr {
    type C = ibv_mr;
    const KIND: Kind = Kind::Mr;
}

/// The program's memory as the endpoint sees it: copies through raw pointers.
struct AppMemory(RawMemory);

impl SharedMemory for AppMemory {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.0.read(offset, dst)
    }
    fn write(&self, offset: usize, src: &[u8]) -> bool {
        self.0.write(offset, src)
    }
}

/// The endpoint's rights for verbs access flags, or EINVAL for a combination InfiniBand
/// forbids (remote write or atomic without local write) and EOPNOTSUPP for on-demand
/// paging. Flags in the optional range (relaxed ordering, …) are ignored, as a device that
/// does not know them does.
pub(crate) fn access_of(flags: c_int) -> Result<Access, i32> {
    let flags = flags & !IBV_ACCESS_OPTIONAL_RANGE;
    let known = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND
        | IBV_ACCESS_ZERO_BASED
        | IBV_ACCESS_HUGETLB;
    if flags & IBV_ACCESS_ON_DEMAND != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if flags & !known != 0 {
        return Err(libc::EINVAL);
    }
    let remote_w = flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0;
    if remote_w && flags & IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(libc::EINVAL);
    }
    let mut a = Access::NONE;
    if flags & IBV_ACCESS_LOCAL_WRITE != 0 {
        a = a | Access::LOCAL_WRITE;
    }
    if flags & IBV_ACCESS_REMOTE_WRITE != 0 {
        a = a | Access::REMOTE_WRITE;
    }
    if flags & IBV_ACCESS_REMOTE_READ != 0 {
        a = a | Access::REMOTE_READ;
    }
    if flags & IBV_ACCESS_REMOTE_ATOMIC != 0 {
        a = a | Access::REMOTE_ATOMIC;
    }
    Ok(a)
}

fn reg(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    flags: c_int,
) -> Result<*mut ibv_mr, i32> {
    let d = pd(p).ok_or(libc::EINVAL)?;
    let access = access_of(flags)?;
    if addr.is_null() || length == 0 || (addr as usize).checked_add(length).is_none() {
        return Err(libc::EINVAL);
    }
    // the memory must be there, writable if anything may write it (the kernel's pinning
    // answers EFAULT otherwise)
    let write = access.contains(Access::LOCAL_WRITE);
    match rocelink_io::raw::mapped(addr as usize, length, write) {
        Ok(true) => {}
        Ok(false) => return Err(libc::EFAULT),
        Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
    }
    let va = if flags & IBV_ACCESS_ZERO_BASED != 0 {
        0
    } else {
        iova
    };
    // SAFETY: checked mapped (and writable where written) just now; the program keeps it
    // so until it deregisters the region (the verbs contract, `docs/verbs.md`).
    let mem = AppMemory(unsafe { RawMemory::new(addr.cast(), length) });
    let mut core = d.nic.lock().map_err(|e| e.errno())?;
    let keys = core.ep.register_shared_mr(mem, va, access);
    core.ep.set_mr_pd(keys.lkey, d.id).map_err(|_| libc::EIO)?;
    drop(core);
    d.users.fetch_add(1, Ordering::AcqRel);
    // SAFETY: `p` is a live PD (checked), whose context pointer was set when it was made.
    let ctx = unsafe { (*p).context };
    Ok(objects::publish(
        ibv_mr {
            context: ctx,
            pd: p,
            addr,
            length,
            handle: next_handle(),
            lkey: keys.lkey,
            rkey: keys.rkey,
        },
        Mr {
            nic: d.nic.clone(),
            lkey: keys.lkey,
            pd: p as usize,
        },
    ))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    ptr_or_errno(|| reg(p, addr, length, addr as u64, access))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    ptr_or_errno(|| reg(p, addr, length, iova, access))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    ptr_or_errno(|| reg(p, addr, length, iova, access as c_int))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    status(|| {
        let m = objects::get::<Mr>(mr).ok_or(libc::EINVAL)?;
        let mut core = m.r.nic.lock().map_err(|e| e.errno())?;
        core.ep.remove_mr(m.r.lkey);
        drop(core);
        if let Some(d) = pd(m.r.pd as *const ibv_pd) {
            d.users.fetch_sub(1, Ordering::AcqRel);
        }
        objects::retire::<Mr>(mr).map(drop).ok_or(libc::EINVAL)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let _ = (mr, flags, p, addr, length, access);
    // IBV_REREG_MR_ERR_INPUT with EOPNOTSUPP: the region stays as it was
    super::util::set_errno(libc::EOPNOTSUPP);
    -1
}
