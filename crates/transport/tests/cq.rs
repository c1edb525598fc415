//! Completion queues as objects: two roles on one endpoint each poll only their own CQ and
//! their own QP's events; the default CQ keeps the single-role API working. And regions
//! over memory the caller provides.
#![allow(clippy::unwrap_used)]

use rocelink_transport::sim::{LinkConfig, Pair, connect};
use rocelink_transport::*;
use std::time::{Duration, Instant};

struct Two {
    pair: Pair,
    /// A's QPs (default CQ), B's QPs and their CQs.
    qa: [u32; 2],
    qb: [u32; 2],
    cq: [CqId; 2],
    b_mem: MrKeys,
    a_src: MrKeys,
}

fn two_roles() -> Two {
    let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
    let mut b = Endpoint::new(EndpointConfig::new("10.0.0.2:4791".parse().unwrap()));
    let a_src = a.register_mr(vec![5u8; 8192].into_boxed_slice(), 0, Access::NONE);
    let b_mem = b.register_mr(
        vec![0u8; 1 << 16].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let cq = [b.create_cq(), b.create_cq()];
    assert_ne!(cq[0], cq[1]);
    let mut qa = [0; 2];
    let mut qb = [0; 2];
    for k in 0..2 {
        qa[k] = a.create_qp(QpInit::new(QpType::Uc)).unwrap();
        qb[k] = b
            .create_qp(QpInit {
                report_writes: true,
                send_cq: cq[k],
                recv_cq: cq[k],
                ..QpInit::new(QpType::Uc)
            })
            .unwrap();
        connect(&mut a, qa[k], &mut b, qb[k], Mtu::M1024, 10, 20, 0).unwrap();
    }
    Two {
        pair: Pair::new(a, b, LinkConfig::default(), 3, Instant::now()),
        qa,
        qb,
        cq,
        b_mem,
        a_src,
    }
}

fn write_imm(t: &mut Two, k: usize, va: u64, imm: u32) {
    let wr = SendWr {
        wr_id: 100 + k as u64,
        op: SendOp::WriteImm {
            va,
            rkey: t.b_mem.rkey,
            imm,
        },
        sg_list: Sge {
            lkey: t.a_src.lkey,
            va: 0,
            len: 3000,
        }
        .into(),
        signaled: true,
        solicited: false,
        marks: 0,
    };
    t.pair.a.post_send(t.qa[k], wr).unwrap();
}

#[test]
fn each_role_polls_only_its_own_cq_and_events() {
    let mut t = two_roles();
    for k in 0..2 {
        t.pair
            .b
            .post_recv(t.qb[k], RecvWr::new(k as u64, Sge::discard(0)))
            .unwrap();
    }
    write_imm(&mut t, 0, 0, 0xA0);
    write_imm(&mut t, 1, 8192, 0xB1);
    // both messages are delivered and acknowledged well within this simulated time
    t.pair.run_until(Duration::from_millis(100), |_| false);
    // nothing of B's QPs on B's default CQ; each CQ holds exactly its QP's completion
    assert!(t.pair.b.poll_completion().is_none());
    for k in 0..2 {
        let wc = t.pair.b.poll_cq(t.cq[k]).unwrap();
        assert_eq!((wc.qpn, wc.imm), (t.qb[k], Some([0xA0, 0xB1][k])));
        assert!(t.pair.b.poll_cq(t.cq[k]).is_none());
    }
    // A's QPs use A's default CQ: both send completions are there
    let mut ids: Vec<u64> = std::iter::from_fn(|| t.pair.a.poll_completion())
        .map(|w| w.wr_id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![100, 101]);
    // Placed events: QP 1's stay queued while QP 0's are taken, and the other way round
    let mut placed = [0u64; 2];
    for (k, q) in [(1usize, t.qb[1]), (0, t.qb[0])] {
        while let Some(e) = t.pair.b.poll_qp_event(q) {
            assert_eq!(e.qpn(), q);
            if let Event::Placed { len, .. } = e {
                placed[k] += u64::from(len);
            }
        }
    }
    assert_eq!(placed, [3000, 3000]);
    assert!(t.pair.b.poll_event().is_none());
}

#[test]
fn a_qp_needs_existing_cqs() {
    let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
    let mut other = Endpoint::new(EndpointConfig::new("10.0.0.3:4791".parse().unwrap()));
    other.create_cq();
    let foreign = other.create_cq();
    assert!(
        a.create_qp(QpInit {
            recv_cq: foreign,
            ..QpInit::new(QpType::Rc)
        })
        .is_err()
    );
    assert!(
        a.create_qp_numbered(
            0x55,
            QpInit {
                send_cq: foreign,
                ..QpInit::new(QpType::Rc)
            }
        )
        .is_err()
    );
    assert!(a.poll_cq(foreign).is_none());
    let mine = a.create_cq();
    assert!(
        a.create_qp(QpInit {
            send_cq: mine,
            recv_cq: CqId::DEFAULT,
            ..QpInit::new(QpType::Rc)
        })
        .is_ok()
    );
}

#[test]
fn flushed_wrs_go_to_their_own_cqs() {
    let mut b = Endpoint::new(EndpointConfig::new("10.0.0.2:4791".parse().unwrap()));
    let (scq, rcq) = (b.create_cq(), b.create_cq());
    let mem = b.register_mr(vec![0u8; 64].into_boxed_slice(), 0, Access::LOCAL_WRITE);
    let q = b
        .create_qp(QpInit {
            send_cq: scq,
            recv_cq: rcq,
            ..QpInit::new(QpType::Rc)
        })
        .unwrap();
    b.modify_qp(q, Modify::Init { qkey: 0 }).unwrap();
    for i in 0..3 {
        b.post_recv(
            q,
            RecvWr::new(
                i,
                Sge {
                    lkey: mem.lkey,
                    va: 0,
                    len: 64,
                },
            ),
        )
        .unwrap();
    }
    b.modify_qp(q, Modify::Error).unwrap();
    let flushed: Vec<_> = std::iter::from_fn(|| b.poll_cq(rcq)).collect();
    assert_eq!(flushed.len(), 3);
    assert!(flushed.iter().all(|w| w.status == WcStatus::WrFlushError));
    assert!(b.poll_cq(scq).is_none() && b.poll_completion().is_none());
    assert!(matches!(b.poll_qp_event(q), Some(Event::QpError { qpn, .. }) if qpn == q));
}

/// Region memory the caller provides: any `AsRef<[u8]> + AsMut<[u8]> + Send` buffer,
/// given back with what was written when the region is deregistered.
#[test]
fn regions_over_caller_memory() {
    /// An application's own buffer type.
    struct AppBuf {
        data: Vec<u8>,
    }
    impl AsRef<[u8]> for AppBuf {
        fn as_ref(&self) -> &[u8] {
            &self.data
        }
    }
    impl AsMut<[u8]> for AppBuf {
        fn as_mut(&mut self) -> &mut [u8] {
            &mut self.data
        }
    }
    let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
    let mut b = Endpoint::new(EndpointConfig::new("10.0.0.2:4791".parse().unwrap()));
    let src = a.register_mr(vec![9u8; 6000], 0x5000, Access::NONE);
    let dst = b.register_mr(
        AppBuf {
            data: vec![0; 8192],
        },
        0x10_0000,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    assert_eq!(dst.len, 8192);
    let (qa, qb) = (
        a.create_qp(QpInit::new(QpType::Rc)).unwrap(),
        b.create_qp(QpInit::new(QpType::Rc)).unwrap(),
    );
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 1, 2, 0).unwrap();
    let mut pair = Pair::new(a, b, LinkConfig::default(), 9, Instant::now());
    for (va, ok) in [(0x10_0000 + 2000, true), (0x10_0000 + 4000, false)] {
        let wr = SendWr {
            wr_id: va,
            op: SendOp::Write { va, rkey: dst.rkey },
            sg_list: Sge {
                lkey: src.lkey,
                va: 0x5000,
                len: if ok { 6000 } else { 4193 }, // the second ends 1 byte past the region
            }
            .into(),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        pair.a.post_send(qa, wr).unwrap();
        pair.run_until(Duration::from_secs(1), |p| p.a.peek_completion().is_some());
        let wc = pair.a.poll_completion().unwrap();
        assert_eq!(wc.status == WcStatus::Success, ok, "{wc:?}");
        if !ok {
            break;
        }
    }
    let mem = pair.b.deregister_mr(dst.lkey).unwrap();
    let bytes = mem.bytes();
    assert_eq!(&bytes[..2000], &[0u8; 2000][..]);
    assert_eq!(&bytes[2000..8000], &[9u8; 6000][..]);
    assert_eq!(
        &bytes[8000..],
        &[0u8; 192][..],
        "the refused WRITE wrote nothing"
    );
    assert!(pair.b.mr(dst.lkey).is_err());
}
