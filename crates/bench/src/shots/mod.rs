//! `rocelink bench shots`: ultrasound shots at a trigger frequency, over RoCE v2 UD SEND
//! (the probe and host of `rocelink_ultrasound`, in two threads over loopback) and over
//! plain UDP (the same shots, generated the same way, in datagrams of a 8-byte header and
//! the same payload, placed into a shot buffer by a `recvmmsg`/GRO receiver), in one run.
//!
//! Per point: frame rate (complete shots per second), bandwidth (their bytes), the triggers
//! the sender missed because it was still sending, and the shots that arrived incomplete —
//! the paper's Fig. 5 and 6 and its Table I.

pub mod rounds;

use crate::BenchError;
use rocelink_io::backend::{Outgoing, Transmitter};
use rocelink_io::cpu::{pin_current_thread, thread_cpu_time};
use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use rocelink_runtime::{Driver, RunOpts, roce_config};
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_ultrasound::run::{self, TriggerTarget, Triggering};
use rocelink_ultrasound::shot::{Echoes, ShotWork};
use rocelink_ultrasound::{GateConfig, Geometry, Host, Probe, ProbeConfig, ShotHostConfig};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Which way the shots travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// RoCE v2 UD SEND with immediate, shots landing contiguous.
    Roce,
    /// Plain UDP datagrams.
    Udp,
}

impl Proto {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Roce => "RoCE UD",
            Proto::Udp => "UDP",
        }
    }
}

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// How.
    pub proto: Proto,
    /// Shot shape.
    pub geometry: Geometry,
    /// Trigger frequency, Hz.
    pub trigger_hz: f64,
    /// Seconds measured.
    pub seconds: f64,
    /// Triggers.
    pub triggers: u64,
    /// Triggers missed by the sender (still sending).
    pub missed: u64,
    /// Complete shots received.
    pub complete: u64,
    /// Shots that arrived incomplete.
    pub incomplete: u64,
    /// What the two ends spent: the receiver's CPU and bytes over its whole receive, and the
    /// sender's share of a CPU while it ran.
    pub cost: Cost,
}

/// What one point's ends spent.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cost {
    /// The receiving thread's CPU seconds, from its start to its end.
    pub rx_cpu: f64,
    /// The bytes of every complete shot it received in that time.
    pub rx_bytes: u64,
    /// The sending thread's CPU time over its wall time (1.0: it never waited: the sender
    /// bounds the rate).
    pub tx_busy: f64,
}

impl Cost {
    /// The receiver's Gbit of complete shots per CPU-second.
    pub fn rx_gbit_per_cpu(&self) -> f64 {
        if self.rx_cpu > 0.0 {
            self.rx_bytes as f64 * 8.0 / 1e9 / self.rx_cpu
        } else {
            0.0
        }
    }
}

/// A thread's CPU time and wall time since it was made.
struct Busy(Duration, Instant);

impl Busy {
    fn start() -> Busy {
        Busy(thread_cpu_time(), Instant::now())
    }
    /// CPU seconds since the start.
    fn cpu(&self) -> f64 {
        (thread_cpu_time().saturating_sub(self.0)).as_secs_f64()
    }
    /// CPU time over wall time since the start.
    fn share(&self) -> f64 {
        self.cpu() / self.1.elapsed().as_secs_f64().max(1e-9)
    }
}

impl Point {
    /// A point from the sender's totals over a slightly longer run (scaled to the `secs`
    /// measured) and the receiver's counts.
    fn new(
        proto: Proto,
        geometry: Geometry,
        (hz, secs): (f64, f64),
        (triggers, missed): (u64, u64),
        (complete, incomplete): (u64, u64),
        cost: Cost,
    ) -> Point {
        let want = (hz * secs).round() as u64;
        let missed = if triggers == 0 {
            0
        } else {
            ((missed as f64 * want as f64 / triggers as f64).round() as u64).min(want)
        };
        Point {
            proto,
            geometry,
            trigger_hz: hz,
            seconds: secs,
            triggers: want,
            missed,
            complete,
            incomplete,
            cost,
        }
    }

    /// Complete shots per second.
    pub fn frame_rate(&self) -> f64 {
        self.complete as f64 / self.seconds
    }
    /// Gbit/s of complete shots.
    pub fn gbps(&self) -> f64 {
        self.complete as f64 * self.geometry.bytes() as f64 * 8.0 / self.seconds / 1e9
    }
}

/// Where the two ends run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ends {
    /// The probe's (sender's) loopback address.
    pub probe: IpAddr,
    /// The host's.
    pub host: IpAddr,
    /// Pin the sender to CPU 0 and the receiver to CPU 1.
    pub pin: bool,
    /// The RoCE host receives straight into its posted receives ([`ShotHostConfig::land`]).
    pub land: bool,
}

/// Shots of `g` over RoCE at `hz` for `secs`.
pub fn roce(g: Geometry, hz: f64, secs: f64, ends: Ends) -> crate::Result<Point> {
    let stop = AtomicBool::new(false);
    let sock = UdpSocket::bind(SocketAddr::new(ends.probe, 0), &UdpConfig::default())?;
    let paddr = sock.local_addr();
    let trig = std::net::UdpSocket::bind(SocketAddr::new(ends.probe, 0))?;
    let taddr = trig.local_addr()?;
    let mut pep = Endpoint::new(EndpointConfig::new(paddr));
    let mut probe =
        Probe::new(&mut pep, ProbeConfig::new(g)).map_err(|source| BenchError::Ultrasound {
            role: "probe",
            source,
        })?;
    let hsock = UdpSocket::bind(SocketAddr::new(ends.host, 0), &roce_config())?;
    let haddr = hsock.local_addr();
    let mut hep = Endpoint::new(EndpointConfig::new(haddr));
    let mut cfg = ShotHostConfig::new(g);
    cfg.land = ends.land;
    let mut host = Host::new(&mut hep, cfg).map_err(|source| BenchError::Ultrasound {
        role: "shots host",
        source,
    })?;
    std::thread::scope(|s| {
        let sender = s.spawn(|| run_probe(sock, (&mut pep, &mut probe), &trig, &ends, &stop));
        if ends.pin {
            let _ = pin_current_thread(1);
        }
        let mut drv = Driver::new(hsock);
        let t0 = Instant::now();
        let mut shots = Shots::new(t0, secs);
        let busy = Busy::start();
        let mut each = |r: &rocelink_ultrasound::ShotReport, b: Option<&[u8]>| shots.count(r, b);
        let run = run::host(
            &mut drv,
            &mut hep,
            &mut host,
            Triggering::Periodic {
                probe: taddr,
                millihertz: (hz * 1000.0).round() as u32,
                count: 0,
            },
            TriggerTarget {
                port: haddr.port(),
                qkey: cfg.qkey,
            },
            None,
            &mut each,
            RunOpts {
                stop: &AtomicBool::new(false),
                deadline: Some(t0 + Duration::from_secs_f64(secs + 0.2)),
                every: Duration::from_secs(3600),
            },
            &mut |_| {},
        );
        let rx_cpu = busy.cpu();
        stop.store(true, Ordering::Relaxed);
        let (p, tx_busy) = sender.join().map_err(|_| BenchError::Panicked("probe"))??;
        run?;
        let cost = Cost {
            rx_cpu,
            rx_bytes: shots.all * g.bytes() as u64,
            tx_busy,
        };
        Ok(Point::new(
            Proto::Roce,
            g,
            (hz, secs),
            (p.triggers, p.missed),
            (shots.complete, shots.incomplete),
            cost,
        ))
    })
}

/// The shots a host took: every complete one, and those from the first on for `secs`,
/// complete or not.
struct Shots {
    t0: Instant,
    secs: f64,
    first: Option<Instant>,
    all: u64,
    complete: u64,
    incomplete: u64,
}

impl Shots {
    fn new(t0: Instant, secs: f64) -> Shots {
        Shots {
            t0,
            secs,
            first: None,
            all: 0,
            complete: 0,
            incomplete: 0,
        }
    }

    /// Count shot `r` (`b`: its bytes, when it was delivered whole).
    fn count(&mut self, r: &rocelink_ultrasound::ShotReport, b: Option<&[u8]>) {
        let whole = r.complete && b.is_some();
        self.all += u64::from(whole);
        let at = r.last.unwrap_or(self.t0);
        let start = *self.first.get_or_insert(at);
        if at <= start + Duration::from_secs_f64(self.secs) {
            if whole {
                self.complete += 1;
            } else {
                self.incomplete += 1;
            }
        }
    }
}

/// The probe's side of [`roce`]: serve triggers from `ends.host` until `stop`; its
/// counters and the share of its thread's time it was busy.
fn run_probe(
    sock: UdpSocket,
    (pep, probe): (&mut Endpoint, &mut Probe),
    trig: &std::net::UdpSocket,
    ends: &Ends,
    stop: &AtomicBool,
) -> crate::Result<(rocelink_ultrasound::ProbeStats, f64)> {
    if ends.pin {
        let _ = pin_current_thread(0);
    }
    let mut drv = Driver::new(sock);
    let opts = RunOpts {
        stop,
        deadline: None,
        every: Duration::from_secs(3600),
    };
    let gate = GateConfig::allowing(ends.host);
    let busy = Busy::start();
    run::probe(&mut drv, pep, probe, trig, gate, opts, &mut |_| {})?;
    Ok((*probe.stats(), busy.share()))
}

/// Header of a plain-UDP shot datagram: shot number, message index (big-endian u32s).
const UDP_HEADER: usize = 8;

/// The same shots over plain UDP at `hz` for `secs`.
pub fn udp(g: Geometry, hz: f64, secs: f64, ends: Ends) -> crate::Result<Point> {
    // the receiving socket as the host's (the same design)
    let rx = UdpSocket::bind(SocketAddr::new(ends.host, 0), &roce_config())?;
    let dst = rx.local_addr();
    let tx = UdpSocket::bind(SocketAddr::new(ends.probe, 0), &UdpConfig::default())?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop_ref = &stop;
        let sender = s.spawn(move || -> crate::Result<((u64, u64), f64)> {
            if ends.pin {
                let _ = pin_current_thread(0);
            }
            let busy = Busy::start();
            let sent = send_udp(&tx, dst, g, hz, stop_ref)?;
            Ok((sent, busy.share()))
        });
        if ends.pin {
            let _ = pin_current_thread(1);
        }
        let busy = Busy::start();
        let got = recv_udp(&rx, g, secs);
        let rx_cpu = busy.cpu();
        stop.store(true, Ordering::Relaxed);
        let (sent, tx_busy) = sender
            .join()
            .map_err(|_| BenchError::Panicked("sender"))??;
        let got = got?;
        let cost = Cost {
            rx_cpu,
            rx_bytes: got.0 * g.bytes() as u64,
            tx_busy,
        };
        Ok(Point::new(Proto::Udp, g, (hz, secs), sent, got, cost))
    })
}

/// Periodic shots until `stop`; (triggers, missed).
fn send_udp(
    tx: &UdpSocket,
    dst: SocketAddr,
    g: Geometry,
    hz: f64,
    stop: &AtomicBool,
) -> crate::Result<(u64, u64)> {
    let echoes = Echoes::new(1);
    let mut work = ShotWork::default();
    let period = Duration::from_secs_f64(1.0 / hz);
    let m = g.messages();
    let mb = g.message_bytes as usize;
    let batch = 64usize;
    let mut bufs: Vec<Vec<u8>> = (0..batch).map(|_| vec![0u8; UDP_HEADER + mb]).collect();
    let mut t = Transmitter::new(true);
    let (mut triggers, mut missed, mut shot) = (0u64, 0u64, 0u64);
    let mut next = Instant::now();
    // the shot being sent and its next message
    let mut sending: Option<u32> = None;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while now >= next {
            triggers += 1;
            if sending.is_some() {
                missed += 1;
            } else {
                sending = Some(0);
            }
            next += period;
        }
        let Some(from) = sending else {
            let wait = next.saturating_duration_since(Instant::now());
            if wait > Duration::from_micros(100) {
                std::thread::sleep(wait - Duration::from_micros(60));
            } else {
                std::hint::spin_loop();
            }
            continue;
        };
        let n = (m - from).min(batch as u32);
        for (k, b) in bufs.iter_mut().enumerate().take(n as usize) {
            let i = from + k as u32;
            let r = g.message_range(i);
            b.truncate(UDP_HEADER + r.len());
            b[..4].copy_from_slice(&(shot as u32).to_be_bytes());
            b[4..8].copy_from_slice(&i.to_be_bytes());
            echoes.fill_with(&g, shot, r, &mut b[UDP_HEADER..], &mut work);
        }
        let out: Vec<Outgoing<'_>> = bufs[..n as usize]
            .iter()
            .map(|b| Outgoing::whole(dst, b))
            .collect();
        let mut sent = 0;
        while sent < out.len() {
            let k = t.send(tx, &out[sent..])?;
            if k == 0 {
                tx.wait_writable(Some(Duration::from_millis(1)))?;
            }
            sent += k;
        }
        for b in &mut bufs {
            b.resize(UDP_HEADER + mb, 0);
        }
        let to = from + n;
        sending = if to == m {
            shot += 1;
            None
        } else {
            Some(to)
        };
    }
    Ok((triggers, missed))
}

/// Receive for `secs` from the first datagram: shots placed into a ring of buffers by
/// message index; (complete, incomplete) — a shot still missing messages when one two
/// later arrives is incomplete.
fn recv_udp(rx: &UdpSocket, g: Geometry, secs: f64) -> crate::Result<(u64, u64)> {
    const RING: usize = 8;
    let m = g.messages();
    let stride = g.stride();
    let mut ring = vec![0u8; RING * stride];
    let mut count = [0u32; RING];
    let mut owner = [u64::MAX; RING];
    let mut batch = RecvBatch::new(64, if rx.gro() { 65_536 } else { 9_216 });
    let (mut complete, mut incomplete) = (0u64, 0u64);
    let mut end: Option<Instant> = None;
    let limit = Instant::now() + Duration::from_secs_f64(secs + 5.0);
    loop {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) || now >= limit {
            break;
        }
        let n = rx.recv_batch_wait(&mut batch, Duration::from_millis(10))?;
        if n == 0 {
            continue;
        }
        end.get_or_insert(now + Duration::from_secs_f64(secs));
        for (_, seg) in batch.segments() {
            if seg.len() < UDP_HEADER {
                continue;
            }
            let shot = u64::from(u32::from_be_bytes([seg[0], seg[1], seg[2], seg[3]]));
            let i = u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]);
            let body = &seg[UDP_HEADER..];
            if i >= m || body.len() != g.message_range(i).len() {
                continue;
            }
            let b = (shot % RING as u64) as usize;
            if owner[b] != shot {
                if owner[b] != u64::MAX && count[b] < m {
                    incomplete += 1;
                }
                owner[b] = shot;
                count[b] = 0;
            }
            let at = b * stride + i as usize * g.message_bytes as usize;
            ring[at..at + body.len()].copy_from_slice(body);
            count[b] += 1;
            if count[b] == m {
                complete += 1;
            }
        }
    }
    Ok((complete, incomplete))
}
