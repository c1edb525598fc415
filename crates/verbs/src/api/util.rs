//! What every exported function shares: errno, and no panic crossing into C.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid for the thread's
    // life.
    unsafe { *libc::__errno_location() = e };
}

/// Run `f`, turning a panic (a bug) into `failed` rather than unwinding into C.
pub(crate) fn guard<T>(failed: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(failed)
}

/// For functions that return a pointer: `f`'s, or null with `errno` set from its error
/// (EIO after a panic).
pub(crate) fn ptr_or_errno<T>(f: impl FnOnce() -> Result<*mut T, i32>) -> *mut T {
    match guard(Err(libc::EIO), f) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
    }
}

/// For functions that return 0 or an errno value (`ibv_modify_qp`, `ibv_dealloc_pd`, …).
pub(crate) fn status(f: impl FnOnce() -> Result<(), i32>) -> i32 {
    match guard(Err(libc::EIO), f) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// For functions that return 0, or -1 with `errno` set (`ibv_query_gid`, `ibv_get_cq_event`).
pub(crate) fn minus_one(f: impl FnOnce() -> Result<(), i32>) -> i32 {
    match guard(Err(libc::EIO), f) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// Copy `s` into a C char array, NUL-terminated (cut short to fit).
pub(crate) fn put_cstr(dst: &mut [libc::c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as libc::c_char;
    }
    if let Some(z) = dst.get_mut(n) {
        *z = 0;
    }
}

/// The errno a transport refusal stands for (as rxe answers the same request).
pub(crate) fn qp_errno(e: rocelink_transport::QpError) -> i32 {
    use rocelink_transport::QpError::*;
    match e {
        QueueFull => libc::ENOMEM,
        Busy => libc::EBUSY,
        UnsupportedOp => libc::EINVAL,
        _ => libc::EINVAL,
    }
}
