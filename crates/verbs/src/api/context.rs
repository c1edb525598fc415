//! The devices of the list and the contexts opened on them: what every other entry point
//! looks a program's `ibv_device *` and `ibv_context *` up in.

use super::util::put_cstr;
use crate::abi::*;
use crate::devices::{self, DeviceInfo};
use crate::nic::Nic;
use crate::objects::{self, Kind, Obj};
use rocelink_io::event::EventFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A device of the list: its `ibv_device` (allocated once, never freed) and the port it
/// opens in this process, shared by its contexts.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) info: DeviceInfo,
    pub(crate) ibv: usize,
    nic: Mutex<Weak<Nic>>,
}

/// An `ibv_device` as a program receives it: at the start of libibverbs' `verbs_device`,
/// whose next member is the provider's ops pointer (null here).
#[repr(C)]
struct DeviceBlock {
    device: ibv_device,
    _verbs_device_rest: [usize; 8],
}

/// The devices, found at the first call (`ROCELINK_VERBS` or the interfaces).
pub(crate) fn devices() -> &'static [Device] {
    static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let found = match devices::discover(std::env::var(devices::ENV).ok().as_deref()) {
            Ok(d) => d,
            Err(e) => {
                crate::diag::warn(&e.to_string());
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
        let node = format!("uverbs-{}", info.name);
        put_cstr(&mut d.dev_name, &node);
        put_cstr(
            &mut d.dev_path,
            &format!("/sys/class/infiniband_verbs/{node}"),
        );
        put_cstr(
            &mut d.ibdev_path,
            &format!("/sys/class/infiniband/{}", info.name),
        );
        // followed by the rest of a `verbs_device` with a null ops pointer: what a
        // provider's "is this mine" check (`mlx5dv_is_supported`) reads behind it
        let block = DeviceBlock {
            device: d,
            _verbs_device_rest: [0; 8],
        };
        let ibv = Box::into_raw(Box::new(block)) as usize;
        objects::register_static(ibv, Kind::Device);
        Device {
            info,
            ibv,
            nic: Mutex::new(Weak::new()),
        }
    }

    /// Its device node's name (`ibv_device.dev_name`): `uverbs-<name>`, which no kernel
    /// device has.
    pub(crate) fn node_name(&self) -> String {
        format!("uverbs-{}", self.info.name)
    }

    /// The device's port in this process: the one its open contexts share, or a new one.
    pub(crate) fn open_nic(&self) -> Result<Arc<Nic>, i32> {
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
    /// The device's asynchronous events' descriptor (`ibv_context.async_fd`).
    pub(crate) async_fd: Arc<EventFd>,
    /// What `ibv_context.cmd_fd` holds: a descriptor of its own that no command is ever
    /// sent on (there is no kernel device), so that a program may `dup` or `poll` it as on
    /// an RNIC; importing it elsewhere answers EOPNOTSUPP.
    pub(crate) _cmd_fd: EventFd,
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
