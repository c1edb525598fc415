//! The receiver's fast path (payloads copied by the kernel straight into the ring) against
//! the generic endpoint path: the same faulty stream — losses, duplicates, swaps, corrupted
//! payloads — sent to both must give the same frame reports and the same bytes for every
//! good frame, and the fast path must really have been taken (and left) on the way.

#![allow(clippy::unwrap_used)]

use rocelink_hsb::host::FastStats;
use rocelink_hsb::host::receiver::{FrameReport, Receiver, ReceiverConfig};
use rocelink_hsb::sensor::Sensor;
use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_testkit::camera::Stream;
use rocelink_testkit::faults::{Fault, faulty, send_runs};
use rocelink_transport::sim::Rng;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

const WINDOW: usize = 20_000;
const FRAMES: u64 = 16;

fn receiver(dev: Ipv4Addr, host: Ipv4Addr, fast: bool, gro: bool) -> Receiver {
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, WINDOW);
    rc.pages = 3;
    rc.qp_rkey = Some((0x42, 0x4242));
    rc.fast_path = fast;
    rc.gro = gro;
    rc.batch = 16;
    Receiver::new(rc).unwrap()
}

fn packets(dev: Ipv4Addr, host: Ipv4Addr, port: u16, page: u64) -> Vec<Vec<u8>> {
    packets_of(dev, host, port, page, 1408)
}

fn packets_of(dev: Ipv4Addr, host: Ipv4Addr, port: u16, page: u64, payload: usize) -> Vec<Vec<u8>> {
    let to = SocketAddrV4::new(host, port);
    Stream {
        pages: 3,
        payload,
        ..Stream::to(dev, to, page, WINDOW)
    }
    .packets(FRAMES)
}

fn send(sock: &UdpSocket, dst: SocketAddr, wire: &[Vec<u8>]) {
    send_runs(sock, dst, wire, Duration::from_micros(300));
}

fn collect(rx: &mut Receiver) -> Vec<(FrameReport, Option<Vec<u8>>)> {
    let mut got = Vec::new();
    while let Some(f) = rx.next_frame(Duration::from_millis(300)).unwrap() {
        let data = f.good().then(|| rx.frame_data(&f).to_vec());
        got.push((f, data));
    }
    got
}

fn compare(seed: u64, gro: bool, net: u8) -> FastStats {
    let dev = Ipv4Addr::new(127, 0, net, 2);
    let host = Ipv4Addr::new(127, 0, net, 1);
    let mut fast = receiver(dev, host, true, gro);
    let mut generic = receiver(dev, host, false, gro);
    let page = fast.page_size() as u64;
    let a = packets(dev, host, fast.local_addr().port(), page);
    let b = packets(dev, host, generic.local_addr().port(), page);
    // the transport simulator's seeded generator: a fixed fault schedule per seed
    let mut rng = Rng::new(seed);
    let faults: Vec<Fault> = (0..a.len())
        .map(|i| {
            if i < 20 {
                return Fault::None; // let the first frame teach the packet size
            }
            match rng.below(100) {
                0..=1 => Fault::Drop,
                2..=3 => Fault::Duplicate,
                4..=5 => Fault::SwapWithNext,
                6..=7 => Fault::Corrupt,
                _ => Fault::None,
            }
        })
        .collect();
    if std::env::var_os("ROCELINK_FAST_DEBUG").is_some() {
        for (i, f) in faults.iter().enumerate() {
            if *f != Fault::None {
                eprintln!("packet {i} (len {}): {f:?}", a[i].len());
            }
        }
    }
    let sock = UdpSocket::bind(
        SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT),
        &UdpConfig::default(),
    )
    .unwrap();
    send(&sock, fast.local_addr(), &faulty(&a, &faults));
    send(&sock, generic.local_addr(), &faulty(&b, &faults));
    let got_fast = collect(&mut fast);
    let got_generic = collect(&mut generic);
    assert!(got_generic.len() >= 8, "{got_generic:#?}");
    assert_eq!(got_fast.len(), got_generic.len());
    for (f, g) in got_fast.iter().zip(&got_generic) {
        // a damaged frame's CRC is informative only: the bytes of a lost packet's place are
        // unspecified (old data on one path, the rejected packet's bytes on the other)
        let (mut fr, mut gr) = (f.0.clone(), g.0.clone());
        if !fr.good() && !gr.good() {
            (fr.crc, gr.crc) = (0, 0);
        }
        assert_eq!(fr, gr, "same report (seed {seed})");
        assert!(
            f.1 == g.1,
            "same bytes for good frame {} (seed {seed})",
            f.0.frame_number
        );
    }
    // good frames are the pattern the device sent
    let mut frame = Vec::new();
    let mut goods = 0;
    for (r, data) in &got_fast {
        if let Some(d) = data {
            Sensor::Pattern.frame(r.frame_number, WINDOW, &mut frame);
            assert!(d == &frame, "frame {} bytes", r.frame_number);
            goods += 1;
        }
    }
    assert!(goods > 0, "some frames survive the faults");
    let fs = fast.fast_stats().unwrap();
    assert!(
        fs.in_place > 16,
        "more than a frame landed in place: {fs:?}"
    );
    assert!(fs.gathered > 0, "{fs:?}");
    assert_eq!(fast.stats.in_place, fs.in_place + fs.moved);
    assert!(generic.fast_stats().is_none());
    assert_eq!(generic.stats.in_place, 0);
    // every datagram went through the QP on both paths: the same transport counters (PSN
    // gaps, duplicates, ICRC errors, bytes …)
    assert_eq!(
        fast.transport_stats(),
        generic.transport_stats(),
        "seed {seed}"
    );
    fs
}

#[test]
fn fast_path_matches_the_generic_endpoint_with_gro() {
    let mut moved = 0;
    for (k, seed) in [1u64, 7, 12345].into_iter().enumerate() {
        moved += compare(seed, true, 60 + k as u8).moved;
    }
    // a loss shifts the rest of a GRO message: verified where it landed, then moved
    assert!(moved > 0);
}

/// More schedules on demand: `ROCELINK_FAST_SEEDS=200 cargo test -p rocelink-hsb --test
/// fast_path many_schedules`.
#[test]
fn many_schedules() {
    let n: u64 = std::env::var("ROCELINK_FAST_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let from: u64 = std::env::var("ROCELINK_FAST_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    for seed in from..from + n {
        compare(seed, seed % 2 == 0, 90 + (seed % 2) as u8);
    }
}

#[test]
fn fast_path_matches_the_generic_endpoint_without_gro() {
    let mut moved = 0;
    for (k, seed) in [3u64, 99].into_iter().enumerate() {
        moved += compare(seed, false, 70 + k as u8).moved;
    }
    assert!(moved > 0);
}

#[test]
fn a_clean_stream_lands_entirely_in_place() {
    let dev = Ipv4Addr::new(127, 0, 80, 2);
    let host = Ipv4Addr::new(127, 0, 80, 1);
    let mut rx = receiver(dev, host, true, true);
    let pk = packets(dev, host, rx.local_addr().port(), rx.page_size() as u64);
    let sock = UdpSocket::bind(
        SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT),
        &UdpConfig::default(),
    )
    .unwrap();
    send(&sock, rx.local_addr(), &pk);
    let got = collect(&mut rx);
    assert_eq!(got.len() as u64, FRAMES);
    assert!(got.iter().all(|(r, _)| r.good()));
    let fs = rx.fast_stats().unwrap();
    // the first message (one GSO run) teaches the stream's packet size; the rest is
    // predicted
    assert!(fs.gathered <= 8, "{fs:?}");
    assert_eq!(fs.in_place + fs.gathered, pk.len() as u64);
}

#[test]
fn jumbo_packets_past_4096_bytes_are_received() {
    // an HSB device on a 9000-byte link sends 8064-byte payloads (63 pages)
    let dev = Ipv4Addr::new(127, 0, 81, 2);
    let host = Ipv4Addr::new(127, 0, 81, 1);
    let mut rx = receiver(dev, host, true, true);
    let pk = packets_of(
        dev,
        host,
        rx.local_addr().port(),
        rx.page_size() as u64,
        8064,
    );
    assert!(pk.iter().any(|p| p.len() > 8000));
    let sock = UdpSocket::bind(
        SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT),
        &UdpConfig::default(),
    )
    .unwrap();
    send(&sock, rx.local_addr(), &pk);
    let got = collect(&mut rx);
    assert_eq!(got.len() as u64, FRAMES);
    let mut frame = Vec::new();
    for (r, data) in &got {
        assert!(r.good(), "{r:?}");
        Sensor::Pattern.frame(r.frame_number, WINDOW, &mut frame);
        assert!(data.as_deref() == Some(&frame[..]));
    }
    assert!(rx.fast_stats().unwrap().in_place > 0);
}

/// Packets that fit the fast path's slots but that the transport must refuse: a wrong R_Key,
/// another QP, a bad ICRC (all landing in place, then refused), an address past the ring
/// (slow path, refused there), and a replay of an older frame's packet into the same page
/// (accepted by UC, a duplicate PSN, caught by the frame CRC). Each is counted and its frame
/// reported damaged; the frames around them stay good.
#[test]
fn hostile_packets_in_predicted_slots_are_refused_and_their_frames_damaged() {
    let dev = Ipv4Addr::new(127, 0, 82, 2);
    let host = Ipv4Addr::new(127, 0, 82, 1);
    let mut rx = receiver(dev, host, true, true);
    let pk = packets(dev, host, rx.local_addr().port(), rx.page_size() as u64);
    let per_frame = pk.len() / FRAMES as usize;
    let at = |frame: usize| frame * per_frame + per_frame / 2;
    let src = SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT);
    let refill = |p: &mut Vec<u8>| {
        rocelink_wire::icrc::fill_socket(src, rx.local_addr(), p).unwrap();
    };
    let mut wire = pk.clone();
    wire[at(3)][20..24].copy_from_slice(&0x0BAD_0001u32.to_be_bytes()); // R_Key
    refill(&mut wire[at(3)]);
    wire[at(5)][5..8].copy_from_slice(&[0, 0x43, 0x21]); // QP
    refill(&mut wire[at(5)]);
    let n = wire[at(7)].len();
    wire[at(7)][n / 2] ^= 0x20; // payload, ICRC left as it was
    wire[at(9)][12..20].copy_from_slice(&(1u64 << 40).to_be_bytes()); // past the ring
    refill(&mut wire[at(9)]);
    wire[at(10)] = pk[at(1)].clone(); // frame 1's packet in frame 10's page (10 % 3 == 1)
    let damaged = [3u64, 5, 7, 9, 10];
    let sock = UdpSocket::bind(src, &UdpConfig::default()).unwrap();
    send(&sock, rx.local_addr(), &wire);
    let got = collect(&mut rx);
    assert_eq!(got.len() as u64, FRAMES);
    for (r, _) in &got {
        assert_eq!(
            r.good(),
            !damaged.contains(&r.frame_number),
            "frame {}: {r:?}",
            r.frame_number
        );
    }
    let fs = rx.fast_stats().unwrap();
    assert!(
        fs.refused >= 3,
        "R_Key, QP and ICRC refused in place: {fs:?}"
    );
    let (es, qs) = rx.transport_stats();
    assert_eq!(es.icrc_errors, 1);
    assert_eq!(es.unknown_qp, 1);
    assert_eq!(
        qs.access_violations, 2,
        "R_Key and the address past the ring"
    );
    assert!(qs.duplicates >= 1, "the replayed PSN: {qs:?}");
    assert_eq!(rx.stats.refused, 3);
    assert_eq!(rx.stats.damaged, damaged.len() as u64);
}

/// A frame lent to the application keeps its bytes while later frames arrive: the frames
/// the device sends into its page are refused (counted, never reported), and the frames
/// around them are not blamed for it.
#[test]
fn a_lent_frame_is_never_overwritten_on_either_path() {
    for (k, fast) in [true, false].into_iter().enumerate() {
        let dev = Ipv4Addr::new(127, 0, 87 + k as u8, 2);
        let host = Ipv4Addr::new(127, 0, 87 + k as u8, 1);
        let mut rx = receiver(dev, host, fast, true);
        let pk = packets(dev, host, rx.local_addr().port(), rx.page_size() as u64);
        let sock = UdpSocket::bind(
            SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT),
            &UdpConfig::default(),
        )
        .unwrap();
        send(&sock, rx.local_addr(), &pk);
        let first = rx.next_frame(Duration::from_millis(300)).unwrap().unwrap();
        assert!(first.good() && first.page == 0, "{first:?}");
        let lent = rx.lend(&first).unwrap();
        assert_eq!(rx.pages_lent(), 1);
        let mut want = Vec::new();
        Sensor::Pattern.frame(0, WINDOW, &mut want);
        let rest = collect(&mut rx);
        // 16 frames in 3 pages: 3, 6, 9, 12 and 15 went to the lent page
        let numbers: Vec<u64> = rest.iter().map(|(r, _)| r.frame_number).collect();
        let expect: Vec<u64> = (1..FRAMES).filter(|n| n % 3 != 0).collect();
        assert_eq!(numbers, expect, "fast {fast}");
        assert!(rest.iter().all(|(r, _)| r.good()), "fast {fast}: {rest:#?}");
        assert!(
            lent.data() == &want[..],
            "fast {fast}: the lent frame changed"
        );
        assert!(
            rx.stats.held_packets > 0 && rx.stats.damaged == 0,
            "{:?}",
            rx.stats
        );
        let (_, qp) = rx.transport_stats();
        // the receiver counts them at each frame end: the last lost frame after the last one
        assert_eq!(qp.access_violations, 0);
        assert_eq!(qp.held_refusals % 5, 0, "five whole frames refused");
        assert_eq!(rx.stats.held_packets, 4 * qp.held_refusals / 5, "{qp:?}");
        drop(lent);
        assert_eq!(rx.pages_lent(), 0);
    }
}
