//! The device on real sockets: ECB on `ip:8192`, BOOTP enumeration from `ip:12268` once a
//! second, and, for every virtual port the host configured and enabled, frames from the
//! sensor through the sensor window and the packetizer to the host, paced.
//!
//! Data packets leave through a UDP socket bound to `ip:DP_PACKET_UDP_PORT` with
//! `IP_PMTUDISC_DO`, so the kernel writes the FPGA's IPv4 header (ToS 0, ID 0, DF, TTL 64)
//! and the ICRC computed in user space is exact for any receiver.

use crate::device::coe::CoePacketizer;
use crate::device::packetizer::{OutPacket, Packetizer, Ptp};
use crate::device::sensor_tx::SensorTx;
use crate::device::window::SensorWindow;
use crate::device::{DeviceCore, VpStream};
use rocelink_io::backend::{Backend, Outgoing, Transmitter};
use rocelink_io::tap::Tap;
pub use rocelink_runtime::Session;
use rocelink_runtime::counters::{Board, Snapshot};
use rocelink_runtime::{SessionThread, Stopper};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod coe;
mod config;
mod serve;
mod socks;
pub use config::{ConfigError, EmulatorConfig, EmulatorStats, Handles, Pacing, allow_list};
use socks::{Dgram, Sockets, bind, named};

/// ECB requests served per turn of the loop: a flood of control traffic delays a frame
/// by at most this many requests instead of starving the data plane.
const CONTROL_BUDGET: usize = 64;

fn ptp_now() -> Ptp {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

struct VpState {
    stream: VpStream,
    window: SensorWindow,
    packetizer: Packetizer,
    /// Set when the host chose CoE for this port.
    coe: Option<CoePacketizer>,
    frame: u64,
}

/// A device whose sockets are bound (and pcap file created): it is reachable from the
/// moment [`Emulator::bind`] returns, so a caller can start a host right after it. The one
/// way in from outside is [`EmulatorSession::start`], which binds one and serves it.
pub(crate) struct Emulator {
    cfg: EmulatorConfig,
    lent: Handles,
    socks: Sockets,
    raw: Option<coe::RawLink>,
    tap: Option<Tap>,
    stx_record: Option<rocelink_io::file::Output>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("ip", &self.cfg.device.ip)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Bind every socket of the device and create the pcap file. Errors name the address
    /// or file at fault.
    pub(crate) fn bind(cfg: &EmulatorConfig, lent: Handles) -> io::Result<Emulator> {
        // the binding speaks io::Error: the typed ConfigError rides inside it
        cfg.check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let socks = bind(
            lent.xdp.as_ref(),
            IpAddr::V4(cfg.device.ip),
            cfg.control_port,
            cfg.sensor_tx_port,
            rocelink_wire::hsb::DATA_SOURCE_PORT,
            &lent.notes,
        )?;
        let raw = coe::RawLink::open(lent.xdp.as_ref(), cfg.coe_iface.as_deref())?;
        let tap = match &cfg.pcap {
            Some(p) => Some(Tap::new(Box::new(rocelink_io::file::Output::create(p)?))?),
            None => None,
        };
        let stx_record = match &cfg.sensor_tx_record {
            Some(p) => Some(rocelink_io::file::Output::create(p)?),
            None => None,
        };
        Ok(Emulator {
            cfg: cfg.clone(),
            lent,
            socks,
            raw,
            tap,
            stx_record,
        })
    }

    /// Where ECB is served (the port chosen when 0 was asked for).
    pub(crate) fn control_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.socks.control.local_addr()
    }

    /// Serve until `stop` is set, the frame count or the run time is reached.
    pub(crate) fn serve(self, stop: &AtomicBool) -> io::Result<EmulatorStats> {
        serve::Serving::new(self).run(stop)
    }
}

/// A running emulator: bound when [`start`](EmulatorSession::start) returns (a host may
/// talk to it at once), serving on a thread of its own until stopped, its frame count or
/// its run time; its counters at the end (and on the board lent, `Handles::counters`, as it runs).
#[derive(Debug)]
pub struct EmulatorSession {
    control: SocketAddr,
    board: Board,
    thread: SessionThread<io::Result<EmulatorStats>>,
}

impl EmulatorSession {
    /// Bind every socket of the device (errors name the address or file at fault), then
    /// serve on a thread of its own. What the program lends (`lent`): the board the
    /// device's counters go to (else one of the session's own), an AF_XDP port to own,
    /// where notes go.
    pub fn start(cfg: &EmulatorConfig, mut lent: Handles) -> io::Result<EmulatorSession> {
        let board = lent
            .counters
            .get_or_insert_with(|| Board::new("emulate"))
            .clone();
        let emu = Emulator::bind(cfg, lent)?;
        let control = emu.control_addr()?;
        let thread = SessionThread::spawn("hsb-emulator", move |stop| emu.serve(stop.flag()))?;
        Ok(EmulatorSession {
            control,
            board,
            thread,
        })
    }

    /// Where ECB is served.
    pub fn control_addr(&self) -> SocketAddr {
        self.control
    }
}

/// Its progress is the device's counters as last published (link "device", about every
/// 100 ms); it reports no events; its summary is its counters at the end. It ends by its
/// frame count or run time, an error, or a stop.
impl Session for EmulatorSession {
    type Progress = Snapshot;
    type Event = rocelink_runtime::NoEvent;
    type Summary = EmulatorStats;
    type Error = io::Error;

    fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    fn progress(&self) -> Snapshot {
        self.board.snapshot()
    }

    fn next_event(&self, timeout: Duration) -> Option<Self::Event> {
        rocelink_runtime::session::no_event(timeout, || self.thread.is_finished())
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> io::Result<EmulatorStats> {
        self.thread.join()
    }
}

/// The CoE packetizer for a port the host set to CoE.
fn coe_packetizer(s: &VpStream, psn: u32, cfg: &EmulatorConfig) -> Option<CoePacketizer> {
    s.coe
        .map(|_| CoePacketizer::new(*s, psn, cfg.coe_form, cfg.packetizer.endian))
}

/// Take what waits on the sensor TX socket (a bounded number per turn): counted, and
/// what port 0 gets appended to `record`.
fn receive_sensor_tx(
    sock: &Dgram,
    stx: &mut SensorTx,
    buf: &mut [u8],
    mut record: Option<&mut rocelink_io::file::Output>,
    mut tap: Option<&mut Tap>,
) -> io::Result<()> {
    let Ok(local) = sock.local_addr() else {
        return Ok(());
    };
    for _ in 0..CONTROL_BUDGET {
        let Ok((n, from)) = sock.recv_from(buf) else {
            break;
        };
        if let Some(t) = tap.as_mut() {
            t.record(from, local, &buf[..n], 0)?;
        }
        if let Some(d) = stx.handle(from, local, &buf[..n])
            && d.port == 0
            && let Some(f) = record.as_mut()
        {
            io::Write::write_all(f, d.bytes).map_err(|e| named(e, "sensor TX recording"))?;
        }
    }
    Ok(())
}

/// Send the async event messages the device queued.
fn send_events(core: &mut DeviceCore, sock: &Dgram, stats: &mut EmulatorStats) {
    for (b, dst) in core.take_events() {
        if sock.send_to(&b, SocketAddr::V4(dst)).is_ok() {
            stats.events += 1;
        }
    }
}

/// Send `pkts` (gather packets point into `src`) to `dst`, spreading them at `gbps`: runs of
/// equal-sized packets (up to the transmitter's 16, under 64 KB) as one segmented send —
/// header, the frame's bytes where they are, pad and ICRC — the rest batched. Returns bytes
/// sent. `to`: the destination and the traffic class every packet carries.
fn send_paced(
    sock: &dyn Backend,
    tx: &mut Transmitter,
    (dst, tos): (SocketAddr, u8),
    pkts: &[OutPacket],
    src: &[u8],
    gbps: f64,
    mut tap: Option<(&mut Tap, SocketAddr)>,
) -> io::Result<u64> {
    let out: Vec<Outgoing<'_>> = pkts
        .iter()
        .map(|p| Outgoing::new(dst, p.parts(src)).with_tos(tos))
        .collect();
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut bytes = 0u64;
    while sent < out.len() {
        // one run at a time, so the pacing below spreads them
        let run = tx.run_len(&out[sent..]).max(1);
        let n = tx.send(sock, &out[sent..sent + run])?;
        if n == 0 {
            sock.wait_writable(Some(Duration::from_millis(5)))?;
            continue;
        }
        for o in &out[sent..sent + n] {
            bytes += o.len() as u64;
            if let Some((t, from)) = tap.as_mut() {
                t.record(*from, dst, &o.parts.concat(), 0)?;
            }
        }
        sent += n;
        // pace: do not run ahead of the link
        let due = t0 + Duration::from_secs_f64(bytes as f64 * 8.0 / (gbps.max(0.01) * 1e9));
        let now = Instant::now();
        if due > now + Duration::from_micros(50) {
            std::thread::sleep(due - now);
        }
    }
    Ok(bytes)
}
