//! One run: a receiver thread, the sender thread, the clock, the figures.

use super::receivers::{RxOut, recv1, ring_len, rocelink_rx, sink, sink_ring};
use super::sender::{bind_device, sender};
use super::{StreamConfig, StreamResult};
use crate::veth;
use rocelink_io::cpu::pin_current_thread;
use rocelink_io::udp::{UdpConfig, UdpSocket};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The receivers a stream is measured with (named as [`super::ALL_RECEIVERS`] lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receiver {
    /// `recvmmsg` and count: the baseline.
    Sink,
    /// The sink, each datagram copied to its place in a ring as large as rocelink's.
    SinkRing,
    /// HSB's Linux receiver: one `recv()` per packet.
    Recv1,
    /// rocelink's receiver with its fast path.
    Rocelink,
    /// rocelink's receiver, every datagram through the generic endpoint.
    Generic,
    /// rocelink's receiver over AF_XDP.
    Xdp,
}

impl Receiver {
    /// The receiver called `name`.
    pub fn named(name: &str) -> Option<Receiver> {
        Some(match name {
            "sink" => Receiver::Sink,
            "sink-ring" => Receiver::SinkRing,
            "recv1" => Receiver::Recv1,
            "rocelink" => Receiver::Rocelink,
            "generic" => Receiver::Generic,
            "xdp" => Receiver::Xdp,
            _ => return None,
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Receiver::Sink => "sink",
            Receiver::SinkRing => "sink-ring",
            Receiver::Recv1 => "recv1",
            Receiver::Rocelink => "rocelink",
            Receiver::Generic => "generic",
            Receiver::Xdp => "xdp",
        }
    }
}

/// A receiver running on its thread, at `port`.
struct Running {
    thread: JoinHandle<crate::Result<RxOut>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

/// Run `name` against the sender for `cfg.seconds`.
pub(super) fn run_one(cfg: &StreamConfig, name: &'static str) -> crate::Result<StreamResult> {
    if cfg.stop.is_stopped() {
        return Err(crate::BenchError::Stopped);
    }
    let which = Receiver::named(name)
        .ok_or_else(|| crate::BenchError::Setting(format!("no receiver {name:?}")))?;
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
    let rx = start_receiver(cfg, which)?;
    let sent = Arc::new(AtomicU64::new(0));
    let stop_tx = Arc::new(AtomicBool::new(false));
    let (c, st, sn, port) = (cfg.clone(), stop_tx.clone(), sent.clone(), rx.port);
    let tx = std::thread::spawn(move || -> crate::Result<()> {
        sn.store(sender(&c, port, &st, dev_sock)?, Ordering::Relaxed);
        Ok(())
    });
    let t0 = Instant::now();
    let irq0 = veth::irq_time();
    wait_out(cfg, t0 + Duration::from_secs_f64(cfg.seconds));
    stop_tx.store(true, Ordering::Relaxed);
    tx.join()
        .map_err(|_| crate::BenchError::Panicked("sender"))??;
    let wall = t0.elapsed();
    let irq = veth::irq_time().saturating_sub(irq0);
    std::thread::sleep(Duration::from_millis(200)); // drain
    rx.stop.store(true, Ordering::Relaxed);
    let out = rx
        .thread
        .join()
        .map_err(|_| crate::BenchError::Panicked("receiver"))??;
    if cfg.stop.is_stopped() {
        return Err(crate::BenchError::Stopped);
    }
    Ok(figures(name, &out, sent.load(Ordering::Relaxed), wall, irq))
}

/// Sleep until `end` or until the run is stopped.
fn wait_out(cfg: &StreamConfig, end: Instant) {
    while !cfg.stop.is_stopped() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// Start `which` on a thread of its own (pinned, in the host's namespace over veth) and
/// wait for the port it receives at; a receiver that fails to start says why.
fn start_receiver(cfg: &StreamConfig, which: Receiver) -> crate::Result<Running> {
    let stop = Arc::new(AtomicBool::new(false));
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let (c, s) = (cfg.clone(), stop.clone());
    let thread = std::thread::spawn(move || -> crate::Result<RxOut> {
        if c.pin {
            let _ = pin_current_thread(c.cpus.1);
        }
        if let Some(v) = &c.veth {
            rocelink_io::netns::enter(&v.ns_b)?;
        }
        receive(which, &c, port_tx, &s)
    });
    match port_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(port) => Ok(Running { thread, stop, port }),
        Err(_) => {
            stop.store(true, Ordering::Relaxed);
            let name = which.name();
            // its error, or none when it panicked or never said where it listens
            let source = match thread.join() {
                Ok(Err(e)) => Some(Box::new(e)),
                _ => None,
            };
            Err(crate::BenchError::Receiver {
                name: name.to_string(),
                source,
            })
        }
    }
}

/// Open `which`'s socket, say its port on `port_tx`, receive until `stop`.
fn receive(
    which: Receiver,
    c: &StreamConfig,
    port_tx: Sender<u16>,
    stop: &AtomicBool,
) -> crate::Result<RxOut> {
    let at = SocketAddr::new(IpAddr::V4(c.host), 0);
    match which {
        Receiver::Sink | Receiver::SinkRing => {
            let udp = UdpConfig {
                recv_buffer: c.rcvbuf,
                gro: c.gro,
                ..UdpConfig::default()
            };
            let sock = UdpSocket::bind(at, &udp)?;
            let _ = port_tx.send(sock.local_addr().port());
            match which {
                Receiver::Sink => sink(&sock, stop),
                _ => sink_ring(&sock, ring_len(c), stop),
            }
        }
        Receiver::Recv1 => {
            // as HSB's linux_receiver: SO_RCVBUF = frame size rounded up to 64 KiB
            let udp = UdpConfig {
                recv_buffer: c.frame.next_multiple_of(64 << 10),
                ..UdpConfig::default()
            };
            let sock = UdpSocket::bind(at, &udp)?.into_std()?;
            let _ = port_tx.send(sock.local_addr()?.port());
            recv1(&sock, c, stop)
        }
        Receiver::Generic => rocelink_rx(c, false, false, port_tx, stop),
        Receiver::Xdp => rocelink_rx(c, false, true, port_tx, stop),
        Receiver::Rocelink => rocelink_rx(c, true, false, port_tx, stop),
    }
}

/// What the receiver took over `wall` of sending `sent` datagrams, `irq` of it the
/// machine's interrupt time.
fn figures(
    name: &'static str,
    out: &RxOut,
    sent: u64,
    wall: Duration,
    irq: Duration,
) -> StreamResult {
    let sent = sent.max(1);
    let secs = wall.as_secs_f64();
    StreamResult {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_receiver_has_a_name_that_comes_back() {
        for n in super::super::ALL_RECEIVERS {
            assert_eq!(Receiver::named(n).map(Receiver::name), Some(n));
        }
        assert_eq!(Receiver::named("nope"), None);
    }
}
