//! Kernel bypass with AF_XDP (issue #16).
//!
//! * [`prog`] — the XDP program that steers RoCE v2 (UDP 4791), or everything a device
//!   owning an address handles, to AF_XDP sockets; built as BPF instructions in Rust,
//!   loaded with `bpf(2)`, attached through a BPF link.
//! * [`Xsk`] — one AF_XDP socket: its UMEM and the fill, completion, RX and TX rings
//!   (rocelink's own ring code; `docs/xdp.md` says why not a crate).
//! * [`iface_mac`], [`iface_queues`] — what the interface is.

pub mod prog;
mod ring;
pub mod txq;
mod xsk;

pub use prog::{Steer, XdpProgram};
pub use ring::{Desc, Level};
pub use txq::TxQueueSteer;
pub use xsk::{XdpMode, Xsk, XskConfig, XskCounters, XskStats};

use std::io;

/// The MAC address of interface `ifname` (in this thread's network namespace).
pub fn iface_mac(ifname: &str) -> io::Result<[u8; 6]> {
    crate::sys::if_hwaddr(ifname)
        .map_err(|e| io::Error::new(e.kind(), format!("interface {ifname:?}: {e}")))
}

/// How many receive queues interface `ifname` has: its receive and combined channels
/// (`ethtool -l`, in this thread's namespace), else what sysfs lists, else 1.
pub fn iface_queues(ifname: &str) -> u32 {
    queues(ifname, true)
}

/// How many transmit queues interface `ifname` has (as [`iface_queues`]).
pub fn iface_tx_queues(ifname: &str) -> u32 {
    queues(ifname, false)
}

fn queues(ifname: &str, rx: bool) -> u32 {
    if let Ok((r, t, combined)) = crate::sys::if_channels(ifname) {
        let n = if rx { r } else { t } + combined;
        if n > 0 {
            return n;
        }
    }
    // sysfs shows the namespace it was mounted in: right only outside other namespaces
    let prefix = if rx { "rx-" } else { "tx-" };
    std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// Sleep until AF_XDP socket `fd` has a frame to read or `timeout` passes (without
/// borrowing its [`Xsk`], which another thread may hold).
pub fn wait_fd(fd: std::os::fd::RawFd, timeout: Option<std::time::Duration>) -> io::Result<bool> {
    crate::sys::poll_fds(&[fd], libc::POLLIN, timeout)
}
