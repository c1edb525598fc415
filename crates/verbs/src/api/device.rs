//! Devices and contexts: the device list, opening and closing, and every query.

use super::util::{guard, minus_one, ptr_or_errno, put_cstr, set_errno, status};
use crate::abi::*;
use crate::attrs;
use crate::devices::{self, DeviceInfo};
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj};
use libc::{c_char, c_int, c_void};
use rocelink_io::event::EventFd;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A device of the list: its `ibv_device` (allocated once, never freed) and the port it
/// opens in this process, shared by its contexts.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) info: DeviceInfo,
    ibv: usize,
    nic: Mutex<Weak<Nic>>,
}

/// The devices, found at the first call (`ROCELINK_VERBS` or the interfaces).
fn devices() -> &'static [Device] {
    static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let found = match devices::discover(std::env::var(devices::ENV).ok().as_deref()) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("rocelink-verbs: {e}");
                Vec::new()
            }
        };
        found.into_iter().map(Device::new).collect()
    })
}

impl Device {
    fn new(info: DeviceInfo) -> Device {
        // SAFETY: `ibv_device` is plain C data (arrays of chars and ints, two pointers),
        // for which all-zero bytes are valid.
        let mut d: ibv_device = unsafe { std::mem::zeroed() };
        d.node_type = IBV_NODE_CA;
        d.transport_type = IBV_TRANSPORT_IB;
        put_cstr(&mut d.name, &info.name);
        put_cstr(&mut d.dev_name, &format!("uverbs-{}", info.name));
        put_cstr(
            &mut d.dev_path,
            &format!("/sys/class/infiniband_verbs/uverbs-{}", info.name),
        );
        put_cstr(
            &mut d.ibdev_path,
            &format!("/sys/class/infiniband/{}", info.name),
        );
        let ibv = Box::into_raw(Box::new(d)) as usize;
        objects::register_static(ibv, Kind::Device);
        Device {
            info,
            ibv,
            nic: Mutex::new(Weak::new()),
        }
    }

    /// The device's port in this process: the one its open contexts share, or a new one.
    fn open_nic(&self) -> Result<Arc<Nic>, i32> {
        let mut slot = self.nic.lock().map_err(|_| libc::EIO)?;
        if let Some(n) = slot.upgrade() {
            return Ok(n);
        }
        let n = Arc::new(
            Nic::new(self.info.clone()).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?,
        );
        *slot = Arc::downgrade(&n);
        Ok(n)
    }
}

/// The device an `ibv_device *` names.
pub(crate) fn device(p: *const ibv_device) -> Option<&'static Device> {
    devices().iter().find(|d| d.ibv == p as usize)
}

/// An open context: its port, its device, and the descriptor async events come on.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) nic: Arc<Nic>,
    pub(crate) device: &'static Device,
    async_fd: EventFd,
}

impl Obj for Context {
    type C = verbs_context;
    const KIND: Kind = Kind::Context;
    const HANDLE_OFFSET: usize = std::mem::offset_of!(verbs_context, context);
}

/// The context an `ibv_context *` names.
pub(crate) fn context(p: *const ibv_context) -> Option<&'static Context> {
    objects::get::<Context>(p as *const verbs_context).map(|o| &o.r)
}

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
        let async_fd =
            EventFd::new(false, false).map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
        let fd = async_fd.as_raw_fd();
        let vctx = new_verbs_context(dev, fd);
        let p = objects::publish(
            vctx,
            Context {
                nic,
                device: d,
                async_fd,
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
    v.query_port = Some(vctx_query_port);
    v.query_device_ex = Some(vctx_query_device_ex);
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
    c.ops.post_srq_recv = Some(super::post::post_srq_recv);
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
unsafe extern "C" fn vctx_query_device_ex(
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
            attr.cast::<ibv_device_attr>()
                .write(attrs::device_attr(&c.device.info));
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

unsafe extern "C" fn vctx_query_port(
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
            raw: devices::gid_of(c.device.info.ip),
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

/// The files a device's sysfs directory would hold, for programs that read them
/// (`ibv_devinfo` reads `board_id`).
fn sysfs_file(d: &Device, file: &str) -> Option<String> {
    Some(match file {
        "board_id" => "rocelink".to_owned(),
        "node_desc" => format!("rocelink {} ({})", d.info.name, d.info.ip),
        "fw_ver" => env!("CARGO_PKG_VERSION").to_owned(),
        "hw_rev" => "0".to_owned(),
        "node_type" => "1: CA".to_owned(),
        "node_guid" => {
            let g = d.info.guid;
            format!(
                "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
                g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
            )
        }
        "device/numa_node" => "-1".to_owned(),
        _ => return None,
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
            Some(d) => match sysfs_file(d, &file) {
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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    minus_one(|| {
        let c = context(ctx).ok_or(libc::EINVAL)?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        // no event is ever queued yet: this sleeps as on a device with none to report,
        // or fails with EAGAIN where the program made the descriptor non-blocking
        c.async_fd
            .take()
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        Err(libc::EAGAIN)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    let _ = event;
}
