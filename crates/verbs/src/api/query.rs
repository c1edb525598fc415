//! What a program asks of a device and its port: attributes, GIDs, P_Keys, and the sysfs
//! files `ibv_devinfo` reads.

use super::context::{Context, context, devices};
use super::util::{guard, minus_one, status};
use crate::abi::*;
use crate::attrs;
use crate::devices as dev;
use libc::{c_char, c_int, c_void};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    status(|| {
        let c = context(ctx).ok_or(libc::EINVAL)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes room for an ibv_device_attr (non-null, checked).
        unsafe { attr.write(attrs::device_attr(&c.device.info)) };
        Ok(())
    })
}

/// `verbs_context::query_device_ex`: the classic attributes, the extensions zero.
pub(crate) unsafe extern "C" fn vctx_query_device_ex(
    ctx: *mut ibv_context,
    input: *const c_void,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    status(|| {
        let c = context(ctx).ok_or(libc::EINVAL)?;
        // a non-zero input comp_mask asks for something this device does not know
        // SAFETY: `input` is null or points at a u32 comp_mask.
        if !input.is_null() && unsafe { input.cast::<u32>().read() } != 0 {
            return Err(libc::EINVAL);
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return Err(libc::EINVAL);
        }
        let n = attr_size.min(size_of::<ibv_device_attr_ex>());
        // SAFETY: the caller passes `attr_size` bytes at `attr`; `n` is no more, and no
        // more than our structure.
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, n);
            let full = attrs::device_attr_ex(&c.device.info);
            std::ptr::copy_nonoverlapping((&raw const full).cast::<u8>(), attr.cast::<u8>(), n);
        }
        Ok(())
    })
}

/// Port 1's attributes into `attr` (`len` bytes of it).
fn query_port_into(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> Result<(), i32> {
    let c = context(ctx).ok_or(libc::EINVAL)?;
    if port != 1 || attr.is_null() {
        return Err(libc::EINVAL);
    }
    let a = attrs::port_attr(&c.device.info);
    let n = len.min(size_of::<ibv_port_attr>());
    // SAFETY: the caller passes `len` bytes at `attr`; `n` is no more, nor more than `a`.
    unsafe { std::ptr::copy_nonoverlapping((&raw const a).cast::<u8>(), attr.cast::<u8>(), n) };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    status(|| query_port_into(ctx, port, attr, COMPAT_PORT_ATTR_LEN))
}

pub(crate) unsafe extern "C" fn vctx_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    status(|| query_port_into(ctx, port, attr, len))
}

/// GID `index` of port `port`.
fn gid(ctx: *mut ibv_context, port: u32, index: c_int) -> Result<(&'static Context, ibv_gid), i32> {
    let c = context(ctx).ok_or(libc::EINVAL)?;
    if port != 1 || index != 0 {
        return Err(libc::EINVAL);
    }
    Ok((
        c,
        ibv_gid {
            raw: dev::gid_of(c.device.info.ip),
        },
    ))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    out: *mut ibv_gid,
) -> c_int {
    minus_one(|| {
        let (_, g) = gid(ctx, port.into(), index)?;
        if out.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes room for a GID (non-null, checked).
        unsafe { out.write(g) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    status(|| {
        let (_, g) = gid(ctx, port, index as c_int)?;
        if entry.is_null() || flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let e = gid_entry(g, index, port);
        // SAFETY: the caller passes `entry_size` (at least our size, checked) bytes.
        unsafe { entry.write(e) };
        Ok(())
    })
}

fn gid_entry(gid: ibv_gid, index: u32, port: u32) -> ibv_gid_entry {
    ibv_gid_entry {
        gid,
        gid_index: index,
        port_num: port,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: 0,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard(-(libc::EIO as isize), || {
        let Ok((_, g)) = gid(ctx, 1, 0) else {
            return -(libc::EINVAL as isize);
        };
        if entries.is_null() || flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return -(libc::EINVAL as isize);
        }
        if max_entries < 1 {
            return -(libc::EINVAL as isize);
        }
        // SAFETY: room for at least one entry of `entry_size` bytes (checked).
        unsafe { entries.write(gid_entry(g, 0, 1)) };
        1
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: u32,
    out: *mut u32,
) -> c_int {
    minus_one(|| {
        gid(ctx, port.into(), index as c_int)?;
        if out.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: room for the enum (non-null, checked).
        unsafe { out.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    minus_one(|| {
        context(ctx).ok_or(libc::EINVAL)?;
        if port != 1 || index != 0 || pkey.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: room for a __be16 (non-null, checked).
        unsafe { pkey.write(0xFFFFu16.to_be()) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    guard(-1, || {
        let ok = context(ctx).is_some() && port == 1 && u16::from_be(pkey) & 0x7FFF == 0x7FFF;
        if ok { 0 } else { -1 }
    })
}

/// `ibv_read_sysfs_file`: a device of ours answers from the files it would have; any other path is
/// read from the file system as libibverbs does (the trailing newline dropped, the rest
/// NUL-terminated). Returns the length, or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: the caller passes NUL-terminated strings (non-null, checked).
        let (dir, file) = unsafe {
            (
                std::ffi::CStr::from_ptr(dir).to_string_lossy().into_owned(),
                std::ffi::CStr::from_ptr(file)
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        let ours = devices().iter().find(|d| {
            dir.trim_end_matches('/') == format!("/sys/class/infiniband/{}", d.info.name)
        });
        let text = match ours {
            Some(d) => match super::files::sysfs_file(d, &file) {
                Some(t) => t,
                None => return -1,
            },
            None => match std::fs::read(format!("{dir}/{file}")) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(_) => return -1,
            },
        };
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let n = text.len().min(size - 1);
        // SAFETY: the caller passes `size` bytes at `buf`; `n + 1 <= size`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
            buf.add(n).write(0);
        }
        n as c_int
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_read_ibdev_sysfs_file(
    buf: *mut c_char,
    size: usize,
    fmt: *const c_char,
) -> c_int {
    // a printf-style path under a device's directory: a provider's helper; ours have none
    let _ = (buf, size, fmt);
    -1
}
