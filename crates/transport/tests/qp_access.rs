//! A QP's own access flags (verbs' `qp_access_flags`): its peer's WRITE, READ and atomic
//! each need the QP's right as well as the region's. A request the QP does not allow is
//! refused before a byte moves — RC with a remote access error, UC by dropping the
//! message — however much the region allows.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_transport::sim::LinkConfig;
use rocelink_transport::*;
use std::time::Duration;

/// B's region for every kind of remote access (VA 0x9000_0000, 4 KiB of zeros).
fn open_region(h: &mut Harness) -> MrKeys {
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    h.pair.b.register_mr(
        vec![0u8; 4096].into_boxed_slice(),
        0x9000_0000,
        all | Access::REMOTE_ATOMIC,
    )
}

/// Post `op` (8 bytes of A's region) signaled, run until it completes; its status.
fn complete(h: &mut Harness, op: SendOp) -> WcStatus {
    let wr = SendWr {
        wr_id: 1,
        op,
        sg_list: h.sge_a(0, 8).into(),
        signaled: true,
        solicited: false,
        marks: 0,
    };
    h.pair.a.post_send(h.qa, wr).unwrap();
    let mut got = None;
    let ok = h.pair.run_until(Duration::from_secs(60), |p| {
        got = got.or_else(|| p.a.poll_completion());
        got.is_some()
    });
    assert!(ok, "no completion");
    got.unwrap().status
}

#[test]
fn each_remote_operation_needs_the_qps_right_as_well_as_the_regions() {
    let ops = |r: MrKeys| {
        [
            (
                Access::REMOTE_WRITE,
                SendOp::Write {
                    va: r.va,
                    rkey: r.rkey,
                },
            ),
            (
                Access::REMOTE_READ,
                SendOp::Read {
                    va: r.va,
                    rkey: r.rkey,
                },
            ),
            (
                Access::REMOTE_ATOMIC,
                SendOp::FetchAdd {
                    va: r.va,
                    rkey: r.rkey,
                    add: 1,
                },
            ),
        ]
    };
    for seed in 0..3 {
        // the QP allows everything but this: refused, nothing of the region changed
        let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), seed as u64);
        let r = open_region(&mut h);
        h.fill_a(0, 8, 7);
        let (right, op) = ops(r)[seed];
        let all = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        h.pair
            .b
            .set_remote_access(h.qb, all.without(right))
            .unwrap();
        assert_eq!(complete(&mut h, op), WcStatus::RemoteAccessError, "{op:?}");
        let b = h.pair.b.mr(r.lkey).unwrap().bytes()[..8].to_vec();
        assert_eq!(b, [0u8; 8], "{op:?} changed the region");
        assert_eq!(h.pair.b.qp_stats(h.qb).unwrap().access_violations, 1);
        assert_eq!(h.pair.b.qp_state(h.qb), Some(QpState::Error));

        // with the right, the same request goes through
        let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), seed as u64);
        let r = open_region(&mut h);
        h.pair.b.set_remote_access(h.qb, right).unwrap();
        let op = ops(r)[seed].1;
        assert_eq!(complete(&mut h, op), WcStatus::Success, "{op:?}");
        assert_eq!(h.pair.b.qp_stats(h.qb).unwrap().access_violations, 0);
    }
}

#[test]
fn a_uc_qp_without_the_write_right_drops_the_message() {
    let mut h = Harness::new(QpType::Uc, Mtu::M1024, LinkConfig::default(), 9);
    let r = open_region(&mut h);
    h.fill_a(0, 8, 3);
    h.pair.b.set_remote_access(h.qb, Access::NONE).unwrap();
    let op = SendOp::Write {
        va: r.va,
        rkey: r.rkey,
    };
    // UC completes at the sender whatever the responder did
    assert_eq!(complete(&mut h, op), WcStatus::Success);
    let ok = h.pair.run_until(Duration::from_secs(5), |p| {
        p.b.qp_stats(h.qb).unwrap().access_violations == 1
    });
    assert!(ok, "{:?}", h.pair.b.qp_stats(h.qb));
    assert_eq!(h.pair.b.mr(r.lkey).unwrap().bytes()[..8], [0u8; 8]);
    // the right given back: the next message lands
    h.pair
        .b
        .set_remote_access(h.qb, Access::REMOTE_WRITE)
        .unwrap();
    assert_eq!(complete(&mut h, op), WcStatus::Success);
    let sent = h.a_bytes(0, 8);
    let ok = h.pair.run_until(Duration::from_secs(5), |p| {
        p.b.mr(r.lkey).unwrap().bytes()[..8] == sent[..]
    });
    assert!(ok, "the WRITE did not land");
}
