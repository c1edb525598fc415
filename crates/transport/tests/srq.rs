//! Shared receive queues: two QPs take their receives from one queue in the order messages
//! arrive on either; an armed limit says once when the queue runs low; an empty queue is
//! an RNR NAK and a receive posted later completes the message; a QP on a queue posts no
//! receives of its own, and a queue in use is not destroyed.
#![allow(clippy::unwrap_used)]

use rocelink_transport::sim::{LinkConfig, Pair, connect};
use rocelink_transport::*;
use std::time::{Duration, Instant};

struct Two {
    pair: Pair,
    qa: [u32; 2],
    qb: [u32; 2],
    srq: u32,
    src: MrKeys,
    dst: MrKeys,
}

fn two() -> Two {
    let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
    let mut b = Endpoint::new(EndpointConfig::new("10.0.0.2:4791".parse().unwrap()));
    let src = a.register_mr(
        (0..4096u32).map(|i| i as u8).collect::<Vec<u8>>(),
        0x1000,
        Access::LOCAL_WRITE,
    );
    let dst = b.register_mr(vec![0u8; 4096], 0x8000, Access::LOCAL_WRITE);
    let srq = b.create_srq(SrqInit { max_wr: 16, pd: 0 }).unwrap();
    let mut qa = [0; 2];
    let mut qb = [0; 2];
    for i in 0..2 {
        qa[i] = a.create_qp(QpInit::new(QpType::Rc)).unwrap();
        qb[i] = b
            .create_qp(QpInit {
                srq: Some(srq),
                ..QpInit::new(QpType::Rc)
            })
            .unwrap();
        connect(&mut a, qa[i], &mut b, qb[i], Mtu::M1024, 100, 200, 0).unwrap();
    }
    Two {
        pair: Pair::new(a, b, LinkConfig::default(), 7, Instant::now()),
        qa,
        qb,
        srq,
        src,
        dst,
    }
}

/// A 64-byte receive at slot `i` of B's buffer.
fn recv(t: &Two, i: u64) -> RecvWr {
    RecvWr::new(
        i,
        Sge {
            lkey: t.dst.lkey,
            va: t.dst.va + i * 64,
            len: 64,
        },
    )
}

/// Send `n` bytes from A's offset `off` on A's QP `k`.
fn send(t: &mut Two, k: usize, id: u64, off: u64, n: u32) {
    let wr = SendWr {
        signaled: true,
        ..SendWr::new(
            id,
            SendOp::Send,
            Sge {
                lkey: t.src.lkey,
                va: t.src.va + off,
                len: n,
            },
        )
    };
    t.pair.a.post_send(t.qa[k], wr).unwrap();
}

/// Run until B has `n` receive completions; them.
fn received(t: &mut Two, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let ok = t.pair.run_until(Duration::from_secs(10), |p| {
        while let Some(wc) = p.b.poll_completion() {
            got.push(wc);
        }
        while p.a.poll_completion().is_some() {}
        got.len() >= n
    });
    assert!(ok, "{} of {n}: {got:?}", got.len());
    got
}

#[test]
fn two_qps_take_their_receives_from_one_queue_in_arrival_order() {
    let mut t = two();
    for i in 0..6 {
        let r = recv(&t, i);
        t.pair.b.post_srq_recv(t.srq, r).unwrap();
    }
    t.pair.b.modify_srq(t.srq, None, Some(3)).unwrap();
    let info = t.pair.b.srq_info(t.srq).unwrap();
    assert_eq!((info.max_wr, info.limit, info.posted), (16, 3, 6));
    // one message on each QP, in turn, each 10 bytes from its own offset
    for m in 0..5u64 {
        send(&mut t, (m % 2) as usize, m, m * 100, 10);
        received(&mut t, 1);
    }
    let info = t.pair.b.srq_info(t.srq).unwrap();
    assert_eq!(info.posted, 1);
    assert_eq!(info.limit, 0, "disarmed once it fired");
    // message m took receive m, on the QP it came on
    let bytes = t.pair.b.mr(t.dst.lkey).unwrap().bytes().to_vec();
    for m in 0..5u64 {
        let want: Vec<u8> = (0..10).map(|i| (m * 100 + i) as u8).collect();
        let at = (m * 64) as usize;
        assert_eq!(bytes[at..at + 10], want[..], "message {m}");
    }
    // the limit said so once: when the fourth receive left two (< 3) behind
    let mut limits = Vec::new();
    while let Some(e) = t.pair.b.poll_event() {
        if let Event::SrqLimit { qpn, srq } = e {
            limits.push((qpn, srq));
        }
    }
    assert_eq!(limits, [(t.qb[1], t.srq)]);
}

#[test]
fn an_empty_queue_is_an_rnr_nak_and_a_receive_posted_later_completes_the_message() {
    let mut t = two();
    send(&mut t, 0, 1, 0, 32);
    // nothing posted: the message waits (RNR NAKs) until a receive is
    let idle = t.pair.run_until(Duration::from_millis(20), |p| {
        p.b.poll_completion().is_some()
    });
    assert!(!idle);
    assert!(t.pair.a.qp_stats(t.qa[0]).unwrap().rnr_naks_received > 0);
    let r = recv(&t, 3);
    t.pair.b.post_srq_recv(t.srq, r).unwrap();
    let wc = received(&mut t, 1);
    assert_eq!((wc[0].wr_id, wc[0].qpn, wc[0].byte_len), (3, t.qb[0], 32));
    assert_eq!(wc[0].status, WcStatus::Success);
}

#[test]
fn a_queue_is_used_through_its_qps_and_outlives_none_of_them() {
    let mut t = two();
    let r = recv(&t, 0);
    assert!(matches!(
        t.pair.b.post_recv(t.qb[0], r),
        Err(QpError::InvalidAttr(_))
    ));
    // a receive of another domain's buffer, and more than the queue holds
    let pd1 = t
        .pair
        .b
        .register_mr(vec![0u8; 64], 0x20_0000, Access::LOCAL_WRITE);
    t.pair.b.set_mr_pd(pd1.lkey, 1).unwrap();
    let foreign = RecvWr::new(
        9,
        Sge {
            lkey: pd1.lkey,
            va: pd1.va,
            len: 64,
        },
    );
    assert!(matches!(
        t.pair.b.post_srq_recv(t.srq, foreign),
        Err(QpError::LocalAccess(_))
    ));
    for i in 0..16 {
        let r = recv(&t, i);
        t.pair.b.post_srq_recv(t.srq, r).unwrap();
    }
    let r = recv(&t, 0);
    assert_eq!(t.pair.b.post_srq_recv(t.srq, r), Err(QpError::QueueFull));
    assert!(
        t.pair.b.modify_srq(t.srq, Some(8), None).is_err(),
        "16 posted"
    );
    assert!(t.pair.b.modify_srq(t.srq, None, Some(17)).is_err());
    // a QP of another domain may not use it
    let other = QpInit {
        srq: Some(t.srq),
        pd: 1,
        ..QpInit::new(QpType::Rc)
    };
    assert!(t.pair.b.create_qp(other).is_err());
    assert_eq!(t.pair.b.destroy_srq(t.srq), Err(QpError::Busy));
    t.pair.b.destroy_qp(t.qb[0]).unwrap();
    assert_eq!(t.pair.b.destroy_srq(t.srq), Err(QpError::Busy));
    t.pair.b.destroy_qp(t.qb[1]).unwrap();
    assert_eq!(t.pair.b.destroy_srq(t.srq), Ok(()));
    assert!(t.pair.b.srq_info(t.srq).is_none());
}
