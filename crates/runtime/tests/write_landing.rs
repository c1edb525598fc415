//! RDMA WRITEs received straight into their region — the rest of each message where its
//! first packet said (`Plan::expect_write`), the first packet taken alone — against the
//! copying receive: the same faulty stream over loopback (UC: losses, duplicates, swaps,
//! corrupted payloads; RC: duplicates and corrupted copies between the real packets, as a
//! go-back-N sender's resends would follow them) must give the same message reports, the
//! sent bytes for every delivered message and no byte written outside the messages' own
//! ranges; and the landing path must have been taken, and left, on the way.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_runtime::{Driver, LandingStats, Plan, Predictor};
use rocelink_testkit::faults::{record_run, seeded};
use rocelink_transport::sim::connect;
use rocelink_transport::*;
use std::net::SocketAddr;
use std::time::Duration;

const MTU: usize = 1024;
/// FIRST, three MIDDLEs and a short LAST.
const MSG: usize = 4 * MTU + 300;
const MSGS: usize = 40;
/// Messages go to every other 8 KiB: a stray write shows between them.
const STRIDE: usize = 8192;
const REGION: usize = MSGS * STRIDE;
const KEY: u32 = 0x0042_4200;
const QB: u32 = 0x77;
const QA: u32 = 0x55;
const PSN_A: u32 = 0xFF_FFF0;

fn source() -> Vec<u8> {
    (0..MSGS * MSG).map(|i| (i * 13 + i / 509) as u8).collect()
}

/// An endpoint at `at` with the zeroed target region (key `KEY`, VA 0).
fn receiver(at: SocketAddr) -> Endpoint {
    let mut ep = Endpoint::new(EndpointConfig::new(at));
    ep.register_mr_keyed(
        vec![0u8; REGION].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        KEY,
    )
    .unwrap();
    ep
}

/// The sender's packets for `MSGS` WRITEs to a peer at `to`, sent from `from`: recorded
/// from a run against an in-memory twin of the receiver that answers every packet.
fn packets(t: QpType, from: SocketAddr, to: SocketAddr) -> Vec<Vec<u8>> {
    let mut a = Endpoint::new(EndpointConfig::new(from));
    let src = a.register_mr(source().into_boxed_slice(), 0, Access::LOCAL_WRITE);
    let qa = a.create_qp_numbered(QA, QpInit::new(t)).unwrap();
    let mut twin = receiver(to);
    let qb = twin.create_qp_numbered(QB, QpInit::new(t)).unwrap();
    connect(&mut a, qa, &mut twin, qb, Mtu::M1024, PSN_A, 0, 0).unwrap();
    for i in 0..MSGS {
        let op = SendOp::Write {
            va: (i * STRIDE) as u64,
            rkey: KEY,
        };
        let sge = Sge {
            lkey: src.lkey,
            va: (i * MSG) as u64,
            len: MSG as u32,
        };
        let wr = SendWr::new(i as u64, op, sge);
        a.post_send(qa, wr).unwrap();
    }
    let out = record_run(&mut a, from, &mut twin, to);
    assert_eq!(out.len(), MSGS * 5, "every packet went out once");
    out
}

/// What a receiver reported, and its region.
struct Seen {
    events: Vec<Event>,
    region: Vec<u8>,
    stats: LandingStats,
}

fn receive(t: QpType, land: bool, gro: bool, seed: u64) -> Seen {
    let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let cfg = UdpConfig {
        gro,
        ..UdpConfig::default()
    };
    let bsock = UdpSocket::bind(SocketAddr::new(lo, 0), &cfg).unwrap();
    let asock = UdpSocket::bind(SocketAddr::new(lo, 0), &UdpConfig::default()).unwrap();
    let (ba, aa) = (bsock.local_addr(), asock.local_addr());
    let mut b = receiver(ba);
    let init = QpInit {
        report_messages: true,
        ..QpInit::new(t)
    };
    let qb = b.create_qp_numbered(QB, init).unwrap();
    // the sender's side of the connection, for the receiver's QP to know its peer
    let mut a = Endpoint::new(EndpointConfig::new(aa));
    let qa = a.create_qp_numbered(QA, QpInit::new(t)).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, PSN_A, 0, 0).unwrap();
    let w = seeded(&packets(t, aa, ba), seed, t == QpType::Rc);
    let mut drv = Driver::new(bsock);
    let mut predict = |ep: &Endpoint, plan: &mut Plan| {
        if !plan.expect_write(ep, qb) {
            plan.next_alone();
        }
        true
    };
    let predict: Option<&mut Predictor<'_>> = land.then_some(&mut predict);
    let pause = Duration::from_micros(200);
    common::receive_wire(&mut drv, &mut b, predict, (asock, ba), &w, pause);
    Seen {
        events: std::iter::from_fn(|| b.poll_event()).collect(),
        region: b.mr(KEY).unwrap().bytes().to_vec(),
        stats: drv.landing_stats(),
    }
}

/// Every delivered message holds the bytes sent; nothing was written outside the
/// messages' ranges. Returns how many were delivered.
fn check_bytes(seen: &Seen, what: &str) -> usize {
    let src = source();
    let mut delivered = 0;
    for e in &seen.events {
        if let Event::WriteMessage {
            va, len, outcome, ..
        } = *e
            && outcome == MessageOutcome::Delivered
        {
            let (va, len) = (va as usize, len as usize);
            let i = va / STRIDE;
            assert_eq!((va % STRIDE, len), (0, MSG), "{what}");
            assert!(
                seen.region[va..va + len] == src[i * MSG..(i + 1) * MSG],
                "{what}: message {i} delivered with other bytes"
            );
            delivered += 1;
        }
    }
    for i in 0..MSGS {
        let gap = i * STRIDE + MSG..(i + 1) * STRIDE;
        assert!(
            seen.region[gap.clone()].iter().all(|&x| x == 0),
            "{what}: bytes written in {gap:?}, outside every message"
        );
    }
    delivered
}

fn same_as_copying(t: QpType, gro: bool) {
    let mut took = LandingStats::default();
    for seed in [3, 4, 5] {
        let what = format!("{t:?}, GRO {gro}, seed {seed}");
        let copied = receive(t, false, gro, seed);
        let landed = receive(t, true, gro, seed);
        assert_eq!(
            copied.stats,
            LandingStats::default(),
            "{what}: copying landed"
        );
        assert_eq!(landed.events, copied.events, "{what}: the reports differ");
        let n = check_bytes(&copied, &what);
        assert_eq!(check_bytes(&landed, &what), n);
        assert!(n > 0, "{what}: nothing delivered");
        if t == QpType::Rc {
            assert_eq!(n, MSGS, "{what}: RC delivers every message");
        } else {
            assert!(n < MSGS, "{what}: no fault showed");
        }
        took += landed.stats;
    }
    common::assert_taken_and_left(took, MSGS * 3, &format!("{t:?} GRO {gro}"));
}

#[test]
fn uc_writes_land_as_they_are_copied_with_gro() {
    same_as_copying(QpType::Uc, true);
}

#[test]
fn uc_writes_land_as_they_are_copied_without_gro() {
    same_as_copying(QpType::Uc, false);
}

#[test]
fn rc_writes_land_as_they_are_copied_with_gro() {
    same_as_copying(QpType::Rc, true);
}

#[test]
fn rc_writes_land_as_they_are_copied_without_gro() {
    same_as_copying(QpType::Rc, false);
}
