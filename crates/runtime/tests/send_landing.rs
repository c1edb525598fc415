//! SEND messages received straight into their posted receives (`Plan::expect_sends`)
//! against the copying receive: the same faulty stream over loopback (UC: losses,
//! duplicates, swaps, corrupted payloads; RC: duplicates and corrupted copies between the
//! real packets) must give the same completions and, for every message received whole,
//! the sent bytes in its receive's buffer — with each receive in a buffer of its own
//! (placed in descending order, so every plan wraps) and with all of them in one buffer,
//! as a bandwidth server posts them. The landing path must be taken, and left, on the way.
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
/// FIRST, three MIDDLEs and a short LAST: a sender's runs end at each message's LAST.
const MSG: usize = 4 * MTU + 300;
/// FIRST, two MIDDLEs and a full LAST: runs (and GRO messages) span messages.
const EVEN: usize = 4 * MTU;
const MSGS: usize = 40;
/// Receive buffers every 8 KiB: a stray write shows between them.
const STRIDE: usize = 8192;
const REGION: usize = MSGS * STRIDE;
const QA: u32 = 0x45;
const QB: u32 = 0x46;
const PSN_A: u32 = 0xFF_FFF8;

fn source(msg: usize) -> Vec<u8> {
    (0..MSGS * msg).map(|i| (i * 11 + i / 307) as u8).collect()
}

/// Where receive `i` puts its message.
fn buffer(i: usize, shared: bool) -> usize {
    if shared { 0 } else { (MSGS - 1 - i) * STRIDE }
}

/// An endpoint at `at` with a zeroed receive region and QP `QB`; the region's key.
fn receiver(at: SocketAddr, t: QpType) -> (Endpoint, u32) {
    let mut ep = Endpoint::new(EndpointConfig::new(at));
    let mr = ep.register_mr(vec![0u8; REGION].into_boxed_slice(), 0, Access::LOCAL_WRITE);
    ep.create_qp_numbered(QB, QpInit::new(t)).unwrap();
    (ep, mr.lkey)
}

/// Post `MSGS` receives of `msg` bytes (once the QP is connected).
fn post(ep: &mut Endpoint, lkey: u32, shared: bool, msg: usize) {
    for i in 0..MSGS {
        let sge = Sge {
            lkey,
            va: buffer(i, shared) as u64,
            len: msg as u32,
        };
        ep.post_recv(QB, RecvWr::new(i as u64, sge)).unwrap();
    }
}

/// The sender's packets for `MSGS` SENDs: recorded from a run against a twin that
/// answers every packet.
fn packets(t: QpType, from: SocketAddr, to: SocketAddr, msg: usize) -> Vec<Vec<u8>> {
    let mut a = Endpoint::new(EndpointConfig::new(from));
    let src = a.register_mr(source(msg).into_boxed_slice(), 0, Access::LOCAL_WRITE);
    let qa = a.create_qp_numbered(QA, QpInit::new(t)).unwrap();
    let (mut twin, key) = receiver(to, t);
    connect(&mut a, qa, &mut twin, QB, Mtu::M1024, PSN_A, 0, 0).unwrap();
    post(&mut twin, key, false, msg);
    for i in 0..MSGS {
        let sge = Sge {
            lkey: src.lkey,
            va: (i * msg) as u64,
            len: msg as u32,
        };
        a.post_send(qa, SendWr::new(i as u64, SendOp::Send, sge))
            .unwrap();
    }
    let out = record_run(&mut a, from, &mut twin, to);
    assert_eq!(
        out.len(),
        MSGS * msg.div_ceil(MTU),
        "every packet went out once"
    );
    out
}

/// The seeded faults of the WRITE test; seed 0: a clean stream.
fn wire(t: QpType, pkts: &[Vec<u8>], seed: u64) -> Vec<Vec<u8>> {
    match seed {
        0 => pkts.to_vec(),
        _ => seeded(pkts, seed, t == QpType::Rc),
    }
}

/// What a receiver completed, its region and what the landing receive did.
struct Seen {
    completions: Vec<WorkCompletion>,
    region: Vec<u8>,
    stats: LandingStats,
}

/// How the test sends: message size, and the pause between a sender's runs.
#[derive(Debug, Clone, Copy)]
struct Shape {
    msg: usize,
    pause: Duration,
}

fn receive(t: QpType, land: bool, gro: bool, shared: bool, seed: u64, shape: Shape) -> Seen {
    let msg = shape.msg;
    let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let cfg = UdpConfig {
        gro,
        ..UdpConfig::default()
    };
    let bsock = UdpSocket::bind(SocketAddr::new(lo, 0), &cfg).unwrap();
    let asock = UdpSocket::bind(SocketAddr::new(lo, 0), &UdpConfig::default()).unwrap();
    let (ba, aa) = (bsock.local_addr(), asock.local_addr());
    let (mut b, key) = receiver(ba, t);
    let mut a = Endpoint::new(EndpointConfig::new(aa));
    let qa = a.create_qp_numbered(QA, QpInit::new(t)).unwrap();
    connect(&mut a, qa, &mut b, QB, Mtu::M1024, PSN_A, 0, 0).unwrap();
    post(&mut b, key, shared, msg);
    let w = wire(t, &packets(t, aa, ba, msg), seed);
    let mut drv = Driver::new(bsock);
    let mut completions = Vec::new();
    let mut predict = |ep: &Endpoint, plan: &mut Plan| plan.expect_sends(ep, QB);
    let predict: Option<&mut Predictor<'_>> = land.then_some(&mut predict);
    common::receive_wire(&mut drv, &mut b, predict, (asock, ba), &w, shape.pause);
    // (the sender's port differs between runs)
    completions.extend(
        std::iter::from_fn(|| b.poll_completion()).map(|wc| WorkCompletion { src: None, ..wc }),
    );
    Seen {
        completions,
        region: b.mr(key).unwrap().bytes().to_vec(),
        stats: drv.landing_stats(),
    }
}

/// Every message received whole holds the bytes sent, in its own receive's buffer; no
/// byte lies between the buffers. Returns how many were received whole.
fn check_bytes(seen: &Seen, what: &str, msg: usize) -> usize {
    let src = source(msg);
    let mut whole = 0;
    for wc in &seen.completions {
        if wc.status == WcStatus::Success && wc.opcode == WcOpcode::Recv {
            let i = wc.wr_id as usize;
            assert_eq!(wc.byte_len as usize, msg, "{what}");
            let at = buffer(i, false);
            // the message's index: the receives complete in order, one message each
            let m = (0..MSGS)
                .find(|&m| seen.region[at..at + msg] == src[m * msg..(m + 1) * msg])
                .unwrap_or_else(|| panic!("{what}: receive {i} holds no message sent"));
            assert!(m >= i, "{what}: receive {i} holds an earlier message {m}");
            whole += 1;
        }
    }
    for i in 0..MSGS {
        let gap = i * STRIDE + msg..(i + 1) * STRIDE;
        assert!(
            seen.region[gap.clone()].iter().all(|&x| x == 0),
            "{what}: bytes written in {gap:?}, outside every receive"
        );
    }
    whole
}

fn same_as_copying(t: QpType, gro: bool) {
    let mut took = LandingStats::default();
    let paced = Shape {
        msg: MSG,
        pause: Duration::from_micros(200),
    };
    let even = Shape {
        msg: EVEN,
        pause: Duration::ZERO,
    };
    for (shared, shape, seed) in [
        (false, paced, 3),
        (false, paced, 4),
        (true, paced, 5),
        (false, even, 6),
        (false, even, 7),
        (true, even, 8),
        (false, even, 0),
    ] {
        {
            let what = format!("{t:?}, GRO {gro}, shared {shared}, {shape:?}, seed {seed}");
            let copied = receive(t, false, gro, shared, seed, shape);
            let landed = receive(t, true, gro, shared, seed, shape);
            assert_eq!(
                copied.stats,
                LandingStats::default(),
                "{what}: copying landed"
            );
            assert_eq!(
                landed.completions, copied.completions,
                "{what}: the completions differ"
            );
            let ok = copied
                .completions
                .iter()
                .filter(|wc| wc.status == WcStatus::Success)
                .count();
            assert!(ok > 0, "{what}: nothing received");
            if t == QpType::Rc || seed == 0 {
                assert_eq!(ok, MSGS, "{what}: every message received");
            } else {
                assert!(ok < MSGS, "{what}: no fault showed");
            }
            if !shared {
                assert_eq!(check_bytes(&copied, &what, shape.msg), ok);
                assert_eq!(check_bytes(&landed, &what, shape.msg), ok);
            }
            // a clean stream lands all in place; a paced faulty one mostly (a fault sends
            // the rest of its batch the copying way, and a paced batch is a message)
            let sent = MSGS * shape.msg.div_ceil(MTU);
            let least = match (seed, shape.pause.is_zero()) {
                (0, _) => sent,
                (_, false) => sent / 2,
                (_, true) => 1,
            };
            assert!(
                landed.stats.in_place as usize >= least,
                "{what}: {:?}",
                landed.stats
            );
            took += landed.stats;
        }
    }
    common::assert_taken_and_left(took, MSGS * 3, &format!("{t:?} GRO {gro}"));
}

#[test]
fn uc_sends_land_as_they_are_copied_with_gro() {
    same_as_copying(QpType::Uc, true);
}

#[test]
fn uc_sends_land_as_they_are_copied_without_gro() {
    same_as_copying(QpType::Uc, false);
}

#[test]
fn rc_sends_land_as_they_are_copied_with_gro() {
    same_as_copying(QpType::Rc, true);
}

#[test]
fn rc_sends_land_as_they_are_copied_without_gro() {
    same_as_copying(QpType::Rc, false);
}
