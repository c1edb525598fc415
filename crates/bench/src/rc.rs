//! `rocelink bench write-bw` and `rocelink bench write-lat`: RC RDMA WRITE bandwidth and
//! ping-pong latency between two rocelink endpoints over loopback, each against a raw-UDP
//! baseline measured in the same run, reported in perftest's columns.
//!
//! * **write-bw** — a client keeps `tx_depth` RDMA WRITEs of `size` bytes in flight to the
//!   server's region (path MTU 4096), like `ib_write_bw`. Baseline: the UDP ceiling, one
//!   thread sending datagrams of the same size as the WRITE's middle packets
//!   (BTH + 4096 + ICRC) to a thread receiving them with `recvmmsg`, once with the socket
//!   features rocelink's driver uses (GSO runs of 15, `UDP_GRO`) — the ceiling the ratio is
//!   taken against — and once plain (`sendmmsg` of 64); goodput counts the 4096-byte
//!   payloads that arrived.
//! * **write-lat** — RDMA WRITE with immediate back and forth, each side answering when its
//!   receive completes (`ib_write_lat` polls memory instead; the immediate is rocelink's
//!   notification). Latency is half the round trip, as perftest reports it. Baseline: the
//!   same exchange with bare UDP datagrams of the same size on blocking sockets.
//!
//! Threads are pinned to CPUs 0 and 1 unless told otherwise.

use rocelink_io::net::{pin_current_thread, thread_cpu_time};
use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use rocelink_runtime::Driver;
use rocelink_transport::sim::connect;
use rocelink_transport::{
    Access, Endpoint, EndpointConfig, MrKeys, Mtu, QpInit, QpType, RecvWr, SendOp, SendWr, Sge,
    WcOpcode, WcStatus,
};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// BTH + ICRC around each MTU-sized payload of a WRITE MIDDLE packet.
const OVERHEAD: usize = 12 + 4;
const MTU: usize = 4096;

/// Settings of both benchmarks.
#[derive(Debug, Clone)]
pub struct RcConfig {
    /// Message size in bytes.
    pub size: usize,
    /// Messages.
    pub iters: usize,
    /// WRITEs in flight (bandwidth).
    pub tx_depth: usize,
    /// Pin the two threads to CPUs 0 and 1.
    pub pin: bool,
    /// Give up after this long.
    pub time_limit: Duration,
}

impl Default for RcConfig {
    fn default() -> Self {
        RcConfig {
            size: 65_536,
            iters: 5_000,
            tx_depth: 128,
            pin: true,
            time_limit: Duration::from_secs(60),
        }
    }
}

/// Bandwidth, perftest's columns plus the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct BwResult {
    /// Message size.
    pub bytes: usize,
    /// Messages completed.
    pub iters: usize,
    /// Highest rate over any 10 ms of completions, MB/s (10⁶ bytes).
    pub peak_mb_s: f64,
    /// Bytes / elapsed, MB/s.
    pub avg_mb_s: f64,
    /// Messages per second, millions.
    pub msg_rate_mpps: f64,
    /// Client (requester) and server (responder) thread CPU, percent of a core.
    pub cpu_percent: (f64, f64),
    /// The UDP ceiling with the socket features rocelink's driver uses (GSO send, GRO
    /// receive): payload MB/s that arrived.
    pub udp_mb_s: f64,
    /// Receiver CPU of that run.
    pub udp_cpu_percent: f64,
    /// The plain UDP ceiling (`sendmmsg` → `recvmmsg`, no offloads), payload MB/s.
    pub udp_plain_mb_s: f64,
    /// WRITEs retransmitted.
    pub retransmits: u64,
}

/// Latency in microseconds (half the round trip), perftest's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct LatStats {
    /// Samples.
    pub iters: usize,
    /// Smallest.
    pub t_min: f64,
    /// Largest.
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

impl LatStats {
    /// From one-way samples in µs.
    pub fn from_samples(mut s: Vec<f64>) -> LatStats {
        s.sort_by(f64::total_cmp);
        let n = s.len().max(1);
        let pct = |p: f64| {
            s.get(((n as f64 * p).ceil() as usize).clamp(1, n) - 1)
                .copied()
        };
        let avg = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        LatStats {
            iters: s.len(),
            t_min: s.first().copied().unwrap_or(0.0),
            t_max: s.last().copied().unwrap_or(0.0),
            t_typical: pct(0.5).unwrap_or(0.0),
            t_avg: avg,
            t_stdev: var.sqrt(),
            p99: pct(0.99).unwrap_or(0.0),
            p999: pct(0.999).unwrap_or(0.0),
        }
    }
}

/// Latency of RC and of the UDP baseline, with every RC sample (µs, one-way) for plots.
#[derive(Debug, Clone, PartialEq)]
pub struct LatResult {
    /// Message size.
    pub bytes: usize,
    /// RC WRITE-with-immediate ping-pong.
    pub rc: LatStats,
    /// Bare UDP ping-pong.
    pub udp: LatStats,
    /// The RC samples, in order.
    pub rc_samples: Vec<f64>,
    /// The UDP samples, in order.
    pub udp_samples: Vec<f64>,
}

struct Side {
    ep: Endpoint,
    drv: Driver,
    qpn: u32,
    local: MrKeys,
}

/// Two endpoints on loopback sockets with one RC QP each, connected, and a region of
/// `region` bytes on each side (remote-writable).
fn pair(region: usize) -> io::Result<(Side, Side)> {
    let mk = || -> io::Result<Side> {
        let sock = UdpSocket::bind(
            "127.0.0.1:0".parse().map_err(io::Error::other)?,
            &UdpConfig {
                recv_buffer: 16 << 20,
                send_buffer: 16 << 20,
                gro: true,
            },
        )?;
        let mut ep = Endpoint::new(EndpointConfig::new(sock.local_addr()));
        let local = ep.register_mr(
            vec![0u8; region.max(1)].into_boxed_slice(),
            0,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        );
        let qpn = ep
            .create_qp(QpInit {
                max_send_wr: 4096,
                max_recv_wr: 4096,
                ..QpInit::new(QpType::Rc)
            })
            .map_err(io::Error::other)?;
        Ok(Side {
            ep,
            drv: Driver::new(sock),
            qpn,
            local,
        })
    };
    let (mut a, mut b) = (mk()?, mk()?);
    connect(
        &mut a.ep,
        a.qpn,
        &mut b.ep,
        b.qpn,
        Mtu::M4096,
        0x1000,
        0x2000,
        0,
    )
    .map_err(io::Error::other)?;
    Ok((a, b))
}

fn check(cfg: &RcConfig) -> io::Result<()> {
    if cfg.size == 0 || cfg.size > 1 << 30 || cfg.iters == 0 || cfg.tx_depth == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "size must be in 1..=1 GiB, iterations and tx depth > 0",
        ));
    }
    Ok(())
}

/// RC WRITE bandwidth, then the UDP ceiling.
pub fn write_bw(cfg: &RcConfig) -> io::Result<BwResult> {
    check(cfg)?;
    let (mut c, mut s) = pair(cfg.size)?;
    c.ep.set_rc_window(c.qpn, 1024, 64)
        .map_err(io::Error::other)?;
    let rkey = s.local.rkey;
    // a pattern the server's region must hold at the end
    if let Ok(m) = c.ep.mr_mut(c.local.lkey) {
        for (i, b) in m.bytes_mut().iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let pin = cfg.pin;
    let server = std::thread::spawn(move || -> io::Result<(Duration, Side)> {
        if pin {
            let _ = pin_current_thread(1);
        }
        let cpu0 = thread_cpu_time();
        while !st.load(Ordering::Relaxed) {
            s.drv.run(
                &mut s.ep,
                Instant::now() + Duration::from_millis(20),
                |_| false,
            )?;
        }
        Ok((thread_cpu_time() - cpu0, s))
    });
    if cfg.pin {
        let _ = pin_current_thread(0);
    }
    let cpu0 = thread_cpu_time();
    let start = Instant::now();
    let limit = start + cfg.time_limit;
    let (mut posted, mut done) = (0usize, 0usize);
    let mut stamps = Vec::with_capacity(cfg.iters);
    let mut err = None;
    while done < cfg.iters && Instant::now() < limit {
        while posted < cfg.iters && posted - done < cfg.tx_depth {
            c.ep.post_send(
                c.qpn,
                SendWr {
                    wr_id: posted as u64,
                    op: SendOp::Write { va: 0, rkey },
                    sge: Sge {
                        lkey: c.local.lkey,
                        va: 0,
                        len: cfg.size as u32,
                    },
                    signaled: true,
                    solicited: false,
                    marks: 0,
                },
            )
            .map_err(io::Error::other)?;
            posted += 1;
        }
        c.drv
            .run(&mut c.ep, limit, |ep| ep.peek_completion().is_some())?;
        while let Some(wc) = c.ep.poll_completion() {
            if wc.status != WcStatus::Success {
                err = Some(format!("WRITE {} completed with {:?}", wc.wr_id, wc.status));
            }
            done += 1;
            stamps.push(Instant::now());
        }
        if let Some(e) = err.take() {
            stop.store(true, Ordering::Relaxed);
            return Err(io::Error::other(e));
        }
    }
    let elapsed = start.elapsed();
    let cpu_c = thread_cpu_time() - cpu0;
    stop.store(true, Ordering::Relaxed);
    let (cpu_s, s) = server
        .join()
        .map_err(|_| io::Error::other("server thread panicked"))??;
    let same = match (c.ep.mr(c.local.lkey), s.ep.mr(s.local.lkey)) {
        (Ok(a), Ok(b)) => a.bytes() == b.bytes(),
        _ => false,
    };
    if !same && done > 0 {
        return Err(io::Error::other(
            "the server's region does not hold what was written",
        ));
    }
    if done < cfg.iters {
        return Err(io::Error::other(format!(
            "only {done} of {} WRITEs completed in {:?}",
            cfg.iters, cfg.time_limit
        )));
    }
    let secs = elapsed.as_secs_f64();
    let bytes = (cfg.size * done) as f64;
    let retransmits = c.ep.qp_stats(c.qpn).map_or(0, |q| q.retransmissions);
    let dur = elapsed.max(Duration::from_secs(1));
    let (udp_mb_s, udp_cpu_percent) = udp_ceiling(cfg.pin, dur, true)?;
    let (udp_plain_mb_s, _) = udp_ceiling(cfg.pin, dur, false)?;
    Ok(BwResult {
        bytes: cfg.size,
        iters: done,
        peak_mb_s: peak(&stamps, start, cfg.size).max(bytes / secs / 1e6),
        avg_mb_s: bytes / secs / 1e6,
        msg_rate_mpps: done as f64 / secs / 1e6,
        cpu_percent: (
            cpu_c.as_secs_f64() / secs * 100.0,
            cpu_s.as_secs_f64() / secs * 100.0,
        ),
        udp_mb_s,
        udp_cpu_percent,
        udp_plain_mb_s,
        retransmits,
    })
}

/// Highest MB/s over any 10 ms window of completion times.
fn peak(stamps: &[Instant], start: Instant, size: usize) -> f64 {
    let w = Duration::from_millis(10);
    let mut best = 0.0f64;
    let mut lo = 0;
    for (hi, t) in stamps.iter().enumerate() {
        while *t - stamps[lo] > w {
            lo += 1;
        }
        let span = if lo == 0 {
            *t - start
        } else {
            *t - stamps[lo - 1]
        };
        if span >= w {
            best = best.max(((hi - lo + 1) * size) as f64 / span.as_secs_f64() / 1e6);
        }
    }
    best
}

/// (BTH + 4096 + ICRC)-byte datagrams for `dur`, sent with `sendmmsg` (64 per call) or,
/// with `offload`, as GSO super-datagrams of 15 to a `UDP_GRO` receiver (what rocelink's
/// driver does), against a `recvmmsg` receiver: payload MB/s that arrived, and the
/// receiver's CPU.
pub fn udp_ceiling(pin: bool, dur: Duration, offload: bool) -> io::Result<(f64, f64)> {
    let rx = UdpSocket::bind(
        "127.0.0.1:0".parse().map_err(io::Error::other)?,
        &UdpConfig {
            recv_buffer: 16 << 20,
            gro: offload,
            ..UdpConfig::default()
        },
    )?;
    let dst = rx.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    let (st, g) = (stop.clone(), got.clone());
    let recv = std::thread::spawn(move || -> io::Result<Duration> {
        if pin {
            let _ = pin_current_thread(1);
        }
        let cpu0 = thread_cpu_time();
        let mut batch = RecvBatch::new(64, if offload { 65_536 } else { 9216 });
        let mut n = 0u64;
        while !st.load(Ordering::Relaxed) {
            if rx.recv_batch(&mut batch)? == 0 {
                rx.wait_readable(Some(Duration::from_millis(5)))?;
                continue;
            }
            n += batch.segments().count() as u64;
            g.store(n, Ordering::Relaxed);
        }
        Ok(thread_cpu_time() - cpu0)
    });
    if pin {
        let _ = pin_current_thread(0);
    }
    let tx = UdpSocket::bind(
        "127.0.0.1:0".parse().map_err(io::Error::other)?,
        &UdpConfig {
            send_buffer: 16 << 20,
            ..UdpConfig::default()
        },
    )?;
    let pkt = vec![0x5Au8; OVERHEAD + MTU];
    let batch: Vec<(SocketAddr, &[u8])> = (0..64).map(|_| (dst, &pkt[..])).collect();
    let parts: Vec<std::io::IoSlice<'_>> = (0..15).map(|_| std::io::IoSlice::new(&pkt)).collect();
    let start = Instant::now();
    let got0 = got.load(Ordering::Relaxed);
    while start.elapsed() < dur {
        let n = if offload {
            tx.send_gso(dst, &parts, pkt.len() as u16)?
        } else {
            tx.send_batch(&batch)?
        };
        if n == 0 {
            tx.wait_writable(Some(Duration::from_millis(1)))?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(50));
    let n = got.load(Ordering::Relaxed) - got0;
    stop.store(true, Ordering::Relaxed);
    let cpu = recv
        .join()
        .map_err(|_| io::Error::other("receiver thread panicked"))??;
    Ok((
        (n as usize * MTU) as f64 / secs / 1e6,
        cpu.as_secs_f64() / secs * 100.0,
    ))
}

/// RC WRITE-with-immediate ping-pong, then the UDP ping-pong.
pub fn write_lat(cfg: &RcConfig) -> io::Result<LatResult> {
    check(cfg)?;
    let (mut c, mut s) = pair(cfg.size)?;
    let (c_rkey, s_rkey) = (c.local.rkey, s.local.rkey);
    let iters = cfg.iters;
    let pin = cfg.pin;
    let limit = Instant::now() + cfg.time_limit;
    let write = |side: &mut Side, rkey: u32, n: usize, size: usize| -> io::Result<()> {
        side.ep
            .post_recv(
                side.qpn,
                RecvWr::new(
                    n as u64,
                    Sge {
                        lkey: side.local.lkey,
                        va: 0,
                        len: 0,
                    },
                ),
            )
            .map_err(io::Error::other)?;
        side.ep
            .post_send(
                side.qpn,
                SendWr {
                    wr_id: n as u64,
                    op: SendOp::WriteImm {
                        va: 0,
                        rkey,
                        imm: n as u32,
                    },
                    sge: Sge {
                        lkey: side.local.lkey,
                        va: 0,
                        len: size as u32,
                    },
                    signaled: false,
                    solicited: false,
                    marks: 0,
                },
            )
            .map_err(io::Error::other)
    };
    // wait for the next WRITE with immediate to land; other completions are ignored
    fn arrived(side: &mut Side, limit: Instant) -> io::Result<bool> {
        loop {
            while let Some(wc) = side.ep.poll_completion() {
                if wc.opcode == WcOpcode::RecvRdmaWithImm {
                    if wc.status != WcStatus::Success {
                        return Err(io::Error::other(format!("receive {:?}", wc.status)));
                    }
                    return Ok(true);
                }
                if wc.status != WcStatus::Success {
                    return Err(io::Error::other(format!("send {:?}", wc.status)));
                }
            }
            if Instant::now() >= limit {
                return Ok(false);
            }
            side.drv
                .run(&mut side.ep, limit, |ep| ep.peek_completion().is_some())?;
        }
    }
    let size = cfg.size;
    let server = std::thread::spawn(move || -> io::Result<()> {
        if pin {
            let _ = pin_current_thread(1);
        }
        // the first receive is posted before the client's first WRITE can arrive
        s.ep.post_recv(
            s.qpn,
            RecvWr::new(
                0,
                Sge {
                    lkey: s.local.lkey,
                    va: 0,
                    len: 0,
                },
            ),
        )
        .map_err(io::Error::other)?;
        for n in 0..iters {
            if !arrived(&mut s, limit)? {
                return Err(io::Error::other("server: time limit"));
            }
            write(&mut s, c_rkey, n, size)?;
        }
        // let the last WRITE and ACKs go out
        s.drv.run(
            &mut s.ep,
            Instant::now() + Duration::from_millis(50),
            |_| false,
        )?;
        Ok(())
    });
    if pin {
        let _ = pin_current_thread(0);
    }
    let mut rc_samples = Vec::with_capacity(iters);
    for n in 0..iters {
        let t0 = Instant::now();
        write(&mut c, s_rkey, n, size)?;
        if !arrived(&mut c, limit)? {
            return Err(io::Error::other(format!(
                "client: no answer to exchange {n} within the time limit"
            )));
        }
        rc_samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    server
        .join()
        .map_err(|_| io::Error::other("server thread panicked"))??;
    let udp_samples = udp_pingpong(size + 12 + 16 + 4 + 4, iters, pin)?;
    Ok(LatResult {
        bytes: size,
        rc: LatStats::from_samples(rc_samples.clone()),
        udp: LatStats::from_samples(udp_samples.clone()),
        rc_samples,
        udp_samples,
    })
}

/// Bare UDP ping-pong of `len`-byte datagrams on blocking sockets: one-way µs samples.
pub fn udp_pingpong(len: usize, iters: usize, pin: bool) -> io::Result<Vec<f64>> {
    let len = len.min(65_000);
    let a = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let b = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let (aa, ba) = (a.local_addr()?, b.local_addr()?);
    a.set_read_timeout(Some(Duration::from_secs(1)))?;
    b.set_read_timeout(Some(Duration::from_secs(1)))?;
    let server = std::thread::spawn(move || -> io::Result<()> {
        if pin {
            let _ = pin_current_thread(1);
        }
        let mut buf = vec![0u8; 65_536];
        for _ in 0..iters {
            let n = b.recv(&mut buf)?;
            b.send_to(&buf[..n], aa)?;
        }
        Ok(())
    });
    if pin {
        let _ = pin_current_thread(0);
    }
    let msg = vec![0xA5u8; len];
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        a.send_to(&msg, ba)?;
        let n = a.recv(&mut buf)?;
        if n != len {
            return Err(io::Error::other("UDP ping-pong: short answer"));
        }
        out.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    server
        .join()
        .map_err(|_| io::Error::other("UDP server thread panicked"))??;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let s = LatStats::from_samples((1..=1000).map(f64::from).collect());
        assert_eq!(s.t_min, 1.0);
        assert_eq!(s.t_max, 1000.0);
        assert_eq!(s.t_typical, 500.0);
        assert_eq!(s.p99, 990.0);
        assert_eq!(s.p999, 999.0);
        assert!((s.t_avg - 500.5).abs() < 1e-9);
    }
}
