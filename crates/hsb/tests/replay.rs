//! A replayed stream (valid ICRCs, old PSNs) is stale: never reported again, never a
//! 16-million-packet gap. And the ring's QPN and R_Key differ every session.
#![allow(clippy::unwrap_used)]

use rocelink_hsb::device::packetizer::{Packetizer, PacketizerOptions};
use rocelink_hsb::host::receiver::{FrameReport, Receiver, ReceiverConfig};
use rocelink_hsb::sensor::Sensor;
use rocelink_testkit::camera::Stream;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

const WINDOW: usize = 10_000;

/// The device's stream from `dev` aimed at `rx` on `host` (QP 0x99, R_Key 0x999, two
/// pages).
fn stream_to(rx: &Receiver, dev: Ipv4Addr, host: Ipv4Addr) -> Stream {
    let to = SocketAddrV4::new(host, rx.local_addr().port());
    Stream {
        qp_rkey: (0x99, 0x999),
        src_port: 12288,
        ..Stream::to(dev, to, rx.page_size() as u64, WINDOW)
    }
}

/// A passive receiver for QP 0x99 / R_Key 0x999, the packets of frames 0..n from a
/// packetizer aimed at it, and the device's data socket to send them from.
fn setup(dev: Ipv4Addr, n: u64) -> (Receiver, Vec<Vec<Vec<u8>>>, UdpSocket) {
    let host = Ipv4Addr::new(dev.octets()[0], dev.octets()[1], dev.octets()[2], 1);
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, WINDOW);
    rc.pages = 2;
    rc.qp_rkey = Some((0x99, 0x999));
    let rx = Receiver::new(rc).unwrap();
    // start near the top of the PSN space so the stream also wraps
    let frames = Stream {
        first_psn: 0xFF_FFF0,
        ..stream_to(&rx, dev, host)
    }
    .frames(n);
    let sock = UdpSocket::bind(SocketAddr::new(IpAddr::V4(dev), 12288)).unwrap();
    (rx, frames, sock)
}

fn deliver(rx: &mut Receiver, sock: &UdpSocket, pkts: &[&Vec<u8>]) -> Vec<FrameReport> {
    let mut got = Vec::new();
    for b in pkts {
        sock.send_to(b, rx.local_addr()).unwrap();
        // one frame at a time: the ring has two pages
        while let Some(f) = rx.next_frame(Duration::from_millis(2)).unwrap() {
            got.push(f);
        }
    }
    while let Some(f) = rx.next_frame(Duration::from_millis(200)).unwrap() {
        got.push(f);
    }
    got
}

#[test]
fn a_replayed_stream_is_stale_not_a_gap_and_frames_are_reported_once() {
    let dev = Ipv4Addr::new(127, 0, 48, 2);
    let (mut rx, frames, sock) = setup(dev, 8);
    // frames 0..5, then a replay of 0..3 (same bytes, valid ICRC, old PSNs), then 5..8
    let order: Vec<&Vec<u8>> = frames[0..5]
        .iter()
        .chain(&frames[0..3])
        .chain(&frames[5..8])
        .flatten()
        .collect();
    let got = deliver(&mut rx, &sock, &order);
    let numbers: Vec<u64> = got.iter().map(|f| f.frame_number).collect();
    assert_eq!(
        numbers,
        (0..8).collect::<Vec<_>>(),
        "each frame once: {got:#?}"
    );
    assert!(got.iter().all(|f| f.good()), "{got:#?}");
    assert_eq!(rx.stats.dropped_packets, 0, "a replay is not a gap");
    assert_eq!(rx.stats.stale_frames, 3);
    assert_eq!(rx.stats.good, 8);
}

#[test]
fn a_late_frame_never_reported_is_reported_damaged_once() {
    let dev = Ipv4Addr::new(127, 0, 49, 2);
    let (mut rx, frames, sock) = setup(dev, 4);
    // frame 1 arrives after frame 2 (its packets late), then frame 1 again
    let order: Vec<&Vec<u8>> = frames[0]
        .iter()
        .chain(&frames[2])
        .chain(&frames[1])
        .chain(&frames[1])
        .chain(&frames[3])
        .collect();
    let got = deliver(&mut rx, &sock, &order);
    let numbers: Vec<(u64, bool)> = got.iter().map(|f| (f.frame_number, f.good())).collect();
    assert_eq!(
        numbers,
        vec![(0, true), (2, false), (1, false), (3, true)],
        "frame 2 lacks frame 1's PSNs; late frame 1 damaged, once; {got:#?}"
    );
    assert_eq!(rx.stats.stale_frames, 1);
}

#[test]
fn qp_number_and_rkey_differ_every_session() {
    let dev = Ipv4Addr::new(127, 0, 50, 2);
    let keys: Vec<(u32, u32)> = (0..4)
        .map(|_| {
            let rc = ReceiverConfig::new("127.0.50.1:0".parse().unwrap(), dev, WINDOW);
            let rx = Receiver::new(rc).unwrap();
            (rx.qpn(), rx.rkey())
        })
        .collect();
    for (i, k) in keys.iter().enumerate() {
        assert_ne!(*k, (0x11, 0x19e), "the fixed numbers of every session");
        assert!(k.0 > 1 && k.0 < 0xFF_FFFF && k.1 != 0);
        assert!(!keys[..i].contains(k), "{keys:x?}");
    }
}

#[test]
fn a_device_that_restarts_behind_is_followed_not_refused() {
    let dev = Ipv4Addr::new(127, 0, 51, 2);
    let (mut rx, _, sock) = setup(dev, 0);
    let stream = stream_to(&rx, dev, Ipv4Addr::new(127, 0, 51, 1)).vp();
    // the device streams from PSN 0x500000, then restarts at PSN 0x400000 ("behind"),
    // frame numbers from 0 again, its clock going on
    let mut buf = Vec::new();
    let mut pkts = Vec::new();
    for (psn, t0) in [(0x50_0000, 100u64), (0x40_0000, 200)] {
        let mut p = Packetizer::new(stream, dev, psn, PacketizerOptions::default());
        for k in 0..3u64 {
            Sensor::Pattern.frame(k, WINDOW, &mut buf);
            p.push(&buf, Some(0), (t0 + k, 0), &mut pkts);
        }
    }
    let order: Vec<&Vec<u8>> = pkts.iter().collect();
    let got = deliver(&mut rx, &sock, &order);
    assert_eq!(got.len(), 6, "{got:#?}");
    assert!(got.iter().all(|f| f.good()), "{got:#?}");
    assert_eq!(rx.stats.stale_frames, 0);
}
