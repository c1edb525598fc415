//! Why a host session could not start or run.

use super::{MAX_RING, PerPortList};
use crate::SessionError;
use rocelink_hsb::host::bring_up::BringUpError;
use rocelink_hsb::host::control::EcbError;
use std::io;
use std::net::{IpAddr, SocketAddr};

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
    /// An MTU outside [`MTUS`](super::MTUS).
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
