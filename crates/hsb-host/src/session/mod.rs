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

mod config;
mod error;
mod note;

pub use crate::port::{Coe, CoeCounts};
pub use config::{
    Device, HostConfig, MAX_RING, MTUS, PerPortList, Tuning, Xdp, iface_mtu, link_mtu, suffixed,
};
pub use error::HostError;
pub use note::Note;

use crate::port::PortReceiver;
use crate::{FrameSink, Limits, Outcome};
use rocelink_hsb::host::bring_up::stop_camera;
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::imx274::Camera;
use rocelink_hsb::host::receiver::ReceiverStats;
use rocelink_runtime::counters::{Board, Link, Snapshot};
use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
pub use rocelink_runtime::{Session, Stopper};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::thread::JoinHandle;
use std::time::Duration;

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
        PortReceiver::Coe(c) => Note::CoePort {
            version,
            vp: p.vp,
            channel: c.rx.channel(),
            ifname: c.rx.ifname().to_owned(),
            mac: c.rx.mac(),
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
