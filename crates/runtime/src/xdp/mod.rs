//! RoCE over AF_XDP: an [`XdpPort`] joins an AF_XDP socket (`rocelink_io::xdp::Xsk`) to
//! the device network stack (`rocelink_netstack::Interface`), and [`XdpSocket`]s on it are
//! UDP ports implementing [`Backend`] — so the [`crate::Driver`], the emulator and the
//! benchmarks run over it unchanged.
//!
//! Two ways to own a port:
//! * [`XdpRole::Host`]: the program steers only UDP 4791 to the socket; the kernel keeps
//!   the interface's address, ARP and ICMP. Neighbours' MACs are learnt from what they
//!   send (the kernel keeps ARP replies to itself).
//! * [`XdpRole::Device`]: the program steers everything for the device's address (ARP,
//!   IPv4, PFC, CoE, VLAN-tagged frames); the stack answers ARP and ping itself, as an HSB
//!   board or blue-ethernet does. The address need not be configured on the interface.
//!
//! Every received datagram keeps its real IPv4 header, so the transport checks each ICRC
//! exactly (IPv4 identification included) instead of recovering the ID.

use rocelink_io::backend::{Backend, LendFn, Outgoing};
use rocelink_io::udp::RecvBatch;
use rocelink_io::xdp::{Steer, XdpProgram, Xsk, XskConfig};
use rocelink_netstack::iface::{IfaceConfig, IfaceStats, Interface, Rx, UdpTx};
use rocelink_wire::bytes::Mac;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod inner;
mod pfc;
mod socket;

use inner::Inner;
pub use pfc::{PfcClassStats, PfcConfig};
pub use socket::XdpSocket;

/// How the port is shared with the kernel (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum XdpRole {
    /// A host receiving RoCE v2: UDP 4791 only.
    Host,
    /// A device owning its address.
    Device,
    /// A host taking raw frames of one EtherType (CoE, 0x22F0) — kept for
    /// [`XdpPort::recv_other`]; the kernel keeps the interface.
    Raw(u16),
}

/// How to open an [`XdpPort`].
#[derive(Debug, Clone)]
pub struct XdpPortConfig {
    /// The interface.
    pub ifname: String,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of the subnet.
    pub prefix_len: u8,
    /// Host or device.
    pub role: XdpRole,
    /// The AF_XDP socket (queue, UMEM, rings, copy or zero-copy, busy poll).
    pub xsk: XskConfig,
    /// Our MAC (default: the interface's).
    pub mac: Option<[u8; 6]>,
    /// 802.1Q VLAN of the port.
    pub vlan: Option<u16>,
    /// As a host: the UDP destination ports steered to the socket (first, last).
    pub host_ports: (u16, u16),
    /// The ARP cache's geometry, lifetime and retries.
    pub arp: rocelink_netstack::arp_cache::ArpConfig,
    /// Receive coalescing: while frames keep coming, wait this long between looks at the
    /// ring instead of sleeping until the kernel wakes us for the next frame — fewer,
    /// larger batches (a wake-up costs more than the frames it brings at a few per batch)
    /// for at most this much added latency. Once a look finds nothing, the next wait sleeps
    /// until a frame comes, as without. Zero (the default): off.
    pub rx_coalesce: Duration,
    /// Priority flow control: honour the peer's pauses when sending, pause the peer when
    /// the receive ring fills (see [`PfcConfig`]). `None` (the default): off.
    pub pfc: Option<PfcConfig>,
}

impl XdpPortConfig {
    /// A port on `ifname` at `ip` (/24) in `role`, queue 0, defaults otherwise.
    pub fn new(ifname: &str, ip: Ipv4Addr, role: XdpRole) -> XdpPortConfig {
        XdpPortConfig {
            ifname: ifname.to_owned(),
            ip,
            prefix_len: 24,
            role,
            xsk: XskConfig::default(),
            mac: None,
            vlan: None,
            host_ports: (rocelink_wire::ROCE_V2_PORT, rocelink_wire::ROCE_V2_PORT),
            arp: Default::default(),
            rx_coalesce: Duration::ZERO,
            pfc: None,
        }
    }
}

/// What [`XdpPort::recv_other_with`] calls on each frame: (EtherType, payload).
pub type OtherLendFn<'a> = dyn FnMut(u16, &[u8]) + 'a;

/// A datagram for a port nobody was reading when it came.
type Queued = (SocketAddr, Option<[u8; 20]>, Vec<u8>);

/// Counters of the port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpPortStats {
    /// Frames from the AF_XDP socket.
    pub rx_frames: u64,
    /// Datagrams to a port nobody opened.
    pub no_port: u64,
    /// Datagrams dropped because a port's queue was full.
    pub queue_full: u64,
    /// Frames the socket had no room for (sent later).
    pub tx_full: u64,
    /// Frames of another EtherType for us (CoE, …) nobody took.
    pub other_dropped: u64,
}

/// Serialised as its counters ([`XdpPort::stats`]).
impl serde::Serialize for XdpPort {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.stats().serialize(s)
    }
}

/// One AF_XDP socket with the device stack (see the module documentation).
#[derive(Clone)]
pub struct XdpPort {
    inner: Arc<Mutex<Inner>>,
    ip: Ipv4Addr,
    fd: i32,
    queue: u32,
    prog: Arc<XdpProgram>,
    cfg: Arc<XdpPortConfig>,
    /// Slots in the program's map: the queues a port can be bound to.
    queues: u32,
}

impl std::fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPort")
            .field("ip", &self.ip)
            .finish_non_exhaustive()
    }
}

impl XdpPort {
    /// Open the AF_XDP socket, attach the steering program and start the stack. Errors
    /// say what the kernel refused and what to do about it.
    pub fn open(cfg: &XdpPortConfig) -> io::Result<XdpPort> {
        let queues = rocelink_io::xdp::iface_queues(&cfg.ifname).max(cfg.xsk.queue + 1);
        let steer = match cfg.role {
            XdpRole::Host => Steer::UdpPorts {
                first: cfg.host_ports.0,
                last: cfg.host_ports.1,
            },
            XdpRole::Device => Steer::Device(cfg.ip),
            XdpRole::Raw(et) => Steer::EtherType(et),
        };
        // the socket first: its errors (no such interface, queue) say more than the program's
        let xsk = Xsk::open(&cfg.ifname, &cfg.xsk).map_err(|e| {
            let have = rocelink_io::xdp::iface_queues(&cfg.ifname);
            match e.kind() {
                io::ErrorKind::InvalidInput if cfg.xsk.queue >= have => io::Error::new(
                    e.kind(),
                    format!("{e} ({} has {have} receive queue(s))", cfg.ifname),
                ),
                _ => e,
            }
        })?;
        let prog = Arc::new(XdpProgram::attach(&cfg.ifname, steer, queues)?);
        XdpPort::start(xsk, prog, Arc::new(cfg.clone()), queues)
    }

    /// Another port on the same interface, bound to receive queue `queue`, sharing the
    /// steering program and the configuration: one per queue, each read by its own thread
    /// (the NIC's flow steering, or the sender's transmit queue on veth, decides which
    /// datagrams arrive on which queue). Its stack is its own (ARP cache, counters).
    ///
    /// ```no_run
    /// use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
    /// # fn main() -> std::io::Result<()> {
    /// let mut cfg = XdpPortConfig::new("eth1", "10.0.0.1".parse().unwrap(), XdpRole::Host);
    /// cfg.host_ports = (4791, 4792);
    /// let q0 = XdpPort::open(&cfg)?;
    /// let q1 = q0.open_queue(1)?;
    /// let (a, b) = (q0.socket(4791), q1.socket(4792));
    /// std::thread::scope(|s| {
    ///     s.spawn(move || { /* receive from a */ drop(a) });
    ///     s.spawn(move || { /* receive from b */ drop(b) });
    /// });
    /// # Ok(()) }
    /// ```
    pub fn open_queue(&self, queue: u32) -> io::Result<XdpPort> {
        if queue >= self.queues {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} has {} receive queue(s): no queue {queue}",
                    self.cfg.ifname, self.queues
                ),
            ));
        }
        if queue == self.queue {
            return Ok(self.clone());
        }
        let mut cfg = (*self.cfg).clone();
        cfg.xsk.queue = queue;
        let xsk = Xsk::open(&cfg.ifname, &cfg.xsk)?;
        XdpPort::start(xsk, self.prog.clone(), Arc::new(cfg), self.queues)
    }

    /// Register the socket with the program and start the stack.
    fn start(
        xsk: Xsk,
        prog: Arc<XdpProgram>,
        cfg: Arc<XdpPortConfig>,
        queues: u32,
    ) -> io::Result<XdpPort> {
        let mac = match cfg.mac {
            Some(m) => m,
            None => rocelink_io::xdp::iface_mac(&cfg.ifname)?,
        };
        prog.register(cfg.xsk.queue, &xsk)?;
        let mut ic = IfaceConfig::new(Mac(mac), cfg.ip);
        ic.prefix_len = cfg.prefix_len;
        ic.vlan = cfg.vlan;
        ic.learn_from_ip = cfg.role == XdpRole::Host;
        ic.arp = cfg.arp;
        let iface = Interface::new(ic)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let fd = xsk.fd();
        let watch = match &cfg.pfc {
            Some(p) => Some(pfc::Watch::start(p, &cfg.ifname, Mac(mac), xsk.rx_level())?),
            None => None,
        };
        let mut inner = Inner {
            xsk,
            iface,
            ports: HashMap::new(),
            other: None,
            pauses: VecDeque::new(),
            held: cfg.pfc.as_ref().map(pfc::Held::new),
            watch,
            unsent: None,
            flowing: false,
            stats: XdpPortStats::default(),
        };
        if matches!(cfg.role, XdpRole::Raw(_)) {
            inner.other = Some(VecDeque::new());
        }
        if cfg.role == XdpRole::Device {
            // as a board coming up: tell the segment who we are
            inner.iface.announce();
            inner.transmit_stack()?;
        }
        Ok(XdpPort {
            inner: Arc::new(Mutex::new(inner)),
            ip: cfg.ip,
            fd,
            queue: cfg.xsk.queue,
            prog,
            cfg,
            queues,
        })
    }

    /// The receive queue it is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A UDP socket on this port at `port` (datagrams to it are kept from now on).
    pub fn socket(&self, port: u16) -> XdpSocket {
        self.lock().ports.entry(port).or_default();
        XdpSocket {
            port: self.clone(),
            local: SocketAddr::V4(SocketAddrV4::new(self.ip, port)),
        }
    }

    /// Keep frames of other EtherTypes for us (CoE) for [`XdpPort::recv_other`].
    pub fn keep_other(&self) {
        self.lock().other.get_or_insert_with(VecDeque::new);
    }

    /// The next kept frame of another EtherType: (EtherType, payload).
    pub fn recv_other(&self) -> io::Result<Option<(u16, Vec<u8>)>> {
        let mut g = self.lock();
        if g.other.as_ref().is_none_or(|q| q.is_empty()) {
            g.receive(0, None)?;
        }
        Ok(g.other.as_mut().and_then(|q| q.pop_front()))
    }

    /// Lend up to `max` frames of other EtherTypes (CoE) to `each` where they lie (kept
    /// ones first), without waiting. Returns how many.
    pub fn recv_other_with(&self, max: usize, each: &mut OtherLendFn<'_>) -> io::Result<usize> {
        let mut g = self.lock();
        let mut n = 0;
        if let Some(q) = g.other.as_mut() {
            while n < max
                && let Some((et, payload)) = q.pop_front()
            {
                each(et, &payload);
                n += 1;
            }
        }
        if n < max {
            n += g.receive_lent(0, max - n, None, Some(each))?;
        }
        Ok(n)
    }

    /// Send a frame of another EtherType (CoE) to `dst`, its payload gathered from
    /// `parts`; `false` (nothing sent) while the socket still has frames it had no room
    /// for — wait a little and call again.
    pub fn send_frame(&self, dst: Mac, ethertype: u16, parts: &[&[u8]]) -> io::Result<bool> {
        let mut g = self.lock();
        if g.unsent.is_some() && !g.transmit_stack()? {
            return Ok(false);
        }
        g.iface.send_raw(dst, ethertype, 0, parts);
        g.transmit_stack()?;
        Ok(true)
    }

    /// Send a PFC frame (pause, or resume with quanta 0).
    pub fn send_pause(&self, f: &rocelink_wire::pfc::Repr) -> io::Result<()> {
        let mut g = self.lock();
        g.iface.send_pause(f);
        g.transmit_stack().map(|_| ())
    }

    /// The PFC frames received since the last call, oldest first (for a `PfcTx`).
    pub fn take_pauses(&self) -> Vec<rocelink_wire::pfc::Repr> {
        let mut g = self.lock();
        if g.pauses.is_empty() {
            g.receive(0, None).ok();
        }
        g.pauses.drain(..).collect()
    }

    /// The PFC counters per class (`None` when the port does not take part in PFC).
    pub fn pfc_stats(&self) -> Option<[PfcClassStats; 8]> {
        self.cfg.pfc?;
        let g = self.lock();
        Some(pfc::stats(g.held.as_ref(), g.watch.as_ref()))
    }

    /// The stack's counters.
    pub fn iface_stats(&self) -> IfaceStats {
        self.lock().iface.stats
    }

    /// The ARP cache's counters.
    pub fn arp_stats(&self) -> rocelink_netstack::arp_cache::ArpStats {
        self.lock().iface.arp().stats
    }

    /// The port's own counters.
    pub fn stats(&self) -> XdpPortStats {
        self.lock().stats
    }

    /// The AF_XDP socket's counters (user space) and the kernel's.
    pub fn xsk_stats(
        &self,
    ) -> (
        rocelink_io::xdp::XskCounters,
        io::Result<rocelink_io::xdp::XskStats>,
    ) {
        let g = self.lock();
        (g.xsk.counters, g.xsk.stats())
    }

    /// The interface and queue it is bound to.
    pub fn bound(&self) -> (String, u32) {
        let g = self.lock();
        let (i, q) = g.xsk.bound();
        (i.to_owned(), q)
    }

    /// Whether the driver gave zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.lock().xsk.zero_copy()
    }

    /// Run the stack's timers (ARP retries) and send what it has.
    pub fn poll(&self) -> io::Result<()> {
        let mut g = self.lock();
        g.iface.handle_timeout(Instant::now());
        g.send_held(Instant::now());
        g.transmit_stack().map(|_| ())
    }

    /// Run the stack's timers, send what it has, and sleep until a frame is ready or
    /// `timeout` passes (or the stack's next timer).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        // the stack's timers bound the sleep
        let timeout = {
            let mut g = self.lock();
            let now = Instant::now();
            g.iface.handle_timeout(now);
            g.send_held(now);
            g.transmit_stack()?;
            let coalesce = self.cfg.rx_coalesce;
            if !coalesce.is_zero() && std::mem::take(&mut g.flowing) {
                // frames were coming: look again after a while rather than on the next one
                drop(g);
                std::thread::sleep(timeout.map_or(coalesce, |t| t.min(coalesce)));
                return Ok(true);
            }
            let next = match (g.iface.poll_timeout(), g.held_timeout(now)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match (next, timeout) {
                (Some(t), Some(d)) => Some(d.min(t.saturating_duration_since(now))),
                (Some(t), None) => Some(t.saturating_duration_since(now)),
                (None, d) => d,
            }
        };
        rocelink_io::xdp::wait_fd(self.fd, timeout)
    }
}
