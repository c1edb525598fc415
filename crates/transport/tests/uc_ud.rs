//! UC under loss and corruption: intact messages complete intact, damaged ones are reported
//! and never completed. UD: GRH slot, Q_Key rules, source QP, MTU limit.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_transport::sim::LinkConfig;
use rocelink_transport::*;
use std::collections::HashSet;
use std::time::Duration;

#[test]
fn uc_loss_and_corruption_never_complete_damaged_data() {
    let link = LinkConfig {
        loss: 0.05,
        corrupt: 0.02,
        duplicate: 0.01,
        ..LinkConfig::default()
    };
    let mut h = Harness::new(QpType::Uc, Mtu::M1024, link, 11);
    let (n, len, slot) = (300usize, 3000usize, 4096usize);
    for i in 0..n {
        h.post_recv_b(i as u64, 0, 16);
        h.fill_a(i % 200 * slot, len, i as u64);
        let sge = h.sge_a(i % 200 * slot, len);
        let op = SendOp::WriteImm {
            va: (i * slot) as u64,
            rkey: h.b_mem.rkey,
            imm: i as u32,
        };
        h.pair
            .a
            .post_send(
                h.qa,
                SendWr {
                    wr_id: i as u64,
                    op,
                    sg_list: sge.into(),
                    signaled: true,
                    solicited: false,
                    marks: 0,
                },
            )
            .unwrap();
        if i % 200 == 199 || i + 1 == n {
            h.pair.run_until(Duration::from_secs(10), |_| false);
        }
    }
    h.pair.run_until(Duration::from_secs(10), |_| false);
    let a = drain(&mut h.pair.a);
    assert_eq!(a.len(), n, "UC sends complete once sent");
    assert!(a.iter().all(|w| w.status == WcStatus::Success));
    let b = drain(&mut h.pair.b);
    let mut completed = HashSet::new();
    for wc in &b {
        assert_eq!(
            (wc.status, wc.opcode, wc.byte_len as usize),
            (WcStatus::Success, WcOpcode::RecvRdmaWithImm, len)
        );
        let i = wc.imm.unwrap() as usize;
        assert_eq!(
            h.b_bytes(i * slot, len),
            pattern(len, i as u64),
            "message {i} completed with wrong data"
        );
        completed.insert(i);
    }
    let mut damaged = 0;
    while let Some(e) = h.pair.b.poll_event() {
        if let Event::MessageDamaged { .. } = e {
            damaged += 1;
        }
    }
    let st = h.pair.b.qp_stats(h.qb).unwrap();
    let ep = h.pair.b.stats();
    assert!(
        completed.len() < n && completed.len() > n / 2,
        "completed {}",
        completed.len()
    );
    assert!(
        ep.icrc_errors > 0,
        "corruption must be caught by the ICRC: {ep:?}"
    );
    assert!(
        damaged > 0 && st.psn_gaps > 0,
        "losses must be reported: damaged {damaged} {st:?}"
    );
    // every message is accounted for: completed, reported damaged, or wholly lost (then the
    // next message's FIRST shows the gap)
    assert!(completed.len() + damaged as usize <= n);
}

#[test]
fn uc_send_into_posted_buffers() {
    let mut h = Harness::new(QpType::Uc, Mtu::M512, LinkConfig::default(), 12);
    h.post_recv_b(5, 0, 4096);
    h.fill_a(0, 2000, 77);
    let sge = h.sge_a(0, 2000);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 1,
                op: SendOp::Send,
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    h.pair
        .run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
    let wc = h.pair.b.poll_completion().unwrap();
    assert_eq!(
        (wc.wr_id, wc.byte_len, wc.opcode),
        (5, 2000, WcOpcode::Recv)
    );
    assert_eq!(h.b_recv_bytes(0, 2000), pattern(2000, 77));
    // no RECV posted: the message is dropped, not an RNR stall
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 2,
                op: SendOp::Send,
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    h.pair.run_until(Duration::from_secs(1), |_| false);
    assert!(h.pair.b.poll_completion().is_none());
    assert!(h.pair.b.qp_stats(h.qb).unwrap().drops >= 1);
}

fn ud_pair(seed: u64) -> (Harness, UdDest) {
    let h = Harness::new(QpType::Ud, Mtu::M1024, LinkConfig::default(), seed);
    let dest = UdDest {
        addr: addr("10.0.0.2:4791"),
        qpn: h.qb,
        qkey: 0x1111_1111,
    };
    (h, dest)
}

#[test]
fn ud_send_has_grh_slot_and_source_qp() {
    let (mut h, dest) = ud_pair(13);
    h.post_recv_b(1, 0, 2048);
    h.fill_a(0, 1000, 5);
    let sge = h.sge_a(0, 1000);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 9,
                op: SendOp::UdSend {
                    dest,
                    imm: Some(0xABCD),
                },
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    h.pair
        .run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
    let wc = h.pair.b.poll_completion().unwrap();
    assert_eq!(
        (wc.status, wc.byte_len, wc.imm, wc.src_qp),
        (WcStatus::Success, 1040, Some(0xABCD), h.qa)
    );
    let slot = h.b_recv_bytes(0, 40);
    assert_eq!(
        &slot[..20],
        &[0u8; 20],
        "IPv4: first 20 bytes of the GRH slot are zero"
    );
    assert_eq!(slot[20], 0x45);
    assert_eq!(
        &slot[32..36],
        &[10, 0, 0, 1],
        "source address in the IPv4 header"
    );
    assert_eq!(h.b_recv_bytes(40, 1000), pattern(1000, 5));
    assert_eq!(h.pair.a.poll_completion().unwrap().wr_id, 9);
}

#[test]
fn ud_ipv6_slot_is_the_whole_header() {
    let mut h = Harness::with_addrs(
        QpType::Ud,
        Mtu::M1024,
        LinkConfig::default(),
        14,
        addr("[fd00::1]:4791"),
        addr("[fd00::2]:4791"),
    );
    let dest = UdDest {
        addr: addr("[fd00::2]:4791"),
        qpn: h.qb,
        qkey: 0x1111_1111,
    };
    h.post_recv_b(1, 0, 2048);
    let sge = h.sge_a(0, 10);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 1,
                op: SendOp::UdSend { dest, imm: None },
                sg_list: sge.into(),
                signaled: false,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    h.pair
        .run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
    assert_eq!(h.pair.b.poll_completion().unwrap().byte_len, 50);
    let slot = h.b_recv_bytes(0, 40);
    assert_eq!(slot[0] >> 4, 6);
    assert_eq!(
        &slot[8..24],
        &"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets()
    );
}

#[test]
fn ud_qkey_rules() {
    let (mut h, dest) = ud_pair(15);
    for i in 0..3 {
        h.post_recv_b(i, i as usize * 2048, 2048);
    }
    let sge = h.sge_a(0, 8);
    let send = |h: &mut Harness, qkey: u32, id: u64| {
        let d = UdDest { qkey, ..dest };
        h.pair
            .a
            .post_send(
                h.qa,
                SendWr {
                    wr_id: id,
                    op: SendOp::UdSend { dest: d, imm: None },
                    sg_list: sge.into(),
                    signaled: false,
                    solicited: false,
                    marks: 0,
                },
            )
            .unwrap();
        h.pair.run_until(Duration::from_secs(1), |_| false);
    };
    send(&mut h, 0x2222_2222, 1); // wrong Q_Key: dropped
    assert!(h.pair.b.poll_completion().is_none());
    assert_eq!(h.pair.b.qp_stats(h.qb).unwrap().drops, 1);
    // bit 31 set: the sender's own Q_Key (0x11111111, set at INIT) is used instead
    send(&mut h, 0x8000_0000, 2);
    assert_eq!(
        h.pair.b.poll_completion().unwrap().status,
        WcStatus::Success
    );
    // larger than the MTU: refused at post time
    let big = h.sge_a(0, 1025);
    let r = h.pair.a.post_send(
        h.qa,
        SendWr {
            wr_id: 3,
            op: SendOp::UdSend { dest, imm: None },
            sg_list: big.into(),
            signaled: true,
            solicited: false,
            marks: 0,
        },
    );
    assert_eq!(r, Err(QpError::TooLong));
    // receive buffer smaller than GRH + payload: length error completion
    let mut h2 = ud_pair(16).0;
    h2.post_recv_b(1, 0, 45);
    let d2 = UdDest {
        addr: addr("10.0.0.2:4791"),
        qpn: h2.qb,
        qkey: 0x1111_1111,
    };
    let sge2 = h2.sge_a(0, 8);
    h2.pair
        .a
        .post_send(
            h2.qa,
            SendWr {
                wr_id: 1,
                op: SendOp::UdSend {
                    dest: d2,
                    imm: None,
                },
                sg_list: sge2.into(),
                signaled: false,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    h2.pair
        .run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
    assert_eq!(
        h2.pair.b.poll_completion().unwrap().status,
        WcStatus::LocalLengthError
    );
}
