//! Receive WRs with a scatter list: UD shots land contiguous with the GRH slot discarded,
//! RC/UC SENDs fill segments in order, and a list that cannot take a message writes
//! nothing.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Harness, addr, pattern};
use rocelink_transport::sim::LinkConfig;
use rocelink_transport::*;
use std::time::Duration;

fn send(h: &mut Harness, wr_id: u64, op: SendOp, off: usize, len: usize) {
    let sge = h.sge_a(off, len);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id,
                op,
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
}

fn recv_sge(h: &Harness, off: usize, len: usize) -> Sge {
    Sge {
        lkey: h.b_recv.lkey,
        va: h.b_recv.va + off as u64,
        len: len as u32,
    }
}

fn next_wc(h: &mut Harness) -> WorkCompletion {
    h.pair
        .run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
    h.pair.b.poll_completion().unwrap()
}

#[test]
fn ud_shots_land_contiguous_with_the_grh_slot_discarded() {
    let mut h = Harness::new(QpType::Ud, Mtu::M1024, LinkConfig::default(), 21);
    let dest = UdDest {
        addr: addr("10.0.0.2:4791"),
        qpn: h.qb,
        qkey: 0x1111_1111,
    };
    // a "shot" of 4 messages of 1000 bytes: each RECV = discard 40 | next 1000 bytes
    for k in 0..4 {
        let wr = RecvWr::scatter(
            k,
            &[Sge::discard(40), recv_sge(&h, 1000 * k as usize, 1000)],
        )
        .unwrap();
        h.pair.b.post_recv(h.qb, wr).unwrap();
    }
    h.fill_a(0, 4000, 99);
    for k in 0..4 {
        send(
            &mut h,
            k,
            SendOp::UdSend {
                dest,
                imm: Some(k as u32),
            },
            1000 * k as usize,
            1000,
        );
    }
    for k in 0..4 {
        let wc = next_wc(&mut h);
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len, wc.imm),
            (k, WcStatus::Success, 1040, Some(k as u32))
        );
    }
    assert_eq!(
        h.b_recv_bytes(0, 4000),
        pattern(4000, 99),
        "contiguous, no GRH bytes"
    );
    assert_eq!(
        h.b_recv_bytes(4000, 40),
        vec![0; 40],
        "nothing past the shot"
    );
}

#[test]
fn rc_send_fills_segments_in_order() {
    let mut h = Harness::new(QpType::Rc, Mtu::M512, LinkConfig::default(), 22);
    // 3000 bytes into 700 | 1300 | 2000 at scattered places
    let wr = RecvWr::scatter(
        7,
        &[
            recv_sge(&h, 10_000, 700),
            recv_sge(&h, 50_000, 1300),
            recv_sge(&h, 90_000, 2000),
        ],
    )
    .unwrap();
    h.pair.b.post_recv(h.qb, wr).unwrap();
    h.fill_a(0, 3000, 5);
    send(&mut h, 1, SendOp::Send, 0, 3000);
    let wc = next_wc(&mut h);
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (7, WcStatus::Success, 3000)
    );
    let p = pattern(3000, 5);
    assert_eq!(h.b_recv_bytes(10_000, 700), p[..700]);
    assert_eq!(h.b_recv_bytes(50_000, 1300), p[700..2000]);
    assert_eq!(h.b_recv_bytes(90_000, 1000), p[2000..]);
    assert_eq!(h.b_recv_bytes(91_000, 1000), vec![0; 1000]);
}

#[test]
fn lists_that_cannot_take_a_message_write_nothing() {
    let mut h = Harness::new(QpType::Ud, Mtu::M1024, LinkConfig::default(), 23);
    // bad lists are refused when posted
    assert!(RecvWr::scatter(1, &[]).is_none());
    assert!(RecvWr::scatter(1, &[Sge::discard(1); MAX_RECV_SGE + 1]).is_none());
    let foreign = Sge {
        lkey: h.b_recv.lkey ^ 0x100,
        va: 0,
        len: 10,
    };
    let bad = RecvWr::scatter(1, &[Sge::discard(40), foreign]).unwrap();
    assert!(matches!(
        h.pair.b.post_recv(h.qb, bad),
        Err(QpError::LocalAccess(_))
    ));
    let outside = RecvWr::scatter(1, &[recv_sge(&h, common::REGION - 8, 16)]).unwrap();
    assert!(h.pair.b.post_recv(h.qb, outside).is_err());
    // a list too short for the message: a length error, and not one byte written
    let short = RecvWr::scatter(
        2,
        &[
            Sge::discard(40),
            recv_sge(&h, 0, 500),
            recv_sge(&h, 8000, 400),
        ],
    )
    .unwrap();
    h.pair.b.post_recv(h.qb, short).unwrap();
    let dest = UdDest {
        addr: addr("10.0.0.2:4791"),
        qpn: h.qb,
        qkey: 0x1111_1111,
    };
    h.fill_a(0, 1000, 3);
    send(&mut h, 9, SendOp::UdSend { dest, imm: None }, 0, 1000);
    let wc = next_wc(&mut h);
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::LocalLengthError));
    assert_eq!(h.b_recv_bytes(0, 500), vec![0; 500]);
    assert_eq!(h.b_recv_bytes(8000, 400), vec![0; 400]);
}
