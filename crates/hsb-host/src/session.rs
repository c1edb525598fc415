//! The HSB host as a session, as HSB's player runs it: every virtual port's receiver
//! opened (socket or AF_XDP), the device told where to send each (ECB), PTP and the
//! cameras brought up, then each virtual port received on a thread of its own into its
//! sink until the limits or a [`Stopper`] — after which the cameras and the streams are
//! stopped on the device, whatever happened.
//!
//! ```no_run
//! use rocelink_hsb_host::session::{Device, HostConfig, HostSession, Session};
//! use rocelink_hsb_host::{Delivered, Limits, SessionError};
//! let mut cfg = HostConfig::new(Device::ecb("192.168.0.2".parse().unwrap()), "192.168.0.101:4791".parse().unwrap(), 2_611_376);
//! cfg.limits = Limits::frames(100);
//! let count = |d: &Delivered<'_>| -> Result<(), SessionError> {
//!     println!("frame {} good {}", d.report.frame_number, d.report.good());
//!     Ok(())
//! };
//! let s = HostSession::start(cfg, vec![count], None, &mut |note| eprintln!("{note}"))?;
//! let Ok(summary) = s.wait();
//! for p in &summary.ports { println!("vp {}: {} good", p.vp, p.stats.good) }
//! # Ok::<(), rocelink_hsb_host::session::HostError>(())
//! ```

use crate::port::PortReceiver;
pub use crate::port::{Coe, CoeCounts};
use crate::{FrameSink, Limits, Outcome, SessionError};
use rocelink_hsb::host::bring_up::{BringUp, BringUpError, stop_camera};
use rocelink_hsb::host::coe_receiver::{CoeReceiver, CoeReceiverConfig};
use rocelink_hsb::host::control::{Control, EcbError};
use rocelink_hsb::host::imx274::Camera;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig, ReceiverStats, page_layout};
use rocelink_io::xdp::XdpMode;
use rocelink_runtime::counters::{Board, Link, Snapshot};
use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
pub use rocelink_runtime::{Session, Stopper};
use rocelink_wire::hsb::metadata::StreamLayout;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::thread::JoinHandle;
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
    fn open_port(&self, i: usize, xdp: Option<XdpPort>) -> Result<PortReceiver, HostError> {
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
            .map(|r| PortReceiver::Coe(Box::new(r)))
            .map_err(|source| HostError::CoeReceiver {
                ifname: coe.ifname.clone(),
                source,
            })
    }

    fn several(&self) -> bool {
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

    fn cpu_for(&self, i: usize) -> Option<usize> {
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

/// What the session did on the way up, for the front end to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// A virtual port's data channel, as the device is told.
    Port {
        /// The device's HSB IP version.
        version: u32,
        /// The virtual port.
        vp: u32,
        /// Its QP.
        qpn: u32,
        /// Its R_Key.
        rkey: u32,
        /// Where it receives.
        local: SocketAddr,
    },
    /// A virtual port's Camera over Ethernet channel, as the device is told.
    CoePort {
        /// The device's HSB IP version.
        version: u32,
        /// The virtual port.
        vp: u32,
        /// The CoE channel.
        channel: u8,
        /// The interface the frames arrive on.
        ifname: String,
        /// Its MAC, where the device sends.
        mac: [u8; 6],
    },
    /// What a virtual port's socket setup noticed (a buffer capped below what was asked,
    /// with the setting that raises it).
    Socket {
        /// The virtual port.
        vp: u32,
        /// What was noticed.
        note: String,
    },
    /// PTP reported synchronised.
    PtpSynchronised,
    /// A camera is streaming.
    Camera {
        /// Which.
        index: usize,
        /// In which mode.
        sensor: String,
        /// The I2C transactions its bring-up took.
        transactions: u64,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Port {
                version,
                vp,
                qpn,
                rkey,
                local,
            } => write!(
                f,
                "HSB IP {:#06x}; vp {vp} QP {qpn:#x} R_Key {rkey:#x} at {local}",
                version & 0xFFFF
            ),
            Note::CoePort {
                version,
                vp,
                channel,
                ifname,
                mac,
            } => write!(
                f,
                "HSB IP {:#06x}; vp {vp} CoE channel {channel} to {ifname} ({})",
                version & 0xFFFF,
                rocelink_wire::bytes::Mac(*mac)
            ),
            Note::Socket { vp, note } => write!(f, "note: vp {vp}: {note}"),
            Note::PtpSynchronised => write!(f, "PTP synchronised"),
            Note::Camera {
                index,
                sensor,
                transactions,
            } => write!(
                f,
                "IMX274 {index} streaming {sensor} ({transactions} I2C transactions)"
            ),
        }
    }
}

/// Why a session could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// No virtual port, or one named twice.
    #[error("the virtual ports must be at least one, each named once")]
    Vps,
    /// One sink per virtual port.
    #[error("{sinks} sinks for {vps} virtual ports: one each")]
    Sinks {
        /// Sinks given.
        sinks: usize,
        /// Virtual ports.
        vps: usize,
    },
    /// Passive receive takes one virtual port.
    #[error("passive receive takes one virtual port")]
    PassiveSeveral,
    /// A camera needs the device's I2C, which a passive host does not drive.
    #[error("a camera is brought up over the device's I2C: not from a passive host")]
    PassiveCamera,
    /// A ring too large to allocate.
    #[error("a ring of {pages} pages of {page} bytes is over {} GiB", MAX_RING >> 30)]
    Ring {
        /// Pages.
        pages: u32,
        /// Bytes each.
        page: usize,
    },
    /// A per-port list of the wrong length.
    #[error("{given} {what} for {vps} virtual ports: one, or one per port")]
    PerPort {
        /// What the list is.
        what: PerPortList,
        /// Its length.
        given: usize,
        /// Virtual ports.
        vps: usize,
    },
    /// The data ports run past 65535.
    #[error("data ports from {0} run past 65535")]
    PortRange(u16),
    /// AF_XDP receives IPv4.
    #[error("AF_XDP receives IPv4 only, not {0}")]
    XdpIpv6(IpAddr),
    /// An MTU outside [`MTUS`].
    #[error("an MTU of {0} is outside 256..=9000")]
    Mtu(u32),
    /// AF_XDP frames are at most 4 KiB.
    #[error("AF_XDP takes frames of up to 4 KiB: an MTU of 4000 or less (not {0})")]
    XdpMtu(u32),
    /// The AF_XDP socket could not be opened.
    #[error("AF_XDP on {ifname} queue {queue}")]
    Xdp {
        /// The interface.
        ifname: String,
        /// The queue.
        queue: u32,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A receiver could not be opened.
    #[error("receiver for virtual port {vp}")]
    Receiver {
        /// The virtual port.
        vp: u32,
        /// Why.
        #[source]
        source: rocelink_hsb::host::receiver::ReceiverError,
    },
    /// Camera over Ethernet needs a device this host configures.
    #[error("Camera over Ethernet needs a device configured over ECB, not a passive one")]
    CoePassive,
    /// Camera over Ethernet receives one virtual port.
    #[error("Camera over Ethernet receives one virtual port")]
    CoeSeveral,
    /// A frame CoE's 28-bit offsets cannot reach.
    #[error("a frame of {0} bytes: CoE offsets reach 256 MiB at most")]
    CoeFrame(usize),
    /// A CoE channel above 63.
    #[error("CoE channel {0} is above 63")]
    CoeChannel(u8),
    /// Something only RoCE has.
    #[error("Camera over Ethernet has no {0}")]
    CoeWith(&'static str),
    /// AF_XDP on another interface than CoE's.
    #[error("AF_XDP on {xdp} and Camera over Ethernet on {coe}: the same interface")]
    CoeXdpIface {
        /// AF_XDP's.
        xdp: String,
        /// CoE's.
        coe: String,
    },
    /// The CoE socket could not be opened.
    #[error("Camera over Ethernet on {ifname}")]
    CoeReceiver {
        /// The interface.
        ifname: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The ECB socket could not be opened.
    #[error("ECB socket")]
    Control(#[source] io::Error),
    /// The device did not answer.
    #[error("device {addr} did not answer ECB")]
    Silent {
        /// Its ECB address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: EcbError,
    },
    /// The device refused a virtual port's configuration.
    #[error("configuring virtual port {vp} on the device")]
    Configure {
        /// The virtual port.
        vp: u32,
        /// Why.
        #[source]
        source: EcbError,
    },
    /// PTP or a camera did not come up.
    #[error("bringing up virtual port {vp}")]
    BringUp {
        /// The virtual port.
        vp: u32,
        /// Why.
        #[source]
        source: Box<BringUpError>,
    },
    /// A thread could not be pinned.
    #[error("cannot pin vp {vp} to CPU {cpu}")]
    Pin {
        /// The virtual port.
        vp: u32,
        /// The CPU.
        cpu: usize,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A virtual port's frames stopped on an error (nothing arrived, a sink failed).
    #[error("vp {vp}")]
    Frames {
        /// The virtual port.
        vp: u32,
        /// Why.
        #[source]
        source: SessionError,
    },
    /// A virtual port's thread could not start.
    #[error("a thread for virtual port {vp}")]
    Thread {
        /// The virtual port.
        vp: u32,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// One virtual port being received.
struct Port<S> {
    vp: u32,
    rx: PortReceiver,
    sink: S,
    camera: Option<Camera>,
}

/// What one virtual port's thread ends with.
struct Ended<S> {
    rx: PortReceiver,
    sink: S,
    outcome: Result<Outcome, HostError>,
}

/// What one virtual port did.
#[derive(Debug)]
pub struct PortSummary<S> {
    /// The virtual port.
    pub vp: u32,
    /// Its sink, back.
    pub sink: S,
    /// How its loop ended: frames and why, or the error that ended it (a sink that could
    /// not finish included).
    pub outcome: Result<Outcome, HostError>,
    /// Its receiver's counters.
    pub stats: ReceiverStats,
    /// Its counters as the counters table shows them.
    pub link: Link,
    /// What a Camera over Ethernet port counted besides (`None` for RoCE).
    pub coe: Option<CoeCounts>,
}

/// What a session did.
#[derive(Debug)]
pub struct HostSummary<S> {
    /// Per virtual port, in order.
    pub ports: Vec<PortSummary<S>>,
    /// The AF_XDP sockets, if any (their counters).
    pub xdp: Vec<XdpPort>,
    /// What could not be undone on the device on the way out (a camera or a stream that
    /// did not stop).
    pub warnings: Vec<String>,
}

/// Serialised without its sink: `vp`, `outcome` (frames and why it stopped) or `error`
/// (the error's text with its sources), `stats`, `link`, `coe` (null for RoCE).
impl<S> serde::Serialize for PortSummary<S> {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("PortSummary", 6)?;
        st.serialize_field("vp", &self.vp)?;
        st.serialize_field("outcome", &self.outcome.as_ref().ok())?;
        let error = self
            .outcome
            .as_ref()
            .err()
            .map(|e| rocelink_runtime::session::error_text(e));
        st.serialize_field("error", &error)?;
        st.serialize_field("stats", &self.stats)?;
        st.serialize_field("link", &self.link)?;
        st.serialize_field("coe", &self.coe)?;
        st.end()
    }
}

/// Serialised as `ports`, `xdp` (each AF_XDP socket's counters) and `warnings`.
impl<S> serde::Serialize for HostSummary<S> {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("HostSummary", 3)?;
        st.serialize_field("ports", &self.ports)?;
        st.serialize_field("xdp", &self.xdp)?;
        st.serialize_field("warnings", &self.warnings)?;
        st.end()
    }
}

/// A running host.
#[derive(Debug)]
pub struct HostSession<S> {
    vps: Vec<u32>,
    cameras: Vec<Option<Camera>>,
    ctl: Option<Control>,
    stop: Stopper,
    threads: Vec<JoinHandle<Ended<S>>>,
    xdp: Vec<XdpPort>,
    board: Board,
    several: bool,
}

impl<S> fmt::Debug for Port<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port").field("vp", &self.vp).finish()
    }
}

impl<S> fmt::Debug for Ended<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ended").finish()
    }
}

impl<S: FrameSink + Send + 'static> HostSession<S> {
    /// Check `cfg`, open every receiver, configure the device and bring up PTP and the
    /// cameras (each step told to `notes`), then receive each virtual port into its sink
    /// (`sinks[i]` for `cfg.vps[i]`) on a thread of its own. Counters go to `board` when
    /// given. On an error after the device was touched, what was started on it is stopped.
    pub fn start(
        cfg: HostConfig,
        sinks: Vec<S>,
        board: Option<Board>,
        notes: &mut dyn FnMut(&Note),
    ) -> Result<HostSession<S>, HostError> {
        cfg.check(sinks.len())?;
        // a board of the session's own where none is lent: its progress reads it
        let board = board.unwrap_or_else(|| Board::new("receive"));
        let xdp = open_xdp(&cfg)?;
        let mut ports = Vec::with_capacity(cfg.vps.len());
        for (i, sink) in sinks.into_iter().enumerate() {
            let vp = cfg.vps[i];
            let mut rx = cfg.open_port(i, xdp.get(i).cloned())?;
            for note in rx.notes() {
                notes(&Note::Socket {
                    vp,
                    note: note.clone(),
                });
            }
            rx.publish(board.clone(), &port_link_name(cfg.several(), vp));
            ports.push(Port {
                vp,
                rx,
                sink,
                camera: None,
            });
        }
        let ctl = match cfg.device {
            Device::Ecb { ip, control_port } => {
                let addr = SocketAddr::new(IpAddr::V4(ip), control_port);
                Some(bring_up(&cfg, addr, &mut ports, notes)?)
            }
            Device::Passive { .. } => None,
        };
        let mut s = HostSession {
            vps: cfg.vps.clone(),
            cameras: ports.iter_mut().map(|p| p.camera.take()).collect(),
            ctl,
            stop: Stopper::new(),
            threads: Vec::new(),
            xdp,
            board,
            several: cfg.several(),
        };
        for (i, p) in ports.into_iter().enumerate() {
            let (vp, cpu) = (p.vp, cfg.cpu_for(i));
            match s.spawn(p, cpu, cfg.limits) {
                Ok(t) => s.threads.push(t),
                Err(source) => {
                    s.stop.stop();
                    let _ = s.finish();
                    return Err(HostError::Thread { vp, source });
                }
            }
        }
        Ok(s)
    }

    fn spawn(
        &self,
        p: Port<S>,
        cpu: Option<usize>,
        lim: Limits,
    ) -> io::Result<JoinHandle<Ended<S>>> {
        let stop = self.stop.clone();
        std::thread::Builder::new()
            .name(format!("vp{}", p.vp))
            .spawn(move || {
                let Port {
                    vp,
                    mut rx,
                    mut sink,
                    ..
                } = p;
                if let Some(cpu) = cpu
                    && let Err(source) = rocelink_io::cpu::pin_current_thread(cpu)
                {
                    let outcome = Err(HostError::Pin { vp, cpu, source });
                    return Ended { rx, sink, outcome };
                }
                let outcome = crate::run(&mut rx, &lim, stop.flag(), &mut [&mut sink])
                    .map_err(|source| HostError::Frames { vp, source });
                Ended { rx, sink, outcome }
            })
    }

    /// The virtual ports, in order.
    pub fn vps(&self) -> &[u32] {
        &self.vps
    }

    fn finish(&mut self) -> HostSummary<S> {
        let ended: Vec<Option<Ended<S>>> = std::mem::take(&mut self.threads)
            .into_iter()
            .map(|t| t.join().ok())
            .collect();
        let mut warnings = Vec::new();
        if let Some(ctl) = self.ctl.as_mut() {
            for (i, cam) in self.cameras.iter_mut().enumerate() {
                if let Some(c) = cam.take()
                    && let Err(e) = stop_camera(c, ctl)
                {
                    warnings.push(format!("could not stop camera {}: {e}", self.vps[i]));
                }
            }
            for (e, vp) in ended.iter().zip(&self.vps) {
                if let Some(e) = e
                    && let Err(err) = e.rx.stop(ctl)
                {
                    warnings.push(format!("could not stop the stream of vp {vp}: {err}"));
                }
            }
        }
        let mut ports = Vec::new();
        for (e, &vp) in ended.into_iter().zip(&self.vps) {
            let Some(Ended {
                rx,
                mut sink,
                outcome,
            }) = e
            else {
                warnings.push(format!("the thread of vp {vp} panicked"));
                continue;
            };
            let finished = sink
                .finish()
                .map_err(|source| HostError::Frames { vp, source });
            let link = rx.link(&port_link_name(self.several, vp));
            self.board.set_link(link.clone());
            ports.push(PortSummary {
                vp,
                sink,
                outcome: outcome.and_then(|o| finished.map(|()| o)),
                stats: rocelink_hsb::host::FrameReceiver::stats(&rx),
                link,
                coe: rx.coe(),
            });
        }
        HostSummary {
            ports,
            xdp: std::mem::take(&mut self.xdp),
            warnings,
        }
    }
}

/// Its progress is the receivers' counters as last published (a link per virtual port,
/// on the board lent to `start` or one of its own); it reports no events (frames go to the
/// sinks, steps of the bring-up to `notes`). Each port's loop ends by its limits, an error
/// or a stop; then the cameras and the streams are stopped on the device, every sink
/// finished, and the summary made — a port's error is in its summary, so waiting itself
/// does not fail.
impl<S: FrameSink + Send + 'static> Session for HostSession<S> {
    type Progress = Snapshot;
    type Event = rocelink_runtime::NoEvent;
    type Summary = HostSummary<S>;
    type Error = std::convert::Infallible;

    fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    fn progress(&self) -> Snapshot {
        self.board.snapshot()
    }

    fn next_event(&self, timeout: Duration) -> Option<Self::Event> {
        rocelink_runtime::session::no_event(timeout, || self.is_finished())
    }

    fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    fn wait(mut self) -> Result<HostSummary<S>, Self::Error> {
        Ok(self.finish())
    }
}

/// What a port's data channel is, as the device is told.
fn port_note<S>(version: u32, p: &Port<S>) -> Note {
    match &p.rx {
        PortReceiver::Coe(rx) => Note::CoePort {
            version,
            vp: p.vp,
            channel: rx.channel(),
            ifname: rx.ifname().to_owned(),
            mac: rx.mac(),
        },
        PortReceiver::Roce(rx) => Note::Port {
            version,
            vp: p.vp,
            qpn: rx.qpn(),
            rkey: rx.rkey(),
            local: rx.local_addr(),
        },
    }
}

/// The counters table's name for a port's link: "data", or "vpN" with several.
fn port_link_name(several: bool, vp: u32) -> String {
    match several {
        true => format!("vp{vp}"),
        false => "data".to_string(),
    }
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

/// The AF_XDP ports: one per virtual port (the same one where they share a queue).
fn open_xdp(cfg: &HostConfig) -> Result<Vec<XdpPort>, HostError> {
    let Some(x) = &cfg.xdp else {
        return Ok(Vec::new());
    };
    if cfg.coe.is_some() {
        // raw Ethernet frames of CoE's EtherType, on one queue
        let q = x.queues.first().copied().unwrap_or(0);
        let role = XdpRole::Raw(rocelink_wire::ethernet::ethertype::IEEE1722);
        let mut c = XdpPortConfig::new(&x.ifname, Ipv4Addr::UNSPECIFIED, role);
        c.xsk.queue = q;
        c.xsk.mode = x.mode;
        c.rx_coalesce = cfg.tuning.rx_coalesce;
        let port = XdpPort::open(&c).map_err(|source| HostError::Xdp {
            ifname: x.ifname.clone(),
            queue: q,
            source,
        })?;
        return Ok(vec![port]);
    }
    let IpAddr::V4(ip) = cfg.local.ip() else {
        return Err(HostError::XdpIpv6(cfg.local.ip()));
    };
    let n = cfg.vps.len();
    let queue_of = |i: usize| x.queues.get(i).or(x.queues.first()).copied().unwrap_or(0);
    let err = |queue| {
        move |source| HostError::Xdp {
            ifname: x.ifname.clone(),
            queue,
            source,
        }
    };
    let mut c = XdpPortConfig::new(&x.ifname, ip, XdpRole::Host);
    c.host_ports = (cfg.local.port(), cfg.local.port() + n as u16 - 1);
    c.xsk.queue = queue_of(0);
    c.xsk.mode = x.mode;
    if cfg.tuning.busy_poll {
        c.xsk.busy_poll_us = 50;
    }
    c.rx_coalesce = cfg.tuning.rx_coalesce;
    c.pfc = x.pfc;
    let first = XdpPort::open(&c).map_err(err(queue_of(0)))?;
    let mut ports = vec![first.clone()];
    for i in 1..n {
        let q = queue_of(i);
        let port = match ports.iter().find(|p| p.queue() == q) {
            Some(p) => p.clone(),
            None => first.open_queue(q).map_err(err(q))?,
        };
        ports.push(port);
    }
    Ok(ports)
}

/// The device: every port's data channel, then PTP and the cameras, one at a time; on an
/// error, what was started is stopped.
fn bring_up<S>(
    cfg: &HostConfig,
    addr: SocketAddr,
    ports: &mut [Port<S>],
    notes: &mut dyn FnMut(&Note),
) -> Result<Control, HostError> {
    let mut ctl = Control::new(addr).map_err(HostError::Control)?;
    let version = ctl
        .read(rocelink_hsb::regs::HSB_IP_VERSION)
        .map_err(|source| HostError::Silent { addr, source })?;
    let mut up = || -> Result<(), HostError> {
        for (i, p) in ports.iter_mut().enumerate() {
            notes(&port_note(version, p));
            let vp = p.vp;
            p.rx.configure(&mut ctl)
                .map_err(|source| HostError::Configure { vp, source })?;
            let b = cfg
                .bring_up
                .run(&mut ctl, vp, i == 0)
                .map_err(|e| HostError::BringUp {
                    vp,
                    source: Box::new(e),
                })?;
            if b.ptp {
                notes(&Note::PtpSynchronised);
            }
            if let Some((cam, transactions)) = b.camera {
                notes(&Note::Camera {
                    index: cam.index(),
                    sensor: cfg
                        .bring_up
                        .sensor()
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                    transactions,
                });
                p.camera = Some(cam);
            }
        }
        Ok(())
    };
    if let Err(e) = up() {
        for p in ports.iter_mut() {
            if let Some(c) = p.camera.take() {
                let _ = stop_camera(c, &mut ctl);
            }
            let _ = p.rx.stop(&mut ctl);
        }
        return Err(e);
    }
    Ok(ctl)
}
