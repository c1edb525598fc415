//! What a program finds in the file system about a device of this library. There is no
//! kernel driver behind one, so neither a device node nor a sysfs directory; programs that
//! look there first (UCX lists a device only if `/dev/infiniband/<dev_name>` is a character
//! device it may read and write, and reads a GID's type and interface from
//! `/sys/class/infiniband/<dev>/ports/1/gid_attrs/`) find what an RNIC's driver would show:
//! - `stat`, `stat64` and `access` answer for exactly the node names of this library's
//!   devices (`uverbs-rocelink0`, …: names no kernel device has) — a character device,
//!   mode 0666;
//! - `open`/`open64` (and the fortified `__open_2`/`__open64_2`; read-only) and
//!   `ibv_read_sysfs_file` serve the files of `sysfs_file` under
//!   `/sys/class/infiniband/<dev>/`, each as an anonymous memory file (`memfd_create`).
//!
//! Every other path goes to the C library's own function untouched (a prefix compare is
//! all it costs); nothing is created in the file system.

use super::context::{Device, devices};
use super::util::set_errno;
use std::ffi::{CStr, c_char, c_int};
use std::sync::OnceLock;

/// Where device nodes live.
const NODE_DIR: &[u8] = b"/dev/infiniband/";
/// The character major of `uverbs` nodes (231, minors from 192).
const UVERBS_MAJOR: u32 = 231;
const UVERBS_MINOR: u32 = 192;

/// The index of the device whose node `path` names, if it is one of ours.
fn our_node(path: *const c_char) -> Option<usize> {
    if path.is_null() {
        return None;
    }
    // SAFETY: a non-null path passed to stat/access is a NUL-terminated string.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    let name = p.strip_prefix(NODE_DIR)?;
    devices()
        .iter()
        .position(|d| d.node_name().as_bytes() == name)
}

/// The next definition of `name` after this library (the C library's), looked up once.
fn next(slot: &OnceLock<usize>, name: &CStr) -> usize {
    *slot.get_or_init(|| {
        // SAFETY: `dlsym` with RTLD_NEXT and a NUL-terminated name only looks up a symbol.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
    })
}

/// A character device node, readable and writable by all, numbered as a uverbs node.
fn node_stat(index: usize) -> libc::stat {
    // SAFETY: `struct stat` is plain C data, valid all-zero.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_mode = libc::S_IFCHR | 0o666;
    st.st_nlink = 1;
    st.st_rdev = libc::makedev(UVERBS_MAJOR, UVERBS_MINOR + index as u32);
    st
}

/// The directory of the devices' sysfs entries.
pub(crate) const SYSFS_DIR: &str = "/sys/class/infiniband/";

/// The files a device's sysfs directory would hold, for programs that read them
/// (`ibv_devinfo` reads `board_id`; UCX the GID's type and interface), relative to it.
pub(crate) fn sysfs_file(d: &Device, file: &str) -> Option<String> {
    Some(match file {
        "board_id" => "rocelink".to_owned(),
        "node_desc" => format!("rocelink {} ({})", d.info.name, d.info.ip),
        "fw_ver" => env!("CARGO_PKG_VERSION").to_owned(),
        "hw_rev" => "0".to_owned(),
        "node_type" => "1: CA".to_owned(),
        "node_guid" => colon_hex(&d.info.guid),
        "device/numa_node" => "-1".to_owned(),
        "ports/1/state" => "4: ACTIVE".to_owned(),
        "ports/1/phys_state" => "5: LinkUp".to_owned(),
        "ports/1/link_layer" => "Ethernet".to_owned(),
        "ports/1/pkeys/0" => "0xffff".to_owned(),
        "ports/1/gids/0" => colon_hex(&crate::devices::gid_of(d.info.ip)),
        "ports/1/gid_attrs/types/0" => "RoCE v2".to_owned(),
        "ports/1/gid_attrs/ndevs/0" => d.info.ifname.clone()?,
        _ => return None,
    })
}

/// Bytes as sysfs writes GUIDs and GIDs: hex in groups of two bytes, `:` between.
fn colon_hex(bytes: &[u8]) -> String {
    let groups: Vec<String> = bytes
        .chunks(2)
        .map(|c| c.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    groups.join(":")
}

/// The sysfs file `path` names, if it is under one of this library's devices:
/// `Some(Some(text))`, or `Some(None)` for a file such a device does not have.
fn served_file(path: &[u8]) -> Option<Option<String>> {
    let rest = path.strip_prefix(SYSFS_DIR.as_bytes())?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (dev, file) = rest.split_once('/').unwrap_or((rest, ""));
    let d = devices().iter().find(|d| d.info.name == dev)?;
    Some(sysfs_file(d, file.trim_end_matches('/')))
}

/// A read-only descriptor of an anonymous memory file holding `text` and a newline, at
/// its start.
fn memory_file(text: &str, cloexec: bool) -> Result<c_int, i32> {
    let flags = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: a NUL-terminated name and flags; returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"rocelink-sysfs".as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    let body = format!("{text}\n");
    let mut done = 0;
    while done < body.len() {
        // SAFETY: `fd` is ours; the bytes are `body`'s, in bounds.
        let n = unsafe { libc::write(fd, body[done..].as_ptr().cast(), body.len() - done) };
        if n <= 0 {
            let e = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            // SAFETY: `fd` is ours, closed once.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        done += n as usize;
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
    Ok(fd)
}

/// What `open` answers for `path` if it is one of this library's sysfs files.
fn open_served(path: *const c_char, flags: c_int) -> Option<c_int> {
    if path.is_null() {
        return None;
    }
    // SAFETY: a non-null path passed to open is a NUL-terminated string.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    let file = served_file(p)?;
    let result = match file {
        _ if flags & libc::O_ACCMODE != libc::O_RDONLY => Err(libc::EACCES),
        None => Err(libc::ENOENT),
        Some(text) => memory_file(&text, flags & libc::O_CLOEXEC != 0),
    };
    Some(result.unwrap_or_else(|e| {
        set_errno(e);
        -1
    }))
}

/// Call the C library's own function `name` (looked up once into `slot`) with `call`; -1
/// with ENOSYS where there is none.
fn forward(slot: &OnceLock<usize>, name: &CStr, call: impl FnOnce(usize) -> c_int) -> c_int {
    match next(slot, name) {
        0 => {
            set_errno(libc::ENOSYS);
            -1
        }
        f => call(f),
    }
}

/// An `open` of any form: this library's sysfs file, or the C library's `name` by `call`.
fn open_or(
    slot: &OnceLock<usize>,
    name: &CStr,
    path: *const c_char,
    flags: c_int,
    call: impl FnOnce(usize) -> c_int,
) -> c_int {
    match super::util::guard(None, || open_served(path, flags)) {
        Some(r) => r,
        None => forward(slot, name, call),
    }
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, libc::c_uint) -> c_int;
type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;

/// `open(2)`, as the C library's, except for this library's sysfs files. (C declares it
/// variadic; the mode, when there is one, comes in the third integer register either way.)
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: libc::c_uint) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    // SAFETY: the C library's `open` takes these three arguments (the mode is read only
    // with O_CREAT or O_TMPFILE); they are the caller's.
    open_or(&NEXT, c"open", path, flags, |f| unsafe {
        std::mem::transmute::<usize, OpenFn>(f)(path, flags, mode)
    })
}

/// `open64(2)`: `open` for programs built with 64-bit file offsets (the same call on
/// 64-bit Linux).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: libc::c_uint) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    // SAFETY: as `open`'s.
    open_or(&NEXT, c"open64", path, flags, |f| unsafe {
        std::mem::transmute::<usize, OpenFn>(f)(path, flags, mode)
    })
}

/// `__open_2`: `open` without a mode, as a program built with `_FORTIFY_SOURCE` calls it
/// when the flags are not known at compile time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    // SAFETY: the C library's `__open_2` takes these two arguments.
    open_or(&NEXT, c"__open_2", path, flags, |f| unsafe {
        std::mem::transmute::<usize, Open2Fn>(f)(path, flags)
    })
}

/// `__open64_2`: `open64` without a mode, as a fortified program calls it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    // SAFETY: the C library's `__open64_2` takes these two arguments.
    open_or(&NEXT, c"__open64_2", path, flags, |f| unsafe {
        std::mem::transmute::<usize, Open2Fn>(f)(path, flags)
    })
}

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type AccessFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;

/// `stat(2)`, as the C library's, except for this library's device nodes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    if let Some(i) = super::util::guard(None, || our_node(path)) {
        if buf.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        // SAFETY: the caller passes room for a `struct stat` (non-null, checked).
        unsafe { buf.write(node_stat(i)) };
        return 0;
    }
    // SAFETY: the C library's `stat` has this signature; the arguments are the caller's.
    forward(&NEXT, c"stat", |f| unsafe {
        std::mem::transmute::<usize, StatFn>(f)(path, buf)
    })
}

/// `stat64(2)`: the same structure as `stat` on 64-bit Linux.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    if super::util::guard(None, || our_node(path)).is_some() {
        // SAFETY: as `stat`'s contract.
        return unsafe { stat(path, buf) };
    }
    // SAFETY: the C library's `stat64` has this signature on x86-64 and aarch64.
    forward(&NEXT, c"stat64", |f| unsafe {
        std::mem::transmute::<usize, StatFn>(f)(path, buf)
    })
}

/// `access(2)`, as the C library's, except for this library's device nodes: readable and
/// writable, not executable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    static NEXT: OnceLock<usize> = OnceLock::new();
    if super::util::guard(None, || our_node(path)).is_some() {
        if mode & libc::X_OK != 0 {
            set_errno(libc::EACCES);
            return -1;
        }
        return 0;
    }
    // SAFETY: the C library's `access` has this signature; the arguments are the caller's.
    forward(&NEXT, c"access", |f| unsafe {
        std::mem::transmute::<usize, AccessFn>(f)(path, mode)
    })
}
