//! Hostile packets: bad R_Key, VA outside the region, oversize length, wrong QP, forged PSN,
//! wrong peer, truncation, bad pad. None may write a byte; each is refused the documented way.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use proptest::prelude::*;
use rocelink_transport::sim::{Dir, LinkConfig};
use rocelink_transport::*;
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr, pad_for};
use rocelink_wire::icrc;
use std::time::Duration;

fn packet(
    h: &Harness,
    opcode: Opcode,
    qp: u32,
    psn: u32,
    reth: Option<RethRepr>,
    payload: &[u8],
) -> Vec<u8> {
    let ib = IbRepr {
        bth: BthRepr {
            opcode,
            dest_qp: qp,
            psn,
            ack_req: true,
            pad_count: pad_for(payload.len()),
            ..Default::default()
        },
        reth,
        payload_len: payload.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, payload);
    icrc::fill_socket(h.pair.a.config().local, h.pair.b.config().local, &mut b).unwrap();
    b
}

fn untouched(h: &Harness) -> bool {
    h.b_bytes(0, REGION).iter().all(|&b| b == 0)
        && h.b_recv_bytes(0, REGION).iter().all(|&b| b == 0)
}

fn run(h: &mut Harness) {
    h.pair.run_until(Duration::from_secs(1), |_| false);
}

#[test]
fn rc_access_violations_are_naked_and_write_nothing() {
    let cases: [(&str, u32, u64, u32); 4] = [
        ("bad rkey", 0xDEAD, 0, 16),
        ("va past the end", 0, (REGION - 8) as u64, 16),
        ("va wraps", 0, u64::MAX - 4, 16),
        ("length past the end", 0, 0, (REGION + 1) as u32),
    ];
    for (what, rkey_xor, va, dma_len) in cases {
        let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 21);
        let rkey = h.b_mem.rkey ^ rkey_xor;
        let base = next_psn(&mut h);
        let p = packet(
            &h,
            Opcode::RC_RDMA_WRITE_ONLY,
            h.qb,
            base,
            Some(RethRepr { va, rkey, dma_len }),
            &[0xEE; 16],
        );
        h.pair.inject(Dir::AtoB, p);
        run(&mut h);
        let st = h.pair.b.qp_stats(h.qb).unwrap();
        assert!(untouched(&h), "{what}: bytes were written");
        if dma_len as usize > REGION {
            assert_eq!(st.naks_sent, 1, "{what}");
        } else {
            assert_eq!(
                (st.access_violations, st.naks_sent),
                (1, 1),
                "{what}: {st:?}"
            );
        }
        assert_eq!(
            h.pair.b.qp_state(h.qb),
            Some(QpState::Error),
            "{what}: class C error"
        );
    }
}

/// The PSN B expects next: send one legitimate zero-length WRITE and watch its PSN.
fn next_psn(h: &mut Harness) -> u32 {
    let mut found = None;
    let sge = h.sge_a(0, 0);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 99,
                op: SendOp::Write {
                    va: 0,
                    rkey: h.b_mem.rkey,
                },
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    let cell = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let c2 = cell.clone();
    h.pair.set_filter(move |d, b| {
        if d == Dir::AtoB {
            c2.set(u32::from_be_bytes([0, b[9], b[10], b[11]]));
        }
        true
    });
    h.pair.run_until(Duration::from_secs(1), |p| {
        while let Some(w) = p.a.poll_completion() {
            if w.wr_id == 99 {
                found = Some(());
            }
        }
        found.is_some()
    });
    h.pair.set_filter(|_, _| true);
    (cell.get() + 1) & 0xFF_FFFF
}

#[test]
fn rc_wrong_qp_peer_psn_truncation_pad() {
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 22);
    let base = next_psn(&mut h);
    let good_reth = Some(RethRepr {
        va: 0,
        rkey: h.b_mem.rkey,
        dma_len: 16,
    });
    // wrong QP
    let p = packet(
        &h,
        Opcode::RC_RDMA_WRITE_ONLY,
        h.qb + 1,
        base,
        good_reth,
        &[1; 16],
    );
    h.pair.inject(Dir::AtoB, p);
    run(&mut h);
    assert_eq!(h.pair.b.stats().unknown_qp, 1);
    // forged PSN far ahead: one NAK (PSN sequence error), nothing written
    for k in 0..5 {
        let p = packet(
            &h,
            Opcode::RC_RDMA_WRITE_ONLY,
            h.qb,
            (base + 1000 + k) & 0xFF_FFFF,
            good_reth,
            &[2; 16],
        );
        h.pair.inject(Dir::AtoB, p);
    }
    run(&mut h);
    let st = h.pair.b.qp_stats(h.qb).unwrap();
    assert_eq!(
        (st.psn_gaps, st.naks_sent),
        (5, 1),
        "one NAK per gap: {st:?}"
    );
    // truncated (ICRC is then wrong or the headers do not fit)
    let mut p = packet(
        &h,
        Opcode::RC_RDMA_WRITE_ONLY,
        h.qb,
        base,
        good_reth,
        &[3; 16],
    );
    p.truncate(20);
    h.pair.inject(Dir::AtoB, p);
    // corrupted ICRC
    let mut p = packet(
        &h,
        Opcode::RC_RDMA_WRITE_ONLY,
        h.qb,
        base,
        good_reth,
        &[3; 16],
    );
    let n = p.len();
    p[n - 1] ^= 1;
    h.pair.inject(Dir::AtoB, p);
    // non-zero pad byte (re-ICRC'd so only the pad is wrong)
    let mut p = packet(
        &h,
        Opcode::RC_RDMA_WRITE_ONLY,
        h.qb,
        base,
        Some(RethRepr {
            va: 0,
            rkey: h.b_mem.rkey,
            dma_len: 15,
        }),
        &[3; 15],
    );
    let n = p.len();
    p[n - 5] = 0xFF;
    icrc::fill_socket(h.pair.a.config().local, h.pair.b.config().local, &mut p).unwrap();
    h.pair.inject(Dir::AtoB, p);
    run(&mut h);
    let ep = h.pair.b.stats();
    assert_eq!((ep.malformed, ep.icrc_errors), (2, 1), "{ep:?}");
    assert!(untouched(&h));
    assert_eq!(
        h.pair.b.qp_state(h.qb),
        Some(QpState::Rts),
        "none of these may break the QP"
    );
    // a correct packet still works afterwards
    let p = packet(
        &h,
        Opcode::RC_RDMA_WRITE_ONLY,
        h.qb,
        base,
        good_reth,
        &[4; 16],
    );
    h.pair.inject(Dir::AtoB, p);
    run(&mut h);
    assert_eq!(h.b_bytes(0, 16), vec![4; 16]);
}

#[test]
fn rc_packets_from_another_peer_are_ignored() {
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 23);
    let base = next_psn(&mut h);
    let ib = IbRepr {
        bth: BthRepr {
            opcode: Opcode::RC_RDMA_WRITE_ONLY,
            dest_qp: h.qb,
            psn: base,
            ..Default::default()
        },
        reth: Some(RethRepr {
            va: 0,
            rkey: h.b_mem.rkey,
            dma_len: 4,
        }),
        payload_len: 4,
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, &[9; 4]);
    let intruder = addr("10.0.0.99:4791");
    icrc::fill_socket(intruder, h.pair.b.config().local, &mut b).unwrap();
    let t = std::time::Instant::now();
    h.pair.b.handle_datagram(
        t,
        Datagram {
            src: intruder,
            dst: h.pair.b.config().local,
            ip_header: None,
            payload: &b,
        },
    );
    assert_eq!(h.pair.b.stats().unknown_qp, 1);
    assert!(untouched(&h));
}

#[test]
fn uc_bad_rkey_drops_silently() {
    let mut h = Harness::new(QpType::Uc, Mtu::M1024, LinkConfig::default(), 24);
    let base = next_psn(&mut h);
    let p = packet(
        &h,
        Opcode::UC_RDMA_WRITE_ONLY,
        h.qb,
        base,
        Some(RethRepr {
            va: 0,
            rkey: 0x1234,
            dma_len: 8,
        }),
        &[5; 8],
    );
    h.pair.inject(Dir::AtoB, p);
    run(&mut h);
    let st = h.pair.b.qp_stats(h.qb).unwrap();
    assert_eq!(
        (st.access_violations, st.naks_sent, st.tx_packets),
        (1, 0, 0)
    );
    assert!(untouched(&h));
    assert_eq!(h.pair.b.qp_state(h.qb), Some(QpState::Rts));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Random headers aimed at B's QPs (RC, UC, UD) with a correct ICRC: whatever they say,
    /// nothing panics and nothing lands outside the region — bytes change only inside
    /// [va, va+len) of the region whose R_Key the packet names correctly.
    #[test]
    fn random_requests_never_write_outside(t in 0u8..3, op in any::<u8>(), psn_off in 0u32..4, va in prop_oneof![0u64..2048, (REGION as u64 - 64)..(REGION as u64 + 64), any::<u64>()], len in prop_oneof![0u32..2048, any::<u32>()], good_key in any::<bool>(), plen in 0usize..1500) {
        let qt = [QpType::Rc, QpType::Uc, QpType::Ud][t as usize];
        let mut h = Harness::new(qt, Mtu::M1024, LinkConfig::default(), 25);
        let base = if qt == QpType::Ud { 0 } else { next_psn(&mut h) };
        for i in 0..4 { h.post_recv_b(i, i as usize * 8192, 8192); }
        let rkey = if good_key { h.b_mem.rkey } else { h.b_mem.rkey ^ 0x55 };
        let opcode = Opcode(op);
        let ib = IbRepr {
            bth: BthRepr { opcode, dest_qp: h.qb, psn: (base + psn_off) & 0xFF_FFFF, pad_count: pad_for(plen), ..Default::default() },
            reth: Some(RethRepr { va, rkey, dma_len: len }),
            deth: Some(rocelink_wire::ib::DethRepr { qkey: 0x1111_1111, src_qp: 5 }),
            payload_len: plen,
            ..Default::default()
        };
        let mut b = vec![0u8; ib.buffer_len()];
        ib.emit(&mut b, &vec![0xEE; plen]);
        if b.len() >= 16 {
            icrc::fill_socket(h.pair.a.config().local, h.pair.b.config().local, &mut b).unwrap();
        }
        h.pair.inject(Dir::AtoB, b);
        run(&mut h);
        let mem = h.b_bytes(0, REGION);
        if let Some(first) = mem.iter().position(|&x| x != 0) {
            let last = mem.iter().rposition(|&x| x != 0).unwrap();
            prop_assert!(good_key && opcode.is_write(), "bytes written without a valid WRITE");
            prop_assert!(first as u64 >= va && (last as u64) < va.saturating_add(u64::from(len)), "write outside [va, va+len)");
        }
        prop_assert!(h.b_recv_bytes(0, REGION).iter().skip(4 * 8192).all(|&x| x == 0), "RECV buffers overflowed");
    }
}

/// A datagram from `src` to B.
fn from(h: &mut Harness, src: std::net::SocketAddr, b: &mut [u8]) {
    icrc::fill_socket(src, h.pair.b.config().local, b).unwrap();
    let t = std::time::Instant::now();
    h.pair.b.handle_datagram(
        t,
        Datagram {
            src,
            dst: h.pair.b.config().local,
            ip_header: None,
            payload: b,
        },
    );
}

fn write_only(qp: u32, psn: u32, rkey: u32, opcode: Opcode, bytes: &[u8]) -> Vec<u8> {
    let ib = IbRepr {
        bth: BthRepr {
            opcode,
            dest_qp: qp,
            psn,
            ..Default::default()
        },
        reth: Some(RethRepr {
            va: 0,
            rkey,
            dma_len: bytes.len() as u32,
        }),
        payload_len: bytes.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, bytes);
    b
}

#[test]
fn once_the_peer_was_heard_another_port_of_its_address_is_refused() {
    for t in [QpType::Rc, QpType::Uc] {
        let mut h = Harness::new(t, Mtu::M1024, LinkConfig::default(), 26);
        let base = next_psn(&mut h);
        run(&mut h); // the peer's zero-length WRITE arrived: its port (4791) is pinned
        let op = if t == QpType::Rc {
            Opcode::RC_RDMA_WRITE_ONLY
        } else {
            Opcode::UC_RDMA_WRITE_ONLY
        };
        let mut b = write_only(h.qb, base, h.b_mem.rkey, op, &[9; 4]);
        // the peer's IP, the expected PSN, a valid ICRC: only the source port differs
        from(&mut h, addr("10.0.0.1:50000"), &mut b);
        let st = h.pair.b.qp_stats(h.qb).unwrap();
        assert_eq!(st.foreign_port, 1, "{t:?}");
        assert!(untouched(&h), "{t:?}");
        // the same packet from the peer's port is taken
        from(&mut h, addr("10.0.0.1:4791"), &mut b);
        assert_eq!(h.b_bytes(0, 4), vec![9; 4], "{t:?}");
    }
}

#[test]
fn a_fatal_nak_for_nothing_outstanding_does_not_end_the_qp() {
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 27);
    next_psn(&mut h);
    // a remote-access NAK as the responder would send it, for a PSN A never sent
    let mut nak = |psn: u32| {
        let ib = IbRepr {
            bth: BthRepr {
                opcode: Opcode::RC_ACKNOWLEDGE,
                dest_qp: h.qa,
                psn,
                ..Default::default()
            },
            aeth: Some(rocelink_wire::ib::AethRepr::nak(
                rocelink_wire::ib::ext::NakCode::RemoteAccessError,
                0,
            )),
            ..Default::default()
        };
        let mut b = vec![0u8; ib.buffer_len()];
        ib.emit(&mut b, &[]);
        let (src, dst) = (h.pair.b.config().local, h.pair.a.config().local);
        icrc::fill_socket(src, dst, &mut b).unwrap();
        h.pair.a.handle_datagram(
            std::time::Instant::now(),
            Datagram {
                src,
                dst,
                ip_header: None,
                payload: &b,
            },
        );
        h.pair.a.qp_stats(h.qa).unwrap().psn_refused
    };
    for (i, psn) in [0u32, 0x7F_FFFF, 0xFF_FFFF].into_iter().enumerate() {
        assert_eq!(nak(psn), i as u64 + 1);
    }
    assert_eq!(h.pair.a.qp_state(h.qa), Some(QpState::Rts));
    // and the QP still works
    let sge = h.sge_a(0, 8);
    h.pair
        .a
        .post_send(
            h.qa,
            SendWr {
                wr_id: 5,
                op: SendOp::Write {
                    va: 0,
                    rkey: h.b_mem.rkey,
                },
                sg_list: sge.into(),
                signaled: true,
                solicited: false,
                marks: 0,
            },
        )
        .unwrap();
    let done = h.pair.run_until(Duration::from_secs(1), |p| {
        p.a.poll_completion()
            .is_some_and(|w| w.wr_id == 5 && w.status == WcStatus::Success)
    });
    assert!(done);
}

#[test]
fn a_uc_psn_window_refuses_replays_and_far_jumps() {
    let link = LinkConfig::default();
    let (aa, ba) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
    let mut a = Endpoint::new(EndpointConfig::new(aa));
    let mut b = Endpoint::new(EndpointConfig::new(ba));
    let mem = b.register_mr(
        vec![0u8; 64].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let qa = a.create_qp(QpInit::new(QpType::Uc)).unwrap();
    let qb = b
        .create_qp(QpInit {
            psn_window: 8,
            ..QpInit::new(QpType::Uc)
        })
        .unwrap();
    sim::connect(&mut a, qa, &mut b, qb, Mtu::M1024, 0, 0, 0).unwrap();
    let _ = link;
    let mut put = |psn: u32, byte: u8| {
        let mut d = write_only(qb, psn, mem.rkey, Opcode::UC_RDMA_WRITE_ONLY, &[byte; 4]);
        icrc::fill_socket(aa, ba, &mut d).unwrap();
        b.handle_datagram(
            std::time::Instant::now(),
            Datagram {
                src: aa,
                dst: ba,
                ip_header: None,
                payload: &d,
            },
        );
        (
            b.mr(mem.lkey).unwrap().bytes()[0],
            b.qp_stats(qb).unwrap().psn_refused,
        )
    };
    assert_eq!(put(0, 1), (1, 0), "in sequence");
    assert_eq!(put(9, 2), (1, 1), "8 ahead of 1: outside a window of 8");
    assert_eq!(put(0, 3), (1, 2), "a replay");
    assert_eq!(put(5, 4), (4, 2), "4 lost: a gap inside the window");
    assert_eq!(put(6, 5), (5, 2));
}
