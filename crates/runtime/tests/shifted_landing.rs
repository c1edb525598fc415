//! WRITE ONLY packets landed by the VA their RETH names (`Plan::expect_at`): a stream with
//! a lost packet arrives shifted by one slot, and the landing receive moves the shifted
//! payloads forward — but only as far as the plan allows (`movable_to`). Past that, the
//! rest of the batch is gathered and handled the copying way. Either way every delivered
//! packet's bytes end where its RETH says, and nothing is written past the plan's bound
//! but what the transport itself placed.
#![allow(clippy::unwrap_used)]

use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_runtime::{Handled, LandingRx, LandingStats};
use rocelink_transport::sim::connect;
use rocelink_transport::*;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const PKT: usize = 1024;
const PKTS: usize = 12;
/// The lost packet.
const LOST: usize = 3;
/// Shifted payloads may be moved up to here (the end of slot 8, where packet 8 goes).
const MOVABLE_TO: usize = 8 * PKT;
const KEY: u32 = 0x0051_5100;
const QA: u32 = 0x31;
const QB: u32 = 0x32;

fn source() -> Vec<u8> {
    (0..PKTS * PKT)
        .map(|i| (i * 7 + i / 251 + 1) as u8)
        .collect()
}

fn receiver(at: SocketAddr) -> Endpoint {
    let mut ep = Endpoint::new(EndpointConfig::new(at));
    ep.register_mr_keyed(
        vec![0u8; PKTS * PKT].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        KEY,
    )
    .unwrap();
    ep
}

/// One UC WRITE ONLY per packet, to VA `i * PKT`: recorded from a run against a twin.
fn packets(from: SocketAddr, to: SocketAddr) -> Vec<Vec<u8>> {
    let mut a = Endpoint::new(EndpointConfig::new(from));
    let src = a.register_mr(source().into_boxed_slice(), 0, Access::LOCAL_WRITE);
    let qa = a.create_qp_numbered(QA, QpInit::new(QpType::Uc)).unwrap();
    let mut twin = receiver(to);
    let qb = twin
        .create_qp_numbered(QB, QpInit::new(QpType::Uc))
        .unwrap();
    connect(&mut a, qa, &mut twin, qb, Mtu::M1024, 100, 0, 0).unwrap();
    for i in 0..PKTS {
        let op = SendOp::Write {
            va: (i * PKT) as u64,
            rkey: KEY,
        };
        let sge = Sge {
            lkey: src.lkey,
            va: (i * PKT) as u64,
            len: PKT as u32,
        };
        let wr = SendWr::new(i as u64, op, sge);
        a.post_send(qa, wr).unwrap();
    }
    let mut buf = Vec::new();
    let out: Vec<Vec<u8>> = std::iter::from_fn(|| {
        a.poll_transmit(Instant::now(), &mut buf)
            .map(|tx| buf[..tx.len].to_vec())
    })
    .collect();
    assert_eq!(out.len(), PKTS);
    out
}

/// Send every packet but `LOST` to a receiver that plans all `PKTS` slots at once, each
/// movable up to `MOVABLE_TO`; what it made of them, its region and the placements.
fn land(gro: bool) -> (LandingStats, Vec<u8>, Vec<(u64, u32)>) {
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
        report_writes: true,
        ..QpInit::new(QpType::Uc)
    };
    let qb = b.create_qp_numbered(QB, init).unwrap();
    let mut a = Endpoint::new(EndpointConfig::new(aa));
    let qa = a.create_qp_numbered(QA, QpInit::new(QpType::Uc)).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 100, 0, 0).unwrap();
    let mut wire = packets(aa, ba);
    wire.remove(LOST);
    // one GSO run: one GRO message, or eleven datagrams for one receive (a plan may name
    // only bytes nobody needs, so there is one receive)
    let parts: Vec<IoSlice<'_>> = wire.iter().map(|p| IoSlice::new(p)).collect();
    asock.send_gso(ba, &parts, wire[0].len() as u16).unwrap();
    let mut rx = LandingRx::new(gro, 64);
    let plan = rx.plan_mut();
    plan.lkey = KEY;
    for i in 0..PKTS {
        let at = i * PKT;
        plan.expect_at(at, PKT, false, at as u64, MOVABLE_TO);
    }
    let got = rx
        .recv(&bsock, &mut b, Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(got, Some(if gro { 1 } else { wire.len() }), "one receive");
    let mut placed = Vec::new();
    while let Some(h) = rx.handle_next(&mut b, Instant::now(), ba) {
        match h {
            Handled::Landed(l, _) => {
                let p = l.placement().unwrap();
                placed.push((p.va, p.len));
            }
            Handled::Run(_) => unreachable!("handle_next takes no runs"),
            Handled::Datagram => {
                while let Some(e) = b.poll_event() {
                    if let Event::Placed { va, len, .. } = e {
                        placed.push((va, len));
                    }
                }
            }
        }
    }
    let region = b.mr(KEY).unwrap().bytes().to_vec();
    (rx.stats, region, placed)
}

fn check(gro: bool) {
    let (stats, region, mut placed) = land(gro);
    let src = source();
    placed.sort();
    let want: Vec<(u64, u32)> = (0..PKTS)
        .filter(|&i| i != LOST)
        .map(|i| ((i * PKT) as u64, PKT as u32))
        .collect();
    assert_eq!(
        placed, want,
        "GRO {gro}: every packet placed once, where its RETH says"
    );
    for i in (0..PKTS).filter(|&i| i != LOST) {
        let r = i * PKT..(i + 1) * PKT;
        assert!(region[r.clone()] == src[r], "GRO {gro}: packet {i}'s bytes");
    }
    // slots 0..3 in place; packets 4..=7 landed one slot early and were moved forward
    // (their new place ends by MOVABLE_TO); packet 8 would have to move past it, so it and
    // the rest were gathered
    let expected = LandingStats {
        in_place: LOST as u64,
        moved: (MOVABLE_TO / PKT - LOST - 1) as u64,
        gathered: (PKTS - MOVABLE_TO / PKT) as u64,
        refused: 0,
    };
    assert_eq!(stats, expected, "GRO {gro}");
}

#[test]
fn a_shifted_run_is_moved_as_far_as_the_plan_allows_with_gro() {
    check(true);
}

#[test]
fn a_shifted_run_is_moved_as_far_as_the_plan_allows_without_gro() {
    check(false);
}
