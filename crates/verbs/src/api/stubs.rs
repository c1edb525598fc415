//! The entry points of features this device does not have. Each answers as libibverbs does
//! for a device without them — a null object with EOPNOTSUPP, or the errno — so programs
//! (and test suites) that probe for a feature skip it; none follows a pointer it was given
//! into structures that are not ours.

use super::util::set_errno;
use crate::abi::*;
use crate::convert::status_str;
use libc::{c_char, c_int, c_void};

/// Null with EOPNOTSUPP.
fn unsupported<T>() -> *mut T {
    set_errno(libc::EOPNOTSUPP);
    std::ptr::null_mut()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    let _ = (qp, gid, lid);
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    let _ = (qp, gid, lid);
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    let _ = (pd, offset, length, iova, fd, access);
    unsupported()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let _ = cmd_fd;
    unsupported()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_pd(ctx: *mut ibv_context, handle: u32) -> *mut ibv_pd {
    let _ = (ctx, handle);
    unsupported()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, handle: u32) -> *mut ibv_mr {
    let _ = (pd, handle);
    unsupported()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_dm(ctx: *mut ibv_context, handle: u32) -> *mut c_void {
    let _ = (ctx, handle);
    unsupported()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    let _ = pd;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    let _ = mr;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_dm(dm: *mut c_void) {
    let _ = dm;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut c_void) -> c_int {
    let _ = (qp, ece);
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut c_void) -> c_int {
    let _ = (qp, ece);
    libc::EOPNOTSUPP
}

/// `ibv_query_qp_data_in_order`: no guarantee offered (0), as a device that does not
/// report one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(qp: *mut ibv_qp, op: u32, flags: u32) -> c_int {
    let _ = (qp, op, flags);
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    ctx: *mut ibv_context,
    attr: *mut ibv_ah_attr,
    eth_mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    // a provider's helper that asks the kernel's neighbour table for an RNIC: not needed
    let _ = (ctx, attr, eth_mac, vid);
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    status_str(status).as_ptr()
}
