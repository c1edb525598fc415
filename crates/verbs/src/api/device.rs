//! Devices and contexts: the device list, opening and closing, fork and async events.

use super::context::{Context, device, devices};
use super::util::{guard, ptr_or_errno, set_errno, status};
use crate::abi::*;
use crate::objects;
use libc::{c_char, c_int};
use rocelink_io::event::EventFd;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// Lists built by `ibv_get_device_list` and not yet freed.
static LISTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    ptr_or_errno(|| {
        let devs = devices();
        // SAFETY: calloc returns zeroed room for `n + 1` pointers or null.
        let list = unsafe { libc::calloc(devs.len() + 1, size_of::<*mut ibv_device>()) }
            as *mut *mut ibv_device;
        if list.is_null() {
            return Err(libc::ENOMEM);
        }
        for (i, d) in devs.iter().enumerate() {
            // SAFETY: `i < n`, inside the allocation; the last slot stays null.
            unsafe { list.add(i).write(d.ibv as *mut ibv_device) };
        }
        if !num_devices.is_null() {
            // SAFETY: the caller passes room for an int (or null, checked).
            unsafe { num_devices.write(devs.len() as c_int) };
        }
        LISTS.lock().map_err(|_| libc::EIO)?.push(list as usize);
        Ok(list)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard((), || {
        let Ok(mut lists) = LISTS.lock() else { return };
        if let Some(i) = lists.iter().position(|&l| l == list as usize) {
            lists.swap_remove(i);
            // SAFETY: `list` came from our calloc and is freed once (removed above).
            unsafe { libc::free(list.cast()) };
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    match guard(None, || device(dev)) {
        // SAFETY: a device of ours: its name is a NUL-terminated array living forever.
        Some(d) => unsafe { (*(d.ibv as *const ibv_device)).name.as_ptr() },
        None => {
            set_errno(libc::EINVAL);
            std::ptr::null()
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard(0, || {
        device(dev).map_or(0, |d| u64::from_ne_bytes(d.info.guid))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard(-1, || {
        devices()
            .iter()
            .position(|d| d.ibv == dev as usize)
            .map_or(-1, |i| i as c_int)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    ptr_or_errno(|| {
        let d = device(dev).ok_or(libc::ENODEV)?;
        let nic = d.open_nic()?;
        let async_fd = nic.async_fd().map_err(|e| e.errno())?;
        let cmd_fd =
            EventFd::new(false, false).map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
        let fd = async_fd.as_raw_fd();
        let mut vctx = new_verbs_context(dev, fd);
        vctx.context.cmd_fd = cmd_fd.as_raw_fd();
        let p = objects::publish(
            vctx,
            Context {
                nic,
                device: d,
                async_fd,
                _cmd_fd: cmd_fd,
            },
        );
        Ok(p.cast::<ibv_context>())
    })
}

fn new_verbs_context(dev: *mut ibv_device, async_fd: c_int) -> verbs_context {
    // SAFETY: `verbs_context` is C data: function pointers (null is `None`), plain
    // pointers, integers and a pthread mutex, whose all-zero bytes are
    // PTHREAD_MUTEX_INITIALIZER in glibc.
    let mut v: verbs_context = unsafe { std::mem::zeroed() };
    v.query_port = Some(super::query::vctx_query_port);
    v.query_device_ex = Some(super::query::vctx_query_device_ex);
    v.create_cq_ex = Some(super::cq_make::vctx_create_cq_ex);
    v.create_qp_ex = Some(super::qp_make::vctx_create_qp_ex);
    v.sz = size_of::<verbs_context>();
    let c = &mut v.context;
    c.device = dev;
    c.cmd_fd = -1;
    c.async_fd = async_fd;
    c.num_comp_vectors = 1;
    c.abi_compat = VERBS_ABI_IS_EXTENDED;
    c.ops.poll_cq = Some(super::cq::poll_cq);
    c.ops.req_notify_cq = Some(super::cq::req_notify_cq);
    c.ops.post_send = Some(super::post::post_send);
    c.ops.post_recv = Some(super::post::post_recv);
    c.ops.post_srq_recv = Some(super::srq::post_srq_recv);
    v
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    status(|| {
        objects::retire::<Context>(ctx as *const verbs_context)
            .map(drop)
            .ok_or(libc::EINVAL)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    // nothing pins memory here: fork is always safe (the child cannot use the parent's
    // devices, see `docs/verbs.md`)
    0
}

/// `enum ibv_fork_status`: IBV_FORK_UNNEEDED.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}
