//! RC atomics: compare-and-swap and fetch-and-add on a peer's 8-byte word, each run once
//! however often its request arrives (a lost answer, a duplicate), the word as it was
//! landing locally; and the refusals an RNIC gives (no atomic right, a misaligned word, a
//! local buffer that is not one word, a UC QP).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_transport::sim::LinkConfig;
use rocelink_transport::*;
use std::collections::BTreeSet;
use std::time::Duration;

/// A region of B's that allows atomics (VA 0x9000_0000, 4 KiB of zeros).
fn atomic_region(h: &mut Harness, access: Access) -> MrKeys {
    h.pair
        .b
        .register_mr(vec![0u8; 4096].into_boxed_slice(), 0x9000_0000, access)
}

fn word_of_b(h: &Harness, keys: MrKeys, off: usize) -> u64 {
    let b = &h.pair.b.mr(keys.lkey).unwrap().bytes()[off..off + 8];
    u64::from_ne_bytes(b.try_into().unwrap())
}

fn word_of_a(h: &Harness, off: usize) -> u64 {
    u64::from_ne_bytes(h.a_bytes(off, 8).try_into().unwrap())
}

fn atomic_wr(h: &Harness, id: u64, op: SendOp) -> SendWr {
    SendWr {
        wr_id: id,
        op,
        sg_list: h.sge_a(id as usize * 8 % 4096, 8).into(),
        signaled: true,
        solicited: false,
        marks: 0,
    }
}

/// Run until `n` completions came; them, in order.
fn completions(h: &mut Harness, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let ok = h.pair.run_until(Duration::from_secs(60), |p| {
        while let Some(wc) = p.a.poll_completion() {
            got.push(wc);
        }
        got.len() >= n
    });
    assert!(ok, "{} of {n} completions: {got:?}", got.len());
    got
}

#[test]
fn compare_and_swap_and_fetch_and_add_answer_the_word_as_it_was() {
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 1);
    let r = atomic_region(&mut h, Access::REMOTE_ATOMIC | Access::LOCAL_WRITE);
    let (va, rkey) = (r.va + 64, r.rkey);
    let ops = [
        SendOp::FetchAdd { va, rkey, add: 5 },
        // 5 is there: becomes 100
        SendOp::CompareSwap {
            va,
            rkey,
            compare: 5,
            swap: 100,
        },
        // 7 is not: stays 100
        SendOp::CompareSwap {
            va,
            rkey,
            compare: 7,
            swap: 1,
        },
        // wraps past 2^64
        SendOp::FetchAdd {
            va,
            rkey,
            add: u64::MAX,
        },
    ];
    for (i, op) in ops.iter().enumerate() {
        let wr = atomic_wr(&h, i as u64, *op);
        h.pair.a.post_send(h.qa, wr).unwrap();
    }
    let wcs = completions(&mut h, ops.len());
    for (i, wc) in wcs.iter().enumerate() {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        assert_eq!(wc.wr_id, i as u64);
        assert_eq!(wc.byte_len, 8);
        let want = if i % 3 == 0 {
            WcOpcode::FetchAdd
        } else {
            WcOpcode::CompareSwap
        };
        assert_eq!(wc.opcode, want);
    }
    let before: Vec<u64> = (0..4).map(|i| word_of_a(&h, i * 8)).collect();
    assert_eq!(before, [0, 5, 100, 100], "each the word as it was");
    assert_eq!(word_of_b(&h, r, 64), 99, "100 + (2^64 - 1)");
}

#[test]
fn each_atomic_runs_once_over_a_lossy_duplicating_link() {
    // 300 fetch-and-adds of 1 on one word, 16 in flight, over a link that loses, repeats
    // and reorders: duplicates and retransmissions are answered from the history, never
    // run again — the word ends at 300 and the values returned are 0..300, each once
    for seed in 1..=4 {
        let link = LinkConfig {
            loss: 0.08,
            duplicate: 0.08,
            reorder: 0.05,
            ..LinkConfig::default()
        };
        let mut h = Harness::new(QpType::Rc, Mtu::M1024, link, seed);
        let r = atomic_region(&mut h, Access::REMOTE_ATOMIC);
        let total = 300u64;
        let wr = |h: &Harness, i: u64| {
            let op = SendOp::FetchAdd {
                va: r.va,
                rkey: r.rkey,
                add: 1,
            };
            atomic_wr(h, i, op)
        };
        for i in 0..16 {
            let w = wr(&h, i);
            h.pair.a.post_send(h.qa, w).unwrap();
        }
        let (mut posted, mut seen) = (16u64, BTreeSet::new());
        let qa = h.qa;
        let wrs: Vec<SendWr> = (0..total).map(|i| wr(&h, i)).collect();
        let a_key = h.a_mem.lkey;
        let ok = h.pair.run_until(Duration::from_secs(600), |p| {
            while let Some(wc) = p.a.poll_completion() {
                assert_eq!(wc.status, WcStatus::Success, "seed {seed}: {wc:?}");
                let off = (wc.wr_id as usize * 8) % 4096;
                let b = &p.a.mr(a_key).unwrap().bytes()[off..off + 8];
                assert!(seen.insert(u64::from_ne_bytes(b.try_into().unwrap())));
                if posted < total {
                    p.a.post_send(qa, wrs[posted as usize]).unwrap();
                    posted += 1;
                }
            }
            seen.len() as u64 >= total
        });
        assert!(ok, "seed {seed}: {} of {total}", seen.len());
        assert_eq!(word_of_b(&h, r, 0), total, "seed {seed}: each ran once");
        assert_eq!(seen, (0..total).collect::<BTreeSet<_>>(), "seed {seed}");
        let (qa, qb) = (
            h.pair.a.qp_stats(h.qa).unwrap(),
            h.pair.b.qp_stats(h.qb).unwrap(),
        );
        assert!(
            qb.duplicates > 0 || qa.retransmissions > 0,
            "seed {seed}: the link repeated nothing: {qa:?} {qb:?}"
        );
    }
}

#[test]
fn atomics_are_refused_as_an_rnic_refuses_them() {
    // a region without the atomic right: remote access error, the QP in ERROR
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 2);
    let r = atomic_region(&mut h, Access::REMOTE_READ | Access::REMOTE_WRITE);
    let op = SendOp::FetchAdd {
        va: r.va,
        rkey: r.rkey,
        add: 1,
    };
    let wr = atomic_wr(&h, 0, op);
    h.pair.a.post_send(h.qa, wr).unwrap();
    let wc = completions(&mut h, 1);
    assert_eq!(wc[0].status, WcStatus::RemoteAccessError);
    assert_eq!(word_of_b(&h, r, 0), 0, "nothing ran");
    assert_eq!(h.pair.b.qp_stats(h.qb).unwrap().access_violations, 1);

    // a word off the 8-byte grid: invalid request
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 3);
    let r = atomic_region(&mut h, Access::REMOTE_ATOMIC);
    let op = SendOp::CompareSwap {
        va: r.va + 4,
        rkey: r.rkey,
        compare: 0,
        swap: 9,
    };
    let wr = atomic_wr(&h, 0, op);
    h.pair.a.post_send(h.qa, wr).unwrap();
    let wc = completions(&mut h, 1);
    assert_eq!(wc[0].status, WcStatus::RemoteInvalidRequest);
    assert_eq!(word_of_b(&h, r, 0), 0);

    // a local buffer that is not one word, and a UC QP: refused when posted
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 4);
    let r = atomic_region(&mut h, Access::REMOTE_ATOMIC);
    let op = SendOp::FetchAdd {
        va: r.va,
        rkey: r.rkey,
        add: 1,
    };
    let mut wr = atomic_wr(&h, 0, op);
    wr.sg_list = h.sge_a(0, 16).into();
    assert!(matches!(
        h.pair.a.post_send(h.qa, wr),
        Err(QpError::InvalidAttr(_))
    ));
    let mut u = Harness::new(QpType::Uc, Mtu::M1024, LinkConfig::default(), 5);
    let wr = atomic_wr(&u, 0, op);
    assert_eq!(u.pair.a.post_send(u.qa, wr), Err(QpError::UnsupportedOp));
    let _ = &mut u;
}
