//! What a host session is, as plain data ([`HostConfig`]), and everything checked of it
//! before anything opens ([`HostConfig::check`]); the MTU rules a host follows.

use super::HostError;
use crate::Limits;
use crate::port::{Coe, CoePort, PortReceiver};
use rocelink_hsb::host::bring_up::BringUp;
use rocelink_hsb::host::coe_receiver::{CoeReceiver, CoeReceiverConfig};
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig, page_layout};
use rocelink_io::xdp::XdpMode;
use rocelink_runtime::xdp::XdpPort;
use rocelink_wire::hsb::metadata::StreamLayout;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The largest ring a session allocates.
pub const MAX_RING: usize = 8 << 30;

/// The device, and how the host reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Device {
    /// Configured over ECB at `ip:control_port`, as HSB's host does.
    Ecb {
        /// Its address.
        ip: Ipv4Addr,
        /// Its ECB port (8192).
        control_port: u16,
    },
    /// Configured by someone else to send to `qp` with `rkey`: received passively, one
    /// virtual port.
    Passive {
        /// Its address (the only sender taken).
        ip: Ipv4Addr,
        /// The QP it sends to.
        qp: u32,
        /// The R_Key it uses.
        rkey: u32,
    },
}

impl Device {
    /// A device configured over ECB on port 8192.
    pub fn ecb(ip: Ipv4Addr) -> Device {
        Device::Ecb {
            ip,
            control_port: rocelink_wire::hsb::CONTROL_PORT,
        }
    }

    /// Its address.
    pub fn ip(&self) -> Ipv4Addr {
        match *self {
            Device::Ecb { ip, .. } | Device::Passive { ip, .. } => ip,
        }
    }
}

/// How the receivers take datagrams.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tuning {
    /// Spin on the socket instead of sleeping.
    pub busy_poll: bool,
    /// While datagrams keep coming, look again after this long instead of being woken.
    pub rx_coalesce: Duration,
    /// Socket receive buffer in bytes.
    pub recv_buffer: usize,
    /// Receive with UDP_GRO.
    pub gro: bool,
    /// Predicted payloads straight into the ring.
    pub fast_path: bool,
    /// Messages per receive call (0: the receiver's choice).
    pub batch: usize,
    /// Pin virtual port i's thread to `cpus[i]` (one CPU for all when one is given).
    pub cpus: Vec<usize>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            busy_poll: false,
            rx_coalesce: Duration::ZERO,
            recv_buffer: 32 << 20,
            gro: true,
            fast_path: true,
            batch: 0,
            cpus: Vec::new(),
        }
    }
}

/// Receive with AF_XDP instead of UDP sockets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Xdp {
    /// The interface.
    pub ifname: String,
    /// Virtual port i's receive queue (one for all when one is given).
    pub queues: Vec<u32>,
    /// Copy, zero-copy or whichever the driver has.
    pub mode: XdpMode,
    /// Priority flow control: pause the device while a receive ring is full, before the
    /// kernel would drop (`None`: off).
    pub pfc: Option<rocelink_runtime::xdp::PfcConfig>,
}

/// What a host session is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HostConfig {
    /// The device.
    pub device: Device,
    /// Where the first virtual port is received (the next ones on the following ports).
    pub local: SocketAddr,
    /// The virtual ports, each on a thread of its own.
    pub vps: Vec<u32>,
    /// Frame size in bytes.
    pub frame_size: usize,
    /// Ring pages per virtual port.
    pub pages: u32,
    /// Link MTU (the payload per packet follows HSB's rule from it), within [`MTUS`];
    /// [`HostConfig::new`] sets the link's own ([`link_mtu`]).
    pub mtu: u32,
    /// No separate metadata packet.
    pub md_disable: bool,
    /// Immediate and metadata layout.
    pub layout: StreamLayout,
    /// Capture every datagram (`NAME-vpN.EXT` with several virtual ports).
    pub pcap: Option<PathBuf>,
    /// How the receivers take datagrams.
    pub tuning: Tuning,
    /// AF_XDP instead of sockets.
    pub xdp: Option<Xdp>,
    /// Camera over Ethernet instead of RoCE (one virtual port, a device on ECB; `local`,
    /// `pcap` and the socket tuning but the receive buffer are not used).
    pub coe: Option<Coe>,
    /// PTP and cameras.
    pub bring_up: BringUp,
    /// When each virtual port ends.
    pub limits: Limits,
}

impl HostConfig {
    /// Virtual port 0 of `device`, received at `local`, four pages, the MTU of the link
    /// `local` is on ([`link_mtu`]).
    pub fn new(device: Device, local: SocketAddr, frame_size: usize) -> HostConfig {
        HostConfig {
            device,
            local,
            vps: vec![0],
            frame_size,
            pages: 4,
            mtu: link_mtu(local.ip()),
            md_disable: false,
            layout: StreamLayout::default(),
            pcap: None,
            tuning: Tuning::default(),
            xdp: None,
            coe: None,
            bring_up: BringUp::default(),
            limits: Limits::unlimited(),
        }
    }

    /// Virtual port 0 of `device` over Camera over Ethernet ([`Coe`]), four pages, the MTU
    /// of its interface ([`iface_mtu`]).
    pub fn coe(device: Device, coe: Coe, frame_size: usize) -> HostConfig {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        HostConfig {
            mtu: iface_mtu(&coe.ifname),
            coe: Some(coe),
            ..HostConfig::new(device, any, frame_size)
        }
    }

    /// Everything that can be checked before anything opens.
    pub fn check(&self, sinks: usize) -> Result<(), HostError> {
        let n = self.vps.len();
        let mut v = self.vps.clone();
        v.sort_unstable();
        v.dedup();
        if v.len() != n || n == 0 {
            return Err(HostError::Vps);
        }
        if sinks != n {
            return Err(HostError::Sinks { sinks, vps: n });
        }
        if let Device::Passive { .. } = self.device {
            if n > 1 {
                return Err(HostError::PassiveSeveral);
            }
            if self.bring_up.camera.is_some() {
                return Err(HostError::PassiveCamera);
            }
        }
        let (_, page) = page_layout(self.frame_size);
        if page.saturating_mul(self.pages as usize) > MAX_RING {
            return Err(HostError::Ring {
                pages: self.pages,
                page,
            });
        }
        let queues = self.xdp.as_ref().map_or(0, |x| x.queues.len());
        for (what, k) in [
            (PerPortList::XdpQueues, queues),
            (PerPortList::Cpus, self.tuning.cpus.len()),
        ] {
            if k > 1 && k != n {
                return Err(HostError::PerPort {
                    what,
                    given: k,
                    vps: n,
                });
            }
        }
        if !MTUS.contains(&self.mtu) {
            return Err(HostError::Mtu(self.mtu));
        }
        if self.local.port().checked_add(n as u16 - 1).is_none() {
            return Err(HostError::PortRange(self.local.port()));
        }
        if let Some(c) = &self.coe {
            return self.check_coe(c);
        }
        if self.xdp.is_some() {
            if !self.local.is_ipv4() {
                return Err(HostError::XdpIpv6(self.local.ip()));
            }
            if self.mtu > 4000 {
                return Err(HostError::XdpMtu(self.mtu));
            }
        }
        Ok(())
    }

    /// What Camera over Ethernet takes: one virtual port of a device on ECB, a frame
    /// within CoE's 28-bit offsets, a channel within 0..=63, AF_XDP on its own interface.
    fn check_coe(&self, c: &Coe) -> Result<(), HostError> {
        if let Device::Passive { .. } = self.device {
            return Err(HostError::CoePassive);
        }
        if self.vps.len() > 1 {
            return Err(HostError::CoeSeveral);
        }
        if self.frame_size > rocelink_wire::hsb::coe::MAX_OFFSET as usize {
            return Err(HostError::CoeFrame(self.frame_size));
        }
        if c.channel > rocelink_wire::hsb::coe::MAX_CHANNEL {
            return Err(HostError::CoeChannel(c.channel));
        }
        if self.pcap.is_some() {
            return Err(HostError::CoeWith("a pcap capture"));
        }
        if self.md_disable {
            return Err(HostError::CoeWith("no separate metadata packet"));
        }
        if let Some(x) = &self.xdp
            && x.ifname != c.ifname
        {
            return Err(HostError::CoeXdpIface {
                xdp: x.ifname.clone(),
                coe: c.ifname.clone(),
            });
        }
        if self.xdp.is_some() && self.mtu > 4000 {
            return Err(HostError::XdpMtu(self.mtu));
        }
        Ok(())
    }

    /// Virtual port i's receiver, opened.
    pub(super) fn open_port(
        &self,
        i: usize,
        xdp: Option<XdpPort>,
    ) -> Result<PortReceiver, HostError> {
        let vp = self.vps[i];
        let Some(coe) = &self.coe else {
            return Receiver::new(self.receiver(i, xdp))
                .map(|r| PortReceiver::Roce(Box::new(r)))
                .map_err(|source| HostError::Receiver { vp, source });
        };
        let mut c = CoeReceiverConfig::new(&coe.ifname, self.frame_size);
        c.channel = coe.channel;
        c.line_bytes = coe.line_bytes;
        c.mtu = self.mtu;
        c.vp = vp;
        c.endian = self.layout.endian;
        c.recv_buffer = self.tuning.recv_buffer;
        c.xdp = xdp;
        CoeReceiver::new(c)
            .map(|r| PortReceiver::Coe(Box::new(CoePort::new(r))))
            .map_err(|source| HostError::CoeReceiver {
                ifname: coe.ifname.clone(),
                source,
            })
    }

    pub(super) fn several(&self) -> bool {
        self.vps.len() > 1
    }

    /// Virtual port i's receiver configuration.
    fn receiver(&self, i: usize, xdp: Option<XdpPort>) -> ReceiverConfig {
        let mut local = self.local;
        if self.several() && local.port() != 0 {
            local.set_port(local.port() + i as u16);
        }
        let vp = self.vps[i];
        let mut c = ReceiverConfig::new(local, self.device.ip(), self.frame_size);
        c.pages = self.pages;
        c.mtu = self.mtu;
        c.vp = vp;
        c.md_disable = self.md_disable;
        c.layout = self.layout;
        if let Device::Passive { qp, rkey, .. } = self.device {
            c.qp_rkey = Some((qp, rkey));
        }
        c.pcap = match (&self.pcap, self.several()) {
            (Some(p), true) => Some(suffixed(p, vp)),
            (p, _) => p.clone(),
        };
        let t = &self.tuning;
        c.busy_poll = t.busy_poll;
        c.rx_coalesce = t.rx_coalesce;
        c.recv_buffer = t.recv_buffer;
        c.gro = t.gro;
        c.fast_path = t.fast_path;
        c.batch = t.batch;
        c.xdp = xdp;
        c
    }

    pub(super) fn cpu_for(&self, i: usize) -> Option<usize> {
        let c = &self.tuning.cpus;
        c.get(i).or(c.first()).copied()
    }
}

/// `NAME-vpN.EXT` next to `p`.
pub fn suffixed(p: &std::path::Path, vp: u32) -> PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match p.extension() {
        Some(e) => format!("{stem}-vp{vp}.{}", e.to_string_lossy()),
        None => format!("{stem}-vp{vp}"),
    };
    p.with_file_name(name)
}

/// A list given one value per virtual port (or one for all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerPortList {
    /// The AF_XDP queues ([`Xdp::queues`]).
    XdpQueues,
    /// The CPUs the ports' threads are pinned to ([`Tuning::cpus`]).
    Cpus,
}

impl fmt::Display for PerPortList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PerPortList::XdpQueues => "AF_XDP queues",
            PerPortList::Cpus => "CPUs",
        })
    }
}

/// The MTUs a host takes: HSB's packetizer sends 256-byte to jumbo payloads.
pub const MTUS: std::ops::RangeInclusive<u32> = 256..=9000;

/// The MTU a host takes by default: that of the interface `local` is on, within [`MTUS`]
/// (loopback's 64 KiB is taken as a 9000-byte jumbo link); 1500 where it cannot be read.
pub fn link_mtu(local: IpAddr) -> u32 {
    within_mtus(rocelink_io::net::mtu_for_ip(local))
}

/// As [`link_mtu`], for the interface named `ifname` (Camera over Ethernet names its
/// interface, not an address).
pub fn iface_mtu(ifname: &str) -> u32 {
    let read = std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"));
    within_mtus(read.ok().and_then(|s| s.trim().parse().ok()))
}

fn within_mtus(mtu: Option<usize>) -> u32 {
    mtu.map_or(1500, |m| {
        m.clamp(*MTUS.start() as usize, *MTUS.end() as usize) as u32
    })
}
