//! The host receiving shots straight into its posted receives (the kernel's scatter
//! receive, each payload verified where it landed) against the host copying every message
//! from a receive buffer: the same faulty stream of a real probe's packets — losses,
//! duplicates, swaps, corrupted payloads — sent over loopback to both must give the same
//! shot reports and the same bytes for every complete shot (and the right bytes), and the
//! landing path must really have been taken, and left, on the way.
#![allow(clippy::unwrap_used)]

use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_runtime::{Driver, LandingStats, RunOpts};
use rocelink_testkit::faults::{Fault, faulty, send_runs};
use rocelink_transport::sim::Rng;
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_ultrasound::run::{TriggerTarget, Triggering, host};
use rocelink_ultrasound::shot::Echoes;
use rocelink_ultrasound::{Geometry, Host, Probe, ProbeConfig, ShotHostConfig};
use rocelink_wire::ultrasound::{Command, TriggerRepr};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const SHOTS: u64 = 24;

/// A fault for every packet, the same for a seed.
fn schedule(n: usize, seed: u64) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| match rng.below(1000) {
            0..=1 => Fault::Drop,
            2..=3 => Fault::Duplicate,
            4..=5 => Fault::SwapWithNext,
            6..=8 => Fault::Corrupt,
            _ => Fault::None,
        })
        .collect()
}

/// The probe's packets for `SHOTS` shots to the host's QP at `host_addr`, sent from `from`.
fn probe_packets(
    g: Geometry,
    from: SocketAddr,
    host_addr: SocketAddr,
    qpn: u32,
    qkey: u32,
) -> Vec<Vec<u8>> {
    let mut ep = Endpoint::new(EndpointConfig::new(from));
    let mut probe = Probe::new(&mut ep, ProbeConfig::new(g)).unwrap();
    let mut now = Instant::now();
    let start = TriggerRepr {
        command: Command::Start {
            millihertz: 1_000_000,
            count: SHOTS,
        },
        number: 0,
        host_ns: 0,
        qpn,
        qkey,
        port: host_addr.port(),
        samples: 0,
        channels: 0,
        cookie: 0,
    };
    probe.handle_trigger(now, &start, host_addr.ip());
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..10_000 {
        probe.poll(&mut ep, now).unwrap();
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            out.push(buf[..t.len].to_vec());
        }
        now += Duration::from_micros(100);
    }
    out
}

fn send(sock: &UdpSocket, dst: SocketAddr, wire: &[Vec<u8>]) {
    send_runs(sock, dst, wire, Duration::from_micros(200));
}

/// What a host handed on: (shot, messages, missing, complete) and the bytes of each
/// complete shot. (Not how many messages were moved into place: that counts copies, and the
/// landing host re-posts its receives after each batch rather than after each datagram, so
/// its receives run in another order after a fault.)
type Seen = Vec<((u64, u32, u32, bool), Option<Vec<u8>>)>;

fn receive(g: Geometry, land: bool, gro: bool, seed: u64) -> (Seen, LandingStats) {
    let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let cfg = UdpConfig {
        gro,
        ..UdpConfig::default()
    };
    let hsock = UdpSocket::bind(SocketAddr::new(lo, 0), &cfg).unwrap();
    let haddr = hsock.local_addr();
    let psock = UdpSocket::bind(SocketAddr::new(lo, 0), &UdpConfig::default()).unwrap();
    let mut hep = Endpoint::new(EndpointConfig::new(haddr));
    let mut hc = ShotHostConfig::new(g);
    hc.land = land;
    let mut h = Host::new(&mut hep, hc).unwrap();
    let pkts = probe_packets(g, psock.local_addr(), haddr, h.qpn(), hc.qkey);
    assert!(pkts.len() as u64 >= SHOTS * u64::from(g.messages()));
    let wire = faulty(&pkts, &schedule(pkts.len(), seed));
    let mut drv = Driver::new(hsock);
    let mut seen: Seen = Vec::new();
    std::thread::scope(|s| {
        let wire = &wire;
        s.spawn(move || send(&psock, haddr, wire));
        let stop = AtomicBool::new(false);
        host(
            &mut drv,
            &mut hep,
            &mut h,
            Triggering::None,
            TriggerTarget {
                port: haddr.port(),
                qkey: hc.qkey,
            },
            Some(SHOTS),
            &mut |r, b| {
                seen.push((
                    (r.shot, r.messages, r.missing, r.complete),
                    b.map(<[u8]>::to_vec),
                ))
            },
            RunOpts {
                stop: &stop,
                deadline: Some(Instant::now() + Duration::from_secs(5)),
                every: Duration::from_secs(60),
            },
            &mut |_| {},
        )
        .unwrap();
    });
    (seen, drv.landing_stats())
}

fn same_as_copying(gro: bool) {
    let g = Geometry::new(1000, 96); // 36 messages, the last one short
    let echoes = Echoes::new(1);
    let mut took = LandingStats::default();
    for seed in [7, 8, 9] {
        let (copied, none) = receive(g, false, gro, seed);
        let (landed, stats) = receive(g, true, gro, seed);
        assert_eq!(
            none,
            LandingStats::default(),
            "the copying host landed nothing"
        );
        assert_eq!(landed.len(), copied.len(), "seed {seed}");
        for (a, b) in landed.iter().zip(&copied) {
            assert_eq!(a.0, b.0, "seed {seed}: the reports differ");
            assert_eq!(a.1, b.1, "seed {seed}: shot {} differs", a.0.0);
            if let Some(bytes) = &a.1 {
                assert_eq!(
                    echoes.first_difference(&g, a.0.0, bytes),
                    None,
                    "seed {seed}"
                );
            }
        }
        // some shots came through whole, some did not
        assert!(
            landed.iter().any(|s| s.1.is_some()),
            "seed {seed}: {landed:?}"
        );
        assert!(
            landed.iter().any(|s| !s.0.3),
            "seed {seed}: no fault showed"
        );
        took += stats;
    }
    // the landing path was taken, and left (a corrupted payload refused where it landed,
    // a message that did not fit its slot gathered or one in another's place moved)
    assert!(took.in_place > 100, "{took:?}");
    assert!(took.refused > 0, "{took:?}");
    assert!(took.gathered + took.moved > 0, "{took:?}");
}

#[test]
fn landing_matches_copying_with_gro() {
    same_as_copying(true);
}

#[test]
fn landing_matches_copying_without_gro() {
    same_as_copying(false);
}
