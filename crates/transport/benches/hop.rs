//! User-space cost of one latency-test round trip through two endpoints, without sockets:
//! perftest's WRITE ping-pong (2-byte signalled RC WRITEs each way, each answered by the
//! other side's ACK) and its SEND ping-pong, everything the transport does per hop —
//! build, ICRC, parse, verify, place, acknowledge, complete — and nothing the kernel does.
//!
//! `taskset -c 1 cargo bench -p rocelink-transport --bench hop`

#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use rocelink_transport::sim::connect;
use rocelink_transport::*;
use std::net::SocketAddr;
use std::time::Instant;

struct Side {
    ep: Endpoint,
    qp: u32,
    lkey: u32,
    rkey: u32,
}

fn side(addr: &str) -> Side {
    let a: SocketAddr = addr.parse().unwrap();
    let mut ep = Endpoint::new(EndpointConfig::new(a));
    let mr = ep.register_mr(
        vec![0u8; 4096].into_boxed_slice(),
        0x1000,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let qp = ep.create_qp(QpInit::new(QpType::Rc)).unwrap();
    Side {
        ep,
        qp,
        lkey: mr.lkey,
        rkey: mr.rkey,
    }
}

/// Move every datagram `from` has to send into `to`.
fn carry(from: &mut Endpoint, to: &mut Endpoint, now: Instant, buf: &mut Vec<u8>) {
    let (src, dst) = (from.config().local, to.config().local);
    while let Some(t) = from.poll_transmit(now, buf) {
        let src = SocketAddr::new(src.ip(), t.src_port);
        to.handle_datagram(
            now,
            Datagram {
                src,
                dst,
                ip_header: None,
                payload: &buf[..t.len],
            },
        );
    }
}

fn pair() -> (Side, Side) {
    let (mut a, mut b) = (side("10.0.0.1:4791"), side("10.0.0.2:4791"));
    connect(&mut a.ep, a.qp, &mut b.ep, b.qp, Mtu::M4096, 100, 200, 0).unwrap();
    (a, b)
}

/// One message from `x` to `y`, carried, and `y`'s completions and events taken.
fn hop(x: &mut Side, y: &mut Side, op: SendOp, now: Instant, buf: &mut Vec<u8>) {
    if matches!(op, SendOp::Send) {
        let sge = Sge {
            lkey: y.lkey,
            va: 0x1800,
            len: 64,
        };
        y.ep.post_recv(y.qp, RecvWr::new(2, sge)).unwrap();
    }
    let wr = SendWr {
        wr_id: 1,
        op,
        sg_list: Sge {
            lkey: x.lkey,
            va: 0x1000,
            len: 2,
        }
        .into(),
        signaled: true,
        solicited: false,
        marks: 0,
    };
    x.ep.post_send(x.qp, wr).unwrap();
    carry(&mut x.ep, &mut y.ep, now, buf);
    while y.ep.poll_cq(CqId::DEFAULT).is_some() {}
    while y.ep.poll_event().is_some() {}
}

/// A ping-pong round: `a` to `b`, `b` to `a` (carrying the ACK of the first along), and
/// the last ACK back.
fn round(a: &mut Side, b: &mut Side, write: bool, now: Instant, buf: &mut Vec<u8>) {
    let op = |y: &Side| match write {
        true => SendOp::Write {
            va: 0x1000,
            rkey: y.rkey,
        },
        false => SendOp::Send,
    };
    let to_b = op(b);
    hop(a, b, to_b, now, buf);
    let to_a = op(a);
    hop(b, a, to_a, now, buf);
    carry(&mut a.ep, &mut b.ep, now, buf);
    while a.ep.poll_cq(CqId::DEFAULT).is_some() {}
    while b.ep.poll_cq(CqId::DEFAULT).is_some() {}
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hop");
    let now = Instant::now();
    let mut buf = Vec::with_capacity(9000);
    for (name, write) in [
        ("write_lat_round_trip", true),
        ("send_lat_round_trip", false),
    ] {
        let (mut a, mut b) = pair();
        g.bench_function(name, |bn| {
            bn.iter(|| round(&mut a, &mut b, write, now, &mut buf))
        });
        // every message arrived and was acknowledged: nothing left over, nothing refused
        let (sa, sb) = (a.ep.stats(), b.ep.stats());
        assert_eq!(sa.tx_datagrams, sb.rx_datagrams, "{name}");
        assert_eq!(sb.tx_datagrams, sa.rx_datagrams, "{name}");
        let bad = |s: EndpointStats| s.malformed + s.icrc_errors + s.unknown_qp;
        assert_eq!(bad(sa) + bad(sb), 0, "{name}: {sa:?} {sb:?}");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
