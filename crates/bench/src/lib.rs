//! `rocelink bench stream`: one sender, three receivers, one run, same packets.
//!
//! The sender replays a set of HSB frames (UC RDMA WRITE ONLY packets of `payload` bytes and
//! one metadata packet per frame, real ICRCs) from a UDP socket bound to the "device" IP,
//! with `sendmmsg` or gather-GSO, unpaced or at a target rate. Receivers:
//!
//! * **sink** — the baseline: `recvmmsg` (optionally `UDP_GRO`) and count bytes, nothing else.
//! * **sink-ring** — the sink, but the kernel copies each datagram to the next place of a
//!   ring as large as rocelink's (in huge pages, as rocelink's): what landing payloads in
//!   memory that is not in the cache costs by itself, with nothing checked.
//! * **recv1** — today's HSB Linux receiver path: one `recv()` per packet, a clock read per
//!   packet, BTH/RETH parse, range check, `memcpy` into the frame buffer, PSN drop counting,
//!   frame publish on the metadata packet (no ICRC, no QP/R_Key check).
//! * **rocelink** — rocelink's full HSB receive path (`rocelink_hsb::host::receiver`): ICRC
//!   of every packet, QP/R_Key/bounds before placement, PSN continuity, frame CRC checked
//!   against the metadata.
//!
//! * **generic** — rocelink's receiver with the fast path off.
//! * **xdp** — rocelink's receiver over AF_XDP (`rocelink_runtime::xdp`): every ICRC exact
//!   with the real IPv4 header. Needs [`StreamConfig::veth`]: a veth pair between two
//!   namespaces ([`veth`]), the sender in one, the receivers in the other.
//!
//! Each receiver thread's CPU time comes from `getrusage(RUSAGE_THREAD)`; over veth the
//! machine's softirq time is measured too (the kernel's receive work runs there).
//!
//! [`perf`] holds `rocelink bench perf` (perftest's tests against the UDP figures that bound
//! them), [`record`] `rocelink bench record` (recorder against `dd oflag=direct`), [`shots`]
//! `rocelink bench shots` (ultrasound shots over RoCE UD and over plain UDP), [`scale`]
//! `rocelink bench scale` (N streams at once, each on CPUs of its own), [`verbs`]
//! `rocelink bench verbs` (perftest over `librocelink_verbs.so` against `rocelink perf`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod baseline;
pub mod perf;
pub mod record;
pub mod scale;
pub mod shots;
pub mod verbs;
pub mod veth;

use rocelink_hsb::device::VpStream;
use rocelink_hsb::device::packetizer::{Packetizer, PacketizerOptions};
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_io::backend::{Outgoing, Transmitter};
use rocelink_io::net::{CpuTime, pin_current_thread, thread_cpu};
use rocelink_io::scatter::{ScatterRx, Slot};
use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use rocelink_wire::bytes::Mac;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Stream benchmark settings.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Payload bytes per data packet (a multiple of 128).
    pub payload: usize,
    /// Frame size in bytes.
    pub frame: usize,
    /// Seconds each receiver runs.
    pub seconds: f64,
    /// Paced payload rate in Gbit/s (`None`: as fast as the sender can).
    pub rate_gbps: Option<f64>,
    /// Sender uses UDP GSO (gather).
    pub gso: bool,
    /// Receivers ask for UDP GRO.
    pub gro: bool,
    /// Pin the sender and the receivers to [`StreamConfig::cpus`].
    pub pin: bool,
    /// The sender's CPU and the receivers' (0 and 1 by default).
    pub cpus: (usize, usize),
    /// Loopback addresses (device, host).
    pub device: Ipv4Addr,
    /// Host address.
    pub host: Ipv4Addr,
    /// Receivers to run, in order (names from [`ALL_RECEIVERS`]).
    pub receivers: Vec<&'static str>,
    /// Messages per `recvmmsg` for rocelink's fast path (0: its default).
    pub batch: usize,
    /// rocelink spins on the socket instead of sleeping.
    pub busy_poll: bool,
    /// rocelink's receive coalescing, on the socket and AF_XDP paths alike
    /// (`ReceiverConfig::rx_coalesce`, `XdpPortConfig::rx_coalesce`; zero: off).
    pub coalesce: Duration,
    /// Socket receive buffer of the sink and of rocelink's receiver (recv1 gets HSB's).
    pub rcvbuf: usize,
    /// Run over this veth link instead of loopback (`device`/`host` are then its
    /// addresses): the sender in its namespace A, the receivers in B.
    pub veth: Option<veth::Veth>,
    /// Set (by a Ctrl-C handler) to end the run early: the receiver running then stops
    /// at once and nothing more starts; the call returns an `Interrupted` error.
    pub stop: Arc<AtomicBool>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            payload: 4096,
            frame: 1 << 20,
            seconds: 3.0,
            rate_gbps: None,
            gso: true,
            gro: true,
            pin: true,
            cpus: (0, 1),
            device: Ipv4Addr::new(127, 0, 77, 2),
            host: Ipv4Addr::new(127, 0, 77, 1),
            receivers: RECEIVERS.to_vec(),
            batch: 0,
            busy_poll: false,
            coalesce: Duration::ZERO,
            rcvbuf: 64 << 20,
            veth: None,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// One receiver's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// `sink`, `recv1` or `rocelink`.
    pub name: &'static str,
    /// Payload goodput in Gbit/s (bytes placed, or counted for the sink).
    pub gbps: f64,
    /// Datagrams per second received.
    pub pps: f64,
    /// Fraction of sent datagrams not received.
    pub loss: f64,
    /// Receiver thread CPU, percent of one core.
    pub cpu_percent: f64,
    /// The part of it in user space (the rest is the kernel's: system calls and copies).
    pub cpu_user_percent: f64,
    /// The machine's softirq and hardirq time over the run, percent of one core (the
    /// kernel's receive path on veth; on loopback it runs in the sender's system calls).
    pub irq_percent: f64,
    /// Datagrams sent / received.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Frames reported (good, damaged) by frame-aware receivers.
    pub frames: (u64, u64),
}

const QP: u32 = 0x77;
const RKEY: u32 = 0x7777;
const PAGES: u32 = 4;

fn vp_stream(cfg: &StreamConfig, port: u16) -> VpStream {
    let md = cfg.frame.next_multiple_of(128);
    VpStream {
        vp: 0,
        qp: QP,
        rkey: RKEY,
        base: 0,
        page_stride: (md + 128) as u64,
        first_page: 0,
        pages: PAGES,
        window: cfg.frame as u32,
        host: SocketAddrV4::new(cfg.host, port),
        host_mac: Mac([0; 6]),
        md_disable: false,
        payload: cfg.payload,
        src_port: rocelink_wire::hsb::DATA_SOURCE_PORT,
        vlan: None,
        camera: None,
        coe: None,
    }
}

/// `PAGES` frames of packets addressed to `port`.
fn build_frames(cfg: &StreamConfig, port: u16) -> Vec<Vec<Vec<u8>>> {
    let mut p = Packetizer::new(
        vp_stream(cfg, port),
        cfg.device,
        1,
        PacketizerOptions::default(),
    );
    let mut frame = vec![0u8; cfg.frame];
    (0..PAGES)
        .map(|n| {
            rocelink_hsb::sensor::Sensor::Pattern.frame(u64::from(n), cfg.frame, &mut frame);
            let mut out = Vec::new();
            p.push(&frame, Some(0), (0, 0), &mut out);
            out
        })
        .collect()
}

/// Send frames until `stop` from `sock` (or a socket bound here, in the device's
/// namespace); returns datagrams sent.
fn sender(
    cfg: &StreamConfig,
    port: u16,
    stop: &AtomicBool,
    sock: Option<UdpSocket>,
) -> io::Result<u64> {
    if cfg.pin {
        let _ = pin_current_thread(cfg.cpus.0);
    }
    if let Some(v) = &cfg.veth {
        rocelink_io::net::enter_netns(&v.ns_a)?;
    }
    let sock = match sock {
        Some(s) => s,
        None => UdpSocket::bind(
            SocketAddr::new(IpAddr::V4(cfg.device), rocelink_wire::hsb::DATA_SOURCE_PORT),
            &UdpConfig::default(),
        )?,
    };
    let frames = build_frames(cfg, port);
    let dst = SocketAddr::new(IpAddr::V4(cfg.host), port);
    let start = Instant::now();
    let (mut sent, mut bytes) = (0u64, 0u64);
    // equal-sized runs of up to 15 segments (≤ 64 KB) segmented, or 64 datagrams batched
    let mut tx = Transmitter::new(cfg.gso).with_max_run(15);
    let frames: Vec<Vec<Outgoing<'_>>> = frames
        .iter()
        .map(|f| f.iter().map(|p| Outgoing::whole(dst, p)).collect())
        .collect();
    'outer: loop {
        for f in &frames {
            let mut i = 0;
            while i < f.len() {
                if stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let end = if tx.segmenting() {
                    i + tx.run_len(&f[i..]).max(1)
                } else {
                    (i + 64).min(f.len())
                };
                let n = tx.send(&sock, &f[i..end])?;
                if n == 0 {
                    sock.wait_writable(Some(Duration::from_millis(1)))?;
                    continue;
                }
                bytes += f[i..i + n].iter().map(|p| p.len() as u64).sum::<u64>();
                sent += n as u64;
                i += n;
                if let Some(r) = cfg.rate_gbps {
                    let due = start + Duration::from_secs_f64(bytes as f64 * 8.0 / (r * 1e9));
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
            }
        }
    }
    Ok(sent)
}

struct RxOut {
    received: u64,
    bytes: u64,
    cpu: CpuTime,
    frames: (u64, u64),
}

fn sink(sock: &UdpSocket, stop: &AtomicBool) -> io::Result<RxOut> {
    let mut batch = RecvBatch::new(64, if sock.gro() { 65_536 } else { 9216 });
    let cpu0 = thread_cpu();
    let (mut received, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if sock.recv_batch(&mut batch)? == 0 {
            sock.wait_readable(Some(Duration::from_millis(5)))?;
            continue;
        }
        for (_, seg) in batch.segments() {
            received += 1;
            bytes += seg.len().saturating_sub(32) as u64; // payload of a data packet
        }
    }
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (0, 0),
    })
}

/// The sink into a ring: each receive lands at the ring's next bytes (with GRO one
/// message of up to 64 KiB; without, up to 64 datagrams, each in a 9 216-byte slot of its
/// own), and the next receive lands after it on a cache line, wrapping to the start where
/// a receive would not fit.
struct RingSink {
    ring: rocelink_io::aligned::AlignedBuf,
    rx: ScatterRx,
    plan: Vec<Slot>,
    at: usize,
    /// Bytes per message, messages per receive.
    per: usize,
    msgs: usize,
}

impl RingSink {
    /// A ring of at least `len` bytes, in huge pages where the kernel gives them.
    fn new(len: usize, gro: bool) -> RingSink {
        let (per, msgs) = if gro { (65_536, 1) } else { (9_216, 64) };
        RingSink {
            ring: rocelink_io::aligned::AlignedBuf::huge_zeroed(len.max(per * msgs)),
            rx: ScatterRx::new(64),
            plan: Vec::with_capacity(msgs),
            at: 0,
            per,
            msgs,
        }
    }

    /// One receive without waiting: (segments, payload bytes as the sink counts them).
    fn recv(&mut self, sock: &UdpSocket) -> io::Result<(u64, u64)> {
        let region = self.ring.as_mut();
        if self.at + self.per * self.msgs > region.len() {
            self.at = 0;
        }
        let (at, per) = (self.at, self.per);
        self.plan.clear();
        self.plan.extend((0..self.msgs).map(|m| Slot {
            head: 0,
            body: at + m * per..at + (m + 1) * per,
            tail: 0,
        }));
        let n = self.rx.recv(sock, region, &self.plan, 1, self.msgs)?;
        let (mut segs, mut bytes, mut end) = (0, 0, at);
        for (m, meta) in self.rx.meta().iter().enumerate().take(n) {
            end = at + m * per + meta.len.min(per);
            let k = meta.len.div_ceil(meta.segment.max(1)) as u64;
            segs += k;
            bytes += (meta.len as u64).saturating_sub(32 * k);
        }
        self.at = end.next_multiple_of(64);
        Ok((segs, bytes))
    }
}

/// [`sink`] into a [`RingSink`] of `len` bytes.
fn sink_ring(sock: &UdpSocket, len: usize, stop: &AtomicBool) -> io::Result<RxOut> {
    let mut ring = RingSink::new(len, sock.gro());
    let cpu0 = thread_cpu();
    let (mut received, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let (n, b) = ring.recv(sock)?;
        if n == 0 {
            sock.wait_readable(Some(Duration::from_millis(5)))?;
            continue;
        }
        received += n;
        bytes += b;
    }
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (0, 0),
    })
}

/// HSB's Linux receiver loop, as `linux_receiver.cpp` does it.
fn recv1(sock: &std::net::UdpSocket, cfg: &StreamConfig, stop: &AtomicBool) -> io::Result<RxOut> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let page = cfg.frame.next_multiple_of(128) + 128;
    let mut frames_buf = [vec![0xFFu8; page], vec![0xFFu8; page]];
    let mut cur = 0;
    let mut buf = vec![0u8; 10_240];
    let cpu0 = thread_cpu();
    let (mut received, mut bytes, mut last_psn, mut dropped, mut frames) =
        (0u64, 0u64, None::<u32>, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ts = std::time::SystemTime::now(); // per-packet clock read
        received += 1;
        if n < 12 + 16 + 4 {
            continue;
        }
        let opcode = buf[0];
        let psn = u32::from_be_bytes([0, buf[9], buf[10], buf[11]]);
        if let Some(l) = last_psn {
            dropped += u64::from(psn.wrapping_sub(l.wrapping_add(1)) & 0xFF_FFFF);
        }
        last_psn = Some(psn);
        let va = u64::from_be_bytes(buf[12..20].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(buf[24..28].try_into().unwrap_or_default()) as usize;
        let (hdr, len) = match opcode {
            0x2A => (28, len),
            0x2B => (32, len.saturating_sub(128)),
            _ => continue,
        };
        if hdr + len > n - 4 {
            continue;
        }
        let off = (va % page as u64) as usize;
        if off + len <= page {
            frames_buf[cur][off..off + len].copy_from_slice(&buf[hdr..hdr + len]);
            bytes += len as u64;
        }
        if opcode == 0x2B {
            frames += 1;
            cur ^= 1;
            frames_buf[cur].fill(0xFF); // lost data shows as white, as HSB does
        }
    }
    let _ = dropped;
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (frames, 0),
    })
}

/// Bytes of the ring rocelink's receiver lands the stream in.
fn ring_len(cfg: &StreamConfig) -> usize {
    let mut rc = ReceiverConfig::new(
        SocketAddr::new(IpAddr::V4(cfg.host), 0),
        cfg.device,
        cfg.frame,
    );
    rc.pages = PAGES;
    Receiver::ring_len(&rc)
}

fn rocelink_rx(
    cfg: &StreamConfig,
    fast_path: bool,
    xdp: bool,
    port_tx: std::sync::mpsc::Sender<u16>,
    stop: &AtomicBool,
) -> io::Result<RxOut> {
    let port = if xdp { rocelink_wire::ROCE_V2_PORT } else { 0 };
    let mut rc = ReceiverConfig::new(
        SocketAddr::new(IpAddr::V4(cfg.host), port),
        cfg.device,
        cfg.frame,
    );
    if xdp {
        let Some(v) = &cfg.veth else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the xdp receiver runs over a veth link (the xdp backend)",
            ));
        };
        let mut xc = rocelink_runtime::xdp::XdpPortConfig::new(
            &v.if_b,
            cfg.host,
            rocelink_runtime::xdp::XdpRole::Host,
        );
        xc.rx_coalesce = cfg.coalesce;
        rc.xdp = Some(rocelink_runtime::xdp::XdpPort::open(&xc)?);
    }
    rc.pages = PAGES;
    rc.qp_rkey = Some((QP, RKEY));
    // the sender cycles through the same pre-built frames (same PSNs): a replay by design
    rc.reject_stale = false;
    rc.recv_buffer = cfg.rcvbuf;
    rc.gro = cfg.gro;
    rc.fast_path = fast_path;
    rc.batch = cfg.batch;
    rc.busy_poll = cfg.busy_poll;
    rc.rx_coalesce = cfg.coalesce;
    let mut rx = Receiver::new(rc)?;
    let _ = port_tx.send(rx.local_addr().port());
    let cpu0 = thread_cpu();
    while !stop.load(Ordering::Relaxed) {
        let _ = rx.next_frame(Duration::from_millis(50))?;
    }
    Ok(RxOut {
        received: rx.stats.datagrams,
        bytes: rx.stats.bytes,
        cpu: thread_cpu() - cpu0,
        frames: (rx.stats.good, rx.stats.damaged),
    })
}

/// The device's socket over loopback: port 12288 (HSB's data source port) on the
/// configured device address, or on the next free one of its /24 when another run holds
/// it. Returns the socket and the address it took.
fn bind_device(cfg: &StreamConfig) -> io::Result<(UdpSocket, Ipv4Addr)> {
    let [a, b, c, first] = cfg.device.octets();
    for last in first..=254 {
        let ip = Ipv4Addr::new(a, b, c, last);
        if ip == cfg.host {
            continue;
        }
        let at = SocketAddr::new(IpAddr::V4(ip), rocelink_wire::hsb::DATA_SOURCE_PORT);
        match UdpSocket::bind(at, &UdpConfig::default()) {
            Ok(sock) => return Ok((sock, ip)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("bind {at}: {e}"))),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "port {} is taken on every address from {} to {a}.{b}.{c}.254",
            rocelink_wire::hsb::DATA_SOURCE_PORT,
            cfg.device
        ),
    ))
}

fn run_one(cfg: &StreamConfig, name: &'static str) -> io::Result<StreamResult> {
    if cfg.stop.load(Ordering::Relaxed) {
        return Err(interrupted());
    }
    // over loopback the device's socket is bound first, so the receiver expects the
    // address it got (a veth run binds it in the device's namespace)
    let (dev_sock, cfg) = match cfg.veth {
        None => {
            let (sock, device) = bind_device(cfg)?;
            (
                Some(sock),
                &StreamConfig {
                    device,
                    ..cfg.clone()
                },
            )
        }
        Some(_) => (None, cfg),
    };
    let stop_rx = Arc::new(AtomicBool::new(false));
    let stop_tx = Arc::new(AtomicBool::new(false));
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let c = cfg.clone();
    let s = stop_rx.clone();
    let rx = std::thread::spawn(move || -> io::Result<RxOut> {
        if c.pin {
            let _ = pin_current_thread(c.cpus.1);
        }
        if let Some(v) = &c.veth {
            rocelink_io::net::enter_netns(&v.ns_b)?;
        }
        match name {
            "sink" | "sink-ring" => {
                let sock = UdpSocket::bind(
                    SocketAddr::new(IpAddr::V4(c.host), 0),
                    &UdpConfig {
                        recv_buffer: c.rcvbuf,
                        gro: c.gro,
                        ..UdpConfig::default()
                    },
                )?;
                let _ = port_tx.send(sock.local_addr().port());
                if name == "sink" {
                    sink(&sock, &s)
                } else {
                    sink_ring(&sock, ring_len(&c), &s)
                }
            }
            "recv1" => {
                // as HSB's linux_receiver: SO_RCVBUF = frame size rounded up to 64 KiB
                let sock = UdpSocket::bind(
                    SocketAddr::new(IpAddr::V4(c.host), 0),
                    &UdpConfig {
                        recv_buffer: c.frame.next_multiple_of(64 << 10),
                        ..UdpConfig::default()
                    },
                )?
                .into_std()?;
                let _ = port_tx.send(sock.local_addr()?.port());
                recv1(&sock, &c, &s)
            }
            "generic" => rocelink_rx(&c, false, false, port_tx, &s),
            "xdp" => rocelink_rx(&c, false, true, port_tx, &s),
            _ => rocelink_rx(&c, true, false, port_tx, &s),
        }
    });
    let port = match port_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(p) => p,
        Err(_) => {
            // it failed to start: say why
            stop_rx.store(true, Ordering::Relaxed);
            return Err(match rx.join() {
                Ok(Err(e)) => io::Error::new(e.kind(), format!("receiver {name}: {e}")),
                _ => io::Error::other(format!("receiver {name} did not start")),
            });
        }
    };
    let sent = Arc::new(AtomicU64::new(0));
    let (c, st, sn) = (cfg.clone(), stop_tx.clone(), sent.clone());
    let tx = std::thread::spawn(move || -> io::Result<()> {
        sn.store(sender(&c, port, &st, dev_sock)?, Ordering::Relaxed);
        Ok(())
    });
    let t0 = Instant::now();
    let irq0 = veth::irq_time();
    let end = t0 + Duration::from_secs_f64(cfg.seconds);
    while !cfg.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
    stop_tx.store(true, Ordering::Relaxed);
    tx.join()
        .map_err(|_| io::Error::other("sender panicked"))??;
    let wall = t0.elapsed();
    let irq = veth::irq_time().saturating_sub(irq0);
    std::thread::sleep(Duration::from_millis(200)); // drain
    stop_rx.store(true, Ordering::Relaxed);
    let out = rx
        .join()
        .map_err(|_| io::Error::other("receiver panicked"))??;
    if cfg.stop.load(Ordering::Relaxed) {
        return Err(interrupted());
    }
    let sent = sent.load(Ordering::Relaxed).max(1);
    let secs = wall.as_secs_f64();
    Ok(StreamResult {
        name,
        gbps: out.bytes as f64 * 8.0 / secs / 1e9,
        pps: out.received as f64 / secs,
        loss: 1.0 - (out.received as f64 / sent as f64).min(1.0),
        cpu_percent: out.cpu.total().as_secs_f64() / secs * 100.0,
        cpu_user_percent: out.cpu.user.as_secs_f64() / secs * 100.0,
        irq_percent: irq.as_secs_f64() / secs * 100.0,
        sent,
        received: out.received,
        frames: out.frames,
    })
}

/// The receivers [`stream`] runs by default, in order.
pub const RECEIVERS: [&str; 3] = ["sink", "recv1", "rocelink"];

/// Every receiver: the default three, `generic` (rocelink's receiver with the fast path
/// off: every datagram through the generic transport endpoint) and `xdp` (over AF_XDP, on
/// a veth link).
pub const ALL_RECEIVERS: [&str; 6] = ["sink", "sink-ring", "recv1", "rocelink", "generic", "xdp"];

fn check(cfg: &StreamConfig) -> io::Result<()> {
    if cfg.payload == 0 || !cfg.payload.is_multiple_of(128) || cfg.payload > 8064 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "payload must be a multiple of 128 up to 8064",
        ));
    }
    if let Some(n) = cfg.receivers.iter().find(|n| !ALL_RECEIVERS.contains(n)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no receiver {n:?} (have: {})", ALL_RECEIVERS.join(", ")),
        ));
    }
    Ok(())
}

/// Run the configured receivers against the same sender, one after the other.
pub fn stream(cfg: &StreamConfig) -> io::Result<Vec<StreamResult>> {
    check(cfg)?;
    cfg.receivers.iter().map(|n| run_one(cfg, n)).collect()
}

/// [`stream`] `runs` times, the receivers alternating in each round (so the ratios of a
/// round compare runs minutes apart at most). Stopped ([`StreamConfig::stop`]) after a
/// round completed, it returns the rounds that did.
pub fn stream_rounds(cfg: &StreamConfig, runs: usize) -> io::Result<Vec<Vec<StreamResult>>> {
    let mut rounds = Vec::new();
    for _ in 0..runs.max(1) {
        match stream(cfg) {
            Ok(r) => rounds.push(r),
            Err(e) if e.kind() == io::ErrorKind::Interrupted && !rounds.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(rounds)
}

/// The error of a run that [`StreamConfig::stop`] ended.
fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "stopped")
}

/// Each receiver's medians over `rounds` (every figure the median of its own).
pub fn medians(rounds: &[Vec<StreamResult>]) -> Vec<StreamResult> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|f| {
            let all: Vec<&StreamResult> = rounds
                .iter()
                .filter_map(|r| r.iter().find(|x| x.name == f.name))
                .collect();
            let m = |g: fn(&StreamResult) -> f64| median(all.iter().map(|x| g(x)));
            let mu = |g: fn(&StreamResult) -> u64| median(all.iter().map(|x| g(x) as f64)) as u64;
            StreamResult {
                name: f.name,
                gbps: m(|x| x.gbps),
                pps: m(|x| x.pps),
                loss: m(|x| x.loss),
                cpu_percent: m(|x| x.cpu_percent),
                cpu_user_percent: m(|x| x.cpu_user_percent),
                irq_percent: m(|x| x.irq_percent),
                sent: mu(|x| x.sent),
                received: mu(|x| x.received),
                frames: (mu(|x| x.frames.0), mu(|x| x.frames.1)),
            }
        })
        .collect()
}

/// Figures over rounds (a ratio, usually): their median and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// [`median`] of them.
    pub median: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`.
    pub fn of(v: &[f64]) -> Spread {
        Spread {
            median: median(v.iter().copied()),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// As a ratio: `1.23x (1.10–1.40)`, the range left out after one round.
    pub fn show(&self, rounds: usize) -> String {
        if rounds > 1 {
            format!("{:.2}x ({:.2}–{:.2})", self.median, self.min, self.max)
        } else {
            format!("{:.2}x", self.median)
        }
    }
}

/// The median of `v` (of an even count the upper middle one; 0 when empty).
pub fn median(v: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.into_iter().collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The highest paced rate at which receiver `name` loses nothing (no datagram lost, no
/// frame damaged): a bisection of `steps` probes between 0 and `hi_gbps`, each probe
/// `cfg.seconds` long. Returns the rate and that probe's result (`None` if even the lowest
/// probe lost something).
pub fn no_loss_rate(
    cfg: &StreamConfig,
    name: &'static str,
    hi_gbps: f64,
    steps: usize,
) -> io::Result<Option<(f64, StreamResult)>> {
    check(cfg)?;
    if !ALL_RECEIVERS.contains(&name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no receiver {name:?}"),
        ));
    }
    let (mut lo, mut hi) = (0.0f64, hi_gbps.max(0.1));
    let mut best = None;
    for _ in 0..steps {
        let rate = (lo + hi) / 2.0;
        let r = run_one(
            &StreamConfig {
                rate_gbps: Some(rate),
                ..cfg.clone()
            },
            name,
        )?;
        if r.sent > 0 && r.received >= r.sent && r.frames.1 == 0 {
            lo = rate;
            best = Some((rate, r));
        } else {
            hi = rate;
        }
    }
    Ok(best)
}

/// The no-loss search of every configured receiver (see [`no_loss_rate`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NoLoss {
    /// The top of the bisection: 1.1× the best unpaced goodput.
    pub hi_gbps: f64,
    /// Probes per receiver.
    pub steps: usize,
    /// Per receiver, in the configured order: its no-loss rate and the result at that rate
    /// (`None`: it lost data at every probed rate).
    pub found: Vec<(&'static str, Option<(f64, StreamResult)>)>,
}

impl NoLoss {
    /// Goodput of `name` at its no-loss rate (0 when it has none or did not run).
    pub fn goodput(&self, name: &str) -> f64 {
        self.found
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, b)| b.as_ref().map(|(_, r)| r.gbps))
            .unwrap_or(0.0)
    }

    /// `a`'s no-loss goodput over `b`'s (0 when `b` has none).
    pub fn ratio(&self, a: &str, b: &str) -> f64 {
        let (x, y) = (self.goodput(a), self.goodput(b));
        if y > 0.0 { x / y } else { 0.0 }
    }
}

/// Search every configured receiver's no-loss rate, bisecting up to 1.1× the best goodput
/// of the unpaced run `unpaced`.
pub fn no_loss(cfg: &StreamConfig, unpaced: &[StreamResult], steps: usize) -> io::Result<NoLoss> {
    let hi_gbps = unpaced.iter().map(|x| x.gbps).fold(0.0, f64::max) * 1.1;
    let found = cfg
        .receivers
        .iter()
        .map(|&name| Ok((name, no_loss_rate(cfg, name, hi_gbps, steps)?)))
        .collect::<io::Result<_>>()?;
    Ok(NoLoss {
        hi_gbps,
        steps,
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receive until `want` segments came (at most 2 s).
    fn recv_n(ring: &mut RingSink, sock: &UdpSocket, want: u64) -> (u64, u64) {
        let give_up = Instant::now() + Duration::from_secs(2);
        let (mut n, mut b) = (0, 0);
        while n < want && Instant::now() < give_up {
            let (k, x) = ring.recv(sock).unwrap();
            if k == 0 {
                sock.wait_readable(Some(Duration::from_millis(10))).unwrap();
            }
            n += k;
            b += x;
        }
        (n, b)
    }

    fn result(name: &'static str, gbps: f64, cpu: f64, frames: u64) -> StreamResult {
        StreamResult {
            name,
            gbps,
            pps: 0.0,
            loss: 0.0,
            cpu_percent: cpu,
            cpu_user_percent: 0.0,
            irq_percent: 0.0,
            sent: 10,
            received: frames * 2,
            frames: (frames, 0),
        }
    }

    #[test]
    fn medians_are_per_receiver_and_per_figure() {
        let rounds = vec![
            vec![
                result("sink", 5.0, 30.0, 0),
                result("rocelink", 6.0, 40.0, 7),
            ],
            // a round may list them in another order
            vec![
                result("rocelink", 4.0, 50.0, 9),
                result("sink", 7.0, 20.0, 0),
            ],
            vec![
                result("sink", 6.0, 25.0, 0),
                result("rocelink", 5.0, 45.0, 8),
            ],
        ];
        let m = medians(&rounds);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].name, m[0].gbps, m[0].cpu_percent),
            ("sink", 6.0, 25.0)
        );
        assert_eq!(
            (
                m[1].name,
                m[1].gbps,
                m[1].cpu_percent,
                m[1].frames,
                m[1].received
            ),
            ("rocelink", 5.0, 45.0, (8, 0), 16)
        );
        assert_eq!(median([]), 0.0);
        assert_eq!(median([3.0, 1.0]), 3.0);
        assert!(medians(&[]).is_empty());
    }

    #[test]
    fn the_ring_sink_lands_each_datagram_in_its_slot_and_wraps() {
        let sock = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ring = RingSink::new(0, false);
        let dgrams: Vec<Vec<u8>> = [100usize, 200, 50]
            .iter()
            .enumerate()
            .map(|(i, &len)| (0..len).map(|b| (b * 7 + i * 31) as u8).collect())
            .collect();
        for d in &dgrams {
            tx.send_to(d, sock.local_addr()).unwrap();
        }
        let (n, bytes) = recv_n(&mut ring, &sock, 3);
        assert_eq!((n, bytes), (3, (100 - 32) + (200 - 32) + (50 - 32)));
        for (m, d) in dgrams.iter().enumerate() {
            assert_eq!(
                &ring.ring.as_ref()[m * 9_216..][..d.len()],
                &d[..],
                "datagram {m}"
            );
        }
        // the ring holds one receive's slots: the next receive starts over at 0
        let last = vec![0xEE; 64];
        tx.send_to(&last, sock.local_addr()).unwrap();
        assert_eq!(recv_n(&mut ring, &sock, 1), (1, 32));
        assert_eq!(&ring.ring.as_ref()[..64], &last[..]);
        assert_eq!(&ring.ring.as_ref()[9_216..][..200], &dgrams[1][..]);
    }
}
