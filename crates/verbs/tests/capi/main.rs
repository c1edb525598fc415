//! Errors as an RNIC reports them, and abuse that must not crash, driven through the C API
//! in this process (two devices on two free loopback addresses): a WRITE to a bad R_Key,
//! retries and RNR retries spent, posts in the wrong state, bad arguments of every kind,
//! 1000 QPs, 1 GiB registered, a QP destroyed with work outstanding, fork() after
//! registration, a program that exits without destroying anything.
//!
//! Its own harness: `ROCELINK_VERBS` must be set before any thread runs (the library reads
//! it once), and the cases run one after another.
#![allow(clippy::unwrap_used)]

mod verbs;

use rocelink_verbs::abi::*;
use rocelink_verbs::api::{
    cq::*, cq_make::*, device::*, events::*, memory::*, qp::*, qp_make::*, query::*, srq::*,
};
use rocelink_verbs::objects::{self, Kind};
use std::net::UdpSocket;
use std::time::{Duration, Instant};
use verbs::*;

const WAIT: Duration = Duration::from_secs(10);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child-exits-without-cleanup") {
        return child_exits_without_cleanup(&args[2]);
    }
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    // SAFETY: no other thread exists yet (this is the test's own main).
    unsafe { std::env::set_var("ROCELINK_VERBS", format!("{},{}", ips[0], ips[1])) };
    let cases: &[(&str, fn())] = &[
        (
            "a_write_to_a_bad_rkey_fails_remotely_and_flushes_the_rest",
            bad_rkey,
        ),
        ("retries_spent_give_retry_exceeded", retries_spent),
        ("rnr_retries_spent_give_rnr_retry_exceeded", rnr_spent),
        (
            "posts_in_the_wrong_state_fail_as_rxe_fails_them",
            wrong_state,
        ),
        ("bad_arguments_get_errors_never_a_crash", bad_arguments),
        ("a_thousand_qps_come_and_go_without_a_leak", thousand_qps),
        ("a_gibibyte_registered_takes_a_write_at_its_end", gibibyte),
        (
            "a_qp_destroyed_with_work_outstanding_stops_sending",
            destroy_busy_qp,
        ),
        (
            "a_child_after_fork_cannot_use_the_parents_device",
            fork_after_registration,
        ),
        (
            "a_program_that_exits_without_cleanup_sends_nothing_after",
            exit_without_cleanup,
        ),
        ("completion_channels_deliver_events", channel_events),
        ("a_qp_reaches_only_regions_of_its_pd", other_pd),
        (
            "asynchronous_events_name_the_qp_or_srq_they_are_about",
            async_events,
        ),
    ];
    let filter = args.iter().skip(1).find(|a| !a.starts_with('-'));
    let mut failed = 0;
    for (name, f) in cases {
        if filter.is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let r = std::panic::catch_unwind(f);
        println!(
            "test {name} ... {}",
            if r.is_ok() { "ok" } else { "FAILED" }
        );
        failed += usize::from(r.is_err());
    }
    assert_eq!(failed, 0, "{failed} cases failed");
}

/// Two connected RC QPs, one on each device.
fn rc_pair(a: &Side, b: &Side, pa: Path, pb: Path) -> (*mut ibv_qp, *mut ibv_qp) {
    let (qa, qb) = (a.qp(IBV_QPT_RC), b.qp(IBV_QPT_RC));
    assert_eq!(connect(qa, IBV_QPT_RC, b.gid, qpn(qb), pa), 0);
    assert_eq!(connect(qb, IBV_QPT_RC, a.gid, qpn(qa), pb), 0);
    (qa, qb)
}

fn bad_rkey() {
    let (a, b) = (Side::open(0), Side::open(1));
    let (qa, qb) = rc_pair(&a, &b, PATIENT, PATIENT);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 64,
        lkey: a.lkey(),
    };
    let mut w1 = send_wr(1, IBV_WR_RDMA_WRITE, &mut sge, b.addr(), b.rkey() ^ 0x100);
    let mut sge2 = sge;
    let mut w2 = send_wr(2, IBV_WR_RDMA_WRITE, &mut sge2, b.addr(), b.rkey());
    w1.next = &mut w2;
    assert_eq!(post_send(qa, &mut w1), (0, None));
    let wcs = a.completions(2, WAIT);
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(1, IBV_WC_REM_ACCESS_ERR), (2, IBV_WC_WR_FLUSH_ERR)]);
    assert_eq!(state(qa), IBV_QPS_ERR);
    // nothing was written at B
    assert!(b.buf[..64].iter().all(|&x| x == 0));
    destroy(qa);
    destroy(qb);
    a.close();
    b.close();
}

fn retries_spent() {
    let (a, b) = (Side::open(0), Side::open(1));
    // ~1 ms timeouts, 2 retries; B's QP is gone, so nothing answers
    let fast = Path {
        timeout: 8,
        retry_cnt: 2,
        ..PATIENT
    };
    let (qa, qb) = rc_pair(&a, &b, fast, PATIENT);
    destroy(qb);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 8,
        lkey: a.lkey(),
    };
    let mut w = send_wr(7, IBV_WR_RDMA_WRITE, &mut sge, b.addr(), b.rkey());
    assert_eq!(post_send(qa, &mut w).0, 0);
    let wcs = a.completions(1, WAIT);
    assert_eq!(
        wcs.first().map(|w| (w.wr_id, w.status)),
        Some((7, IBV_WC_RETRY_EXC_ERR))
    );
    assert_eq!(state(qa), IBV_QPS_ERR);
    destroy(qa);
    a.close();
    b.close();
}

fn rnr_spent() {
    let (a, b) = (Side::open(0), Side::open(1));
    let impatient = Path {
        rnr_retry: 1,
        ..PATIENT
    };
    // B answers with RNR NAKs of 0.01 ms (timer code 1) and never posts a receive
    let b_path = Path {
        min_rnr_timer: 1,
        ..PATIENT
    };
    let (qa, qb) = rc_pair(&a, &b, impatient, b_path);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 8,
        lkey: a.lkey(),
    };
    let mut w = send_wr(9, IBV_WR_SEND, &mut sge, 0, 0);
    assert_eq!(post_send(qa, &mut w).0, 0);
    let end = Instant::now() + WAIT;
    let mut wcs = Vec::new();
    // B's thread answers; A polls
    while wcs.is_empty() && Instant::now() < end {
        wcs = a.completions(1, Duration::from_millis(50));
    }
    assert_eq!(
        wcs.first().map(|w| (w.wr_id, w.status)),
        Some((9, IBV_WC_RNR_RETRY_EXC_ERR))
    );
    destroy(qa);
    destroy(qb);
    a.close();
    b.close();
}

fn wrong_state() {
    let (a, b) = (Side::open(0), Side::open(1));
    let qa = a.qp(IBV_QPT_RC);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 8,
        lkey: a.lkey(),
    };
    let mut w = send_wr(3, IBV_WR_SEND, &mut sge, 0, 0);
    // RESET: sends and receives refused, the WR returned
    assert_eq!(post_send(qa, &mut w), (libc::EINVAL, Some(3)));
    let mut rsge = sge;
    let mut r = recv_wr(4, &mut rsge);
    assert_eq!(post_recv(qa, &mut r), libc::EINVAL);
    // INIT: receives go in, sends do not
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        port_num: 1,
        qp_access_flags: ALL as u32,
        ..Default::default()
    };
    let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    // SAFETY: a live QP and an initialised attribute.
    assert_eq!(unsafe { ibv_modify_qp(qa, &mut attr, mask) }, 0);
    assert_eq!(post_recv(qa, &mut r), 0);
    assert_eq!(post_send(qa, &mut w), (libc::EINVAL, Some(3)));
    // RTS straight from INIT: refused, state unchanged
    attr.qp_state = IBV_QPS_RTS;
    // SAFETY: as above.
    assert_eq!(
        unsafe { ibv_modify_qp(qa, &mut attr, IBV_QP_STATE | IBV_QP_SQ_PSN) },
        libc::EINVAL
    );
    assert_eq!(state(qa), IBV_QPS_INIT);
    // ERROR: what is posted completes at once, flushed (the receive posted at INIT too)
    attr.qp_state = IBV_QPS_ERR;
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_modify_qp(qa, &mut attr, IBV_QP_STATE) }, 0);
    // SAFETY: a live QP: the field libibverbs keeps current.
    assert_eq!(unsafe { (*qa).state }, IBV_QPS_ERR);
    assert_eq!(post_send(qa, &mut w), (0, None));
    let wcs = a.completions(2, WAIT);
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(4, IBV_WC_WR_FLUSH_ERR), (3, IBV_WC_WR_FLUSH_ERR)]);
    destroy(qa);
    a.close();
    b.close();
}

fn bad_arguments() {
    let a = Side::open(0);
    // SAFETY: every call gets null, stale, made-up or out-of-range arguments on purpose:
    // the library must refuse them without following them.
    unsafe {
        assert!(ibv_open_device(std::ptr::null_mut()).is_null() && errno() == libc::ENODEV);
        assert!(ibv_open_device(0x1008 as *mut ibv_device).is_null());
        assert_eq!(ibv_close_device(std::ptr::null_mut()), libc::EINVAL);
        assert!(ibv_alloc_pd(0x1000 as *mut ibv_context).is_null() && errno() == libc::EINVAL);
        let mut port = ibv_port_attr::default();
        assert_eq!(ibv_query_port(a.ctx, 2, &mut port), libc::EINVAL);
        let mut gid = ibv_gid::default();
        assert_eq!(ibv_query_gid(a.ctx, 1, 1, &mut gid), -1);
        assert_eq!(ibv_query_gid(a.ctx, 1, 0, std::ptr::null_mut()), -1);
        // memory: unmapped, zero length, remote write without local write, on-demand paging
        assert!(ibv_reg_mr(a.pd, 0x10 as *mut _, 4096, ALL).is_null() && errno() == libc::EFAULT);
        assert!(
            ibv_reg_mr(a.pd, std::ptr::null_mut(), 4096, ALL).is_null() && errno() == libc::EINVAL
        );
        assert!(
            ibv_reg_mr(a.pd, 0x7000_0000 as *mut _, 4096, ALL).is_null() && errno() == libc::EFAULT
        );
        let mut x = [0u8; 64];
        assert!(ibv_reg_mr(a.pd, x.as_mut_ptr().cast(), 0, ALL).is_null());
        assert!(
            ibv_reg_mr(a.pd, x.as_mut_ptr().cast(), 64, IBV_ACCESS_REMOTE_WRITE).is_null()
                && errno() == libc::EINVAL
        );
        assert!(
            ibv_reg_mr(a.pd, x.as_mut_ptr().cast(), 64, IBV_ACCESS_ON_DEMAND).is_null()
                && errno() == libc::EOPNOTSUPP
        );
        // read-only memory cannot take writes
        let ro = c"read-only bytes of the test binary".as_ptr() as *mut libc::c_void;
        assert!(
            ibv_reg_mr(a.pd, ro, 16, IBV_ACCESS_LOCAL_WRITE).is_null() && errno() == libc::EFAULT
        );
        let ro_mr = ibv_reg_mr(a.pd, ro, 16, IBV_ACCESS_REMOTE_READ);
        assert!(!ro_mr.is_null(), "read-only memory may be read");
        assert_eq!(ibv_dereg_mr(ro_mr), 0);
        // an optional flag (relaxed ordering) is ignored
        let mr = ibv_reg_mr(a.pd, x.as_mut_ptr().cast(), 64, ALL | 0x0010_0000);
        assert!(!mr.is_null());
        assert_eq!(ibv_dealloc_pd(a.pd), libc::EBUSY, "a PD with regions");
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dereg_mr(mr), libc::EINVAL, "twice");
        // CQs
        assert!(ibv_create_cq(a.ctx, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0).is_null());
        assert!(ibv_create_cq(a.ctx, 16, std::ptr::null_mut(), std::ptr::null_mut(), 3).is_null());
        assert!(ibv_create_cq(a.ctx, 16, std::ptr::null_mut(), 0x40 as *mut _, 0).is_null());
        // QPs: too many SGEs, a foreign CQ, an unknown type, an SRQ
        let mut init = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: a.cq,
            recv_cq: a.cq,
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 9, // one more than the 8 a WR may have
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        assert!(ibv_create_qp(a.pd, &mut init).is_null() && errno() == libc::EINVAL);
        init.cap.max_send_sge = 1;
        init.qp_type = 8;
        assert!(ibv_create_qp(a.pd, &mut init).is_null() && errno() == libc::EOPNOTSUPP);
        init.qp_type = 77;
        assert!(ibv_create_qp(a.pd, &mut init).is_null() && errno() == libc::EINVAL);
        init.qp_type = IBV_QPT_RC;
        init.send_cq = 0x99 as *mut _;
        assert!(ibv_create_qp(a.pd, &mut init).is_null());
        assert!(ibv_create_qp(a.pd, std::ptr::null_mut()).is_null());
        // a QP: missing attributes, a foreign GID index, a bad MTU
        let qp = a.qp(IBV_QPT_RC);
        assert_eq!(ibv_destroy_cq(a.cq), libc::EBUSY, "a CQ with a QP");
        let mut attr = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            port_num: 1,
            ..Default::default()
        };
        assert_eq!(
            ibv_modify_qp(qp, &mut attr, IBV_QP_STATE | IBV_QP_PORT),
            libc::EINVAL
        );
        attr.port_num = 2;
        let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert_eq!(ibv_modify_qp(qp, &mut attr, m), libc::EINVAL);
        assert_eq!(ibv_modify_qp(qp, std::ptr::null_mut(), m), libc::EINVAL);
        let mut g = a.gid;
        g.raw[0] = 0;
        let p = Path { ..PATIENT };
        let qp2 = a.qp(IBV_QPT_RC);
        attr.port_num = 1;
        assert_eq!(ibv_modify_qp(qp2, &mut attr, m), 0);
        attr.qp_state = IBV_QPS_RTR;
        attr.path_mtu = 9;
        attr.ah_attr.is_global = 1;
        let rtr = IBV_QP_STATE
            | IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER;
        assert_eq!(
            ibv_modify_qp(qp2, &mut attr, rtr),
            libc::EINVAL,
            "MTU code 9"
        );
        attr.path_mtu = 3;
        attr.ah_attr.is_global = 0;
        assert_eq!(
            ibv_modify_qp(qp2, &mut attr, rtr),
            libc::EINVAL,
            "RoCE needs a GRH"
        );
        let _ = (g, p);
        // posting: too many SGEs, an unknown opcode, an atomic's wrong size, a UD send
        // without an AH
        let qb = a.qp(IBV_QPT_RC);
        assert_eq!(connect(qb, IBV_QPT_RC, a.gid, qpn(qb), PATIENT), 0);
        let mut sge = [ibv_sge {
            addr: a.addr(),
            length: 8,
            lkey: a.lkey(),
        }; 3];
        let mut w = send_wr(1, IBV_WR_SEND, &mut sge[0], 0, 0);
        w.num_sge = 3;
        assert_eq!(post_send(qb, &mut w), (libc::EINVAL, Some(1)));
        w.num_sge = -1;
        assert_eq!(post_send(qb, &mut w).0, libc::EINVAL);
        w.num_sge = 1;
        w.opcode = 99;
        assert_eq!(post_send(qb, &mut w).0, libc::EOPNOTSUPP);
        // IBV_WR_ATOMIC_FETCH_AND_ADD: its original value lands in one 8-byte word, no
        // more, no less
        w.opcode = 6;
        sge[0].length = 16;
        assert_eq!(
            post_send(qb, &mut w).0,
            libc::EINVAL,
            "an atomic of 16 bytes"
        );
        sge[0].length = 8;
        w.opcode = IBV_WR_SEND;
        w.send_flags = IBV_SEND_INLINE;
        sge[0].length = 65;
        assert_eq!(
            post_send(qb, &mut w).0,
            libc::EINVAL,
            "inline beyond max_inline_data"
        );
        let ud = a.qp(IBV_QPT_UD);
        assert_eq!(connect(ud, IBV_QPT_UD, a.gid, 0, PATIENT), 0);
        w.sg_list = &mut sge[1];
        w.send_flags = 0;
        assert_eq!(post_send(ud, &mut w).0, libc::EINVAL, "no AH");
        w.wr[0] = 0x1234;
        assert_eq!(post_send(ud, &mut w).0, libc::EINVAL, "a made-up AH");
        // the ops on a destroyed QP and CQ
        destroy(qb);
        // (the header's inline function would read the freed QP itself; the library's
        // own entry refuses it without following it)
        let mut bad = std::ptr::null_mut();
        assert_eq!(
            rocelink_verbs::api::post::post_send(qb, &mut w, &mut bad),
            libc::EINVAL
        );
        assert_eq!(ibv_destroy_qp(qb), libc::EINVAL);
        for q in [qp, qp2, ud] {
            destroy(q);
        }
        let mut wc = [ibv_wc::default(); 1];
        let cq = ibv_create_cq(a.ctx, 4, std::ptr::null_mut(), std::ptr::null_mut(), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(poll(a.cq, &mut wc), 0);
        assert_eq!(
            rocelink_verbs::api::cq::poll_cq(cq, 1, wc.as_mut_ptr()),
            -1,
            "a destroyed CQ"
        );
        // channels: busy while a CQ uses one
        let ch = ibv_create_comp_channel(a.ctx);
        let cq = ibv_create_cq(a.ctx, 4, std::ptr::null_mut(), ch, 0);
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EBUSY);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
        assert_eq!(ibv_req_notify_cq_on(a.cq), libc::EINVAL, "no channel");
    }
    a.close();
}

/// `ibv_req_notify_cq` through the ops table.
fn ibv_req_notify_cq_on(cq: *mut ibv_cq) -> i32 {
    // SAFETY: a live CQ's ops table.
    unsafe { ((*(*cq).context).ops.req_notify_cq.unwrap())(cq, 0) }
}

fn thousand_qps() {
    let (qps_before, cqs_before) = (objects::count(Kind::Qp), objects::count(Kind::Cq));
    let (a, b) = (Side::open(0), Side::open(1));
    let qps: Vec<_> = (0..1000).map(|_| a.qp(IBV_QPT_RC)).collect();
    let peer = b.qp(IBV_QPT_RC);
    // every one connected and usable: the last sends to B
    for &q in &qps {
        assert_eq!(connect(q, IBV_QPT_RC, b.gid, qpn(peer), PATIENT), 0);
    }
    assert_eq!(connect(peer, IBV_QPT_RC, a.gid, qpn(qps[999]), PATIENT), 0);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 16,
        lkey: a.lkey(),
    };
    let mut w = send_wr(5, IBV_WR_RDMA_WRITE, &mut sge, b.addr() + 4096, b.rkey());
    assert_eq!(post_send(qps[999], &mut w).0, 0);
    assert_eq!(
        a.completions(1, WAIT).first().map(|w| w.status),
        Some(IBV_WC_SUCCESS)
    );
    assert_eq!(objects::count(Kind::Qp), qps_before + 1001);
    for q in qps {
        destroy(q);
    }
    destroy(peer);
    a.close();
    b.close();
    assert_eq!(objects::count(Kind::Qp), qps_before);
    assert_eq!(objects::count(Kind::Cq), cqs_before);
    // the devices closed: their progress threads are gone
    assert_eq!(progress_threads(), 0);
}

/// Threads of this process named as a device's progress thread.
fn progress_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("rocelink") && c.contains("-prog"))
        .count()
}

fn gibibyte() {
    let (a, b) = (Side::open(0), Side::open(1));
    let len = 1usize << 30;
    // SAFETY: a fresh anonymous mapping, unmapped below after its deregistration.
    let big = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(big, libc::MAP_FAILED);
    // SAFETY: a live PD and the mapping above.
    let mr = unsafe { ibv_reg_mr(b.pd, big, len, ALL) };
    assert!(!mr.is_null(), "errno {}", errno());
    let (qa, qb) = rc_pair(&a, &b, PATIENT, PATIENT);
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut src = a.buf.clone();
    src[..4096].copy_from_slice(&pattern);
    // (A's registered buffer holds the pattern)
    // SAFETY: writing our own registered buffer, with nothing posted that reads it.
    unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), a.buf.as_ptr() as *mut u8, 4096) };
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 4096,
        lkey: a.lkey(),
    };
    let end = big as u64 + len as u64 - 4096;
    // SAFETY: a live MR.
    let rkey = unsafe { (*mr).rkey };
    let mut w = send_wr(1, IBV_WR_RDMA_WRITE, &mut sge, end, rkey);
    assert_eq!(post_send(qa, &mut w).0, 0);
    assert_eq!(
        a.completions(1, WAIT).first().map(|w| w.status),
        Some(IBV_WC_SUCCESS)
    );
    // SAFETY: the last page of the mapping, written by the WRITE that completed.
    let landed = unsafe { std::slice::from_raw_parts((big as *const u8).add(len - 4096), 4096) };
    assert_eq!(landed, &pattern[..]);
    // one byte past it is refused
    let mut w = send_wr(2, IBV_WR_RDMA_WRITE, &mut sge, end + 1, rkey);
    assert_eq!(post_send(qa, &mut w).0, 0);
    assert_eq!(
        a.completions(1, WAIT).first().map(|w| w.status),
        Some(IBV_WC_REM_ACCESS_ERR)
    );
    destroy(qa);
    destroy(qb);
    // SAFETY: the MR, then the mapping it covered.
    unsafe {
        assert_eq!(ibv_dereg_mr(mr), 0);
        libc::munmap(big, len);
    }
    a.close();
    b.close();
}

/// A peer that is a plain UDP socket on B's address: what arrives there.
fn quiet_for(sock: &UdpSocket, d: Duration) -> usize {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let end = Instant::now() + d;
    let mut n = 0;
    let mut buf = [0u8; 9000];
    while Instant::now() < end {
        if sock.recv(&mut buf).is_ok() {
            n += 1;
        }
    }
    n
}

fn destroy_busy_qp() {
    let a = Side::open(0);
    // B is a plain socket: it takes A's packets and never answers
    let b_ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let peer = UdpSocket::bind((b_ip, 4791)).unwrap();
    let gid = ibv_gid {
        raw: rocelink_verbs::devices::gid_of(b_ip),
    };
    let qa = a.qp(IBV_QPT_RC);
    let fast = Path {
        timeout: 10,
        ..PATIENT
    };
    assert_eq!(connect(qa, IBV_QPT_RC, gid, 0x42, fast), 0);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 60_000,
        lkey: a.lkey(),
    };
    for i in 0..32 {
        let mut w = send_wr(i, IBV_WR_RDMA_WRITE, &mut sge, 0x1000, 0x77);
        assert_eq!(post_send(qa, &mut w).0, 0);
    }
    assert!(
        quiet_for(&peer, Duration::from_millis(100)) > 0,
        "A was sending"
    );
    destroy(qa);
    // retransmissions (every ~4 ms) would show within 200 ms
    std::thread::sleep(Duration::from_millis(20));
    while quiet_for(&peer, Duration::from_millis(20)) > 0 {}
    assert_eq!(
        quiet_for(&peer, Duration::from_millis(300)),
        0,
        "sent after its QP was destroyed"
    );
    a.close();
}

fn fork_after_registration() {
    let (a, b) = (Side::open(0), Side::open(1));
    let (qa, qb) = rc_pair(&a, &b, PATIENT, PATIENT);
    // SAFETY: the child only calls into the library and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut wc = [ibv_wc::default(); 1];
        let mut sge = ibv_sge {
            addr: a.addr(),
            length: 8,
            lkey: a.lkey(),
        };
        let mut w = send_wr(1, IBV_WR_RDMA_WRITE, &mut sge, b.addr(), b.rkey());
        let refused = poll(a.cq, &mut wc) == -1 && post_send(qa, &mut w).0 == libc::EIO;
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(if refused { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child's pid.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child: {status:#x}"
    );
    // the parent carries on
    // SAFETY: writing our own registered buffer, with nothing posted that reads it.
    unsafe { (a.buf.as_ptr() as *mut u8).write(0x5A) };
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 1,
        lkey: a.lkey(),
    };
    let mut w = send_wr(2, IBV_WR_RDMA_WRITE, &mut sge, b.addr() + 100, b.rkey());
    assert_eq!(post_send(qa, &mut w).0, 0);
    assert_eq!(
        a.completions(1, WAIT).first().map(|w| w.status),
        Some(IBV_WC_SUCCESS)
    );
    // SAFETY: B's registered buffer, written by the WRITE that completed.
    assert_eq!(unsafe { b.buf.as_ptr().add(100).read_volatile() }, 0x5A);
    destroy(qa);
    destroy(qb);
    a.close();
    b.close();
}

/// The child of `exit_without_cleanup`: an RC QP streaming WRITEs to `peer` (a plain
/// socket that never answers), then `exit` with everything still open.
fn child_exits_without_cleanup(peer: &str) {
    let a = Side::open(0);
    let gid = ibv_gid {
        raw: rocelink_verbs::devices::gid_of(peer.parse().unwrap()),
    };
    let qa = a.qp(IBV_QPT_RC);
    assert_eq!(connect(qa, IBV_QPT_RC, gid, 0x42, PATIENT), 0);
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 60_000,
        lkey: a.lkey(),
    };
    for i in 0..32 {
        let mut w = send_wr(i, IBV_WR_RDMA_WRITE, &mut sge, 0x1000, 0x77);
        assert_eq!(post_send(qa, &mut w).0, 0);
    }
    std::process::exit(0);
}

fn exit_without_cleanup() {
    let ip = rocelink_testkit::ports::free_roce_ips(2);
    let peer = UdpSocket::bind((ip[1], 4791)).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--child-exits-without-cleanup", &ip[1].to_string()])
        .env("ROCELINK_VERBS", ip[0].to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        quiet_for(&peer, Duration::from_millis(50)) > 0,
        "the child sent"
    );
    while quiet_for(&peer, Duration::from_millis(20)) > 0 {}
    assert_eq!(
        quiet_for(&peer, Duration::from_millis(300)),
        0,
        "sent after exit"
    );
}

fn channel_events() {
    let (a, b) = (Side::open(0), Side::open(1));
    // SAFETY: the C API as documented.
    unsafe {
        let ch = ibv_create_comp_channel(b.ctx);
        let cq = ibv_create_cq(b.ctx, 16, 0xC0DE as *mut _, ch, 0);
        let mut init = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        let qb = ibv_create_qp(b.pd, &mut init);
        let qa = a.qp(IBV_QPT_RC);
        assert_eq!(connect(qa, IBV_QPT_RC, b.gid, qpn(qb), PATIENT), 0);
        assert_eq!(connect(qb, IBV_QPT_RC, a.gid, qpn(qa), PATIENT), 0);
        let mut rsge = ibv_sge {
            addr: b.addr(),
            length: 64,
            lkey: b.lkey(),
        };
        let mut r = recv_wr(11, &mut rsge);
        assert_eq!(post_recv(qb, &mut r), 0);
        // arm for solicited events only: an unsolicited SEND does not wake, a solicited one does
        assert_eq!(((*(*cq).context).ops.req_notify_cq.unwrap())(cq, 1), 0);
        let mut sge = ibv_sge {
            addr: a.addr(),
            length: 8,
            lkey: a.lkey(),
        };
        let mut w = send_wr(1, IBV_WR_SEND, &mut sge, 0, 0);
        assert_eq!(post_send(qa, &mut w).0, 0);
        assert_eq!(a.completions(1, WAIT).len(), 1);
        let fd = (*ch).fd;
        assert!(
            !rocelink_io::udp::wait_readable_any(&[fd], Some(Duration::from_millis(100))).unwrap()
        );
        let mut r2 = recv_wr(12, &mut rsge);
        assert_eq!(post_recv(qb, &mut r2), 0);
        w.send_flags |= IBV_SEND_SOLICITED;
        assert_eq!(post_send(qa, &mut w).0, 0);
        assert!(rocelink_io::udp::wait_readable_any(&[fd], Some(WAIT)).unwrap());
        let (mut got_cq, mut got_ctx) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut got_cq, &mut got_ctx), 0);
        assert_eq!((got_cq, got_ctx as usize), (cq, 0xC0DE));
        ibv_ack_cq_events(cq, 1);
        assert_eq!((*cq).comp_events_completed, 1);
        let mut wc = [ibv_wc::default(); 4];
        assert_eq!(poll(cq, &mut wc), 2);
        // a non-blocking channel with nothing in it says so
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        assert_eq!(ibv_get_cq_event(ch, &mut got_cq, &mut got_ctx), -1);
        assert_eq!(errno(), libc::EAGAIN);
        destroy(qa);
        destroy(qb);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
    }
    a.close();
    b.close();
}

fn other_pd() {
    let (a, b) = (Side::open(0), Side::open(1));
    let (qa, qb) = rc_pair(&a, &b, PATIENT, PATIENT);
    // SAFETY: the C API as documented; the buffer outlives its registration.
    unsafe {
        let pd2 = ibv_alloc_pd(b.ctx);
        let mut other = vec![0u8; 4096];
        let mr2 = ibv_reg_mr(pd2, other.as_mut_ptr().cast(), other.len(), ALL);
        assert!(!mr2.is_null());
        // B posting a receive into its other PD's region: refused when posted
        let mut rs = ibv_sge {
            addr: other.as_ptr() as u64,
            length: 64,
            lkey: (*mr2).lkey,
        };
        let mut r = recv_wr(2, &mut rs);
        assert_eq!(post_recv(qb, &mut r), libc::EINVAL);
        // A's WRITE with a valid key of B's other PD: refused remotely, nothing written
        // (and B's QP, NAKing it, goes to ERROR as on an RNIC)
        let mut sge = ibv_sge {
            addr: a.addr(),
            length: 64,
            lkey: a.lkey(),
        };
        let mut w = send_wr(
            1,
            IBV_WR_RDMA_WRITE,
            &mut sge,
            other.as_ptr() as u64,
            (*mr2).rkey,
        );
        assert_eq!(post_send(qa, &mut w).0, 0);
        let wcs = a.completions(1, WAIT);
        assert_eq!(wcs.first().map(|w| w.status), Some(IBV_WC_REM_ACCESS_ERR));
        assert!(other.iter().all(|&x| x == 0));
        destroy(qa);
        destroy(qb);
        assert_eq!(ibv_dereg_mr(mr2), 0);
        assert_eq!(ibv_dealloc_pd(pd2), 0);
    }
    a.close();
    b.close();
}

/// The next asynchronous event of `ctx` within `limit` (its descriptor polled first), acked.
fn next_async_event(ctx: *mut ibv_context, limit: Duration) -> Option<ibv_async_event> {
    // SAFETY: a live context; its async_fd is a descriptor we may poll.
    let fd = unsafe { (*ctx).async_fd };
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd.
    if unsafe { libc::poll(&mut p, 1, limit.as_millis() as i32) } != 1 {
        return None;
    }
    let mut e = ibv_async_event {
        element: std::ptr::null_mut(),
        event_type: 0,
    };
    // SAFETY: a live context and room for the event; one waits (the descriptor said so).
    assert_eq!(unsafe { ibv_get_async_event(ctx, &mut e) }, 0);
    // SAFETY: the event just taken.
    unsafe { ibv_ack_async_event(&mut e) };
    Some(e)
}

fn async_events() {
    let (a, b) = (Side::open(0), Side::open(1));
    // nothing happened: nothing to read
    assert!(next_async_event(b.ctx, Duration::from_millis(50)).is_none());

    // a WRITE B's QP does not allow: the requester's completion says so, the responder's
    // QP gets IBV_EVENT_QP_ACCESS_ERR
    let (qa, qb) = rc_pair(&a, &b, PATIENT, PATIENT);
    let mut none = ibv_qp_attr {
        qp_access_flags: 0,
        ..Default::default()
    };
    // SAFETY: a live QP and initialised attributes.
    assert_eq!(
        unsafe { ibv_modify_qp(qb, &mut none, IBV_QP_ACCESS_FLAGS) },
        0
    );
    let mut sge = ibv_sge {
        addr: a.addr(),
        length: 64,
        lkey: a.lkey(),
    };
    let mut w = send_wr(1, IBV_WR_RDMA_WRITE, &mut sge, b.addr(), b.rkey());
    assert_eq!(post_send(qa, &mut w), (0, None));
    let wcs = a.completions(1, WAIT);
    assert_eq!(wcs.first().map(|w| w.status), Some(IBV_WC_REM_ACCESS_ERR));
    let e = next_async_event(b.ctx, WAIT).expect("no event at the responder");
    assert_eq!(
        (e.event_type, e.element),
        (IBV_EVENT_QP_ACCESS_ERR, qb.cast())
    );
    // SAFETY: a live QP: the acknowledgement was counted
    assert_eq!(unsafe { (*qb).events_completed }, 1);
    // the requester's error was its completion's: no event there
    assert!(next_async_event(a.ctx, Duration::from_millis(50)).is_none());
    destroy(qa);
    destroy(qb);

    // an SRQ armed at 2 with 3 receives: the second message takes it below
    let mut sa = ibv_srq_init_attr {
        srq_context: std::ptr::null_mut(),
        attr: ibv_srq_attr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        },
    };
    // SAFETY: a live PD and initialised attributes.
    let srq = unsafe { ibv_create_srq(b.pd, &mut sa) };
    assert!(!srq.is_null(), "errno {}", errno());
    for i in 0..3u64 {
        let mut sge = ibv_sge {
            addr: b.addr() + i * 4096,
            length: 4096,
            lkey: b.lkey(),
        };
        let mut r = recv_wr(i, &mut sge);
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live SRQ, a WR and its list on the stack.
        assert_eq!(unsafe { post_srq_recv(srq, &mut r, &mut bad) }, 0);
    }
    let mut limit = ibv_srq_attr {
        max_wr: 0,
        max_sge: 0,
        srq_limit: 2,
    };
    // SAFETY: a live SRQ; IBV_SRQ_LIMIT (2) arms the limit.
    assert_eq!(unsafe { ibv_modify_srq(srq, &mut limit, 2) }, 0);
    let mut init = ibv_qp_init_attr {
        qp_context: std::ptr::null_mut(),
        send_cq: b.cq,
        recv_cq: b.cq,
        srq,
        cap: ibv_qp_cap {
            max_send_wr: 8,
            max_recv_wr: 0,
            max_send_sge: 1,
            max_recv_sge: 0,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 0,
    };
    // SAFETY: a live PD and initialised attributes.
    let qb = unsafe { ibv_create_qp(b.pd, &mut init) };
    assert!(!qb.is_null(), "errno {}", errno());
    let qa = a.qp(IBV_QPT_RC);
    assert_eq!(connect(qa, IBV_QPT_RC, b.gid, qpn(qb), PATIENT), 0);
    assert_eq!(connect(qb, IBV_QPT_RC, a.gid, qpn(qa), PATIENT), 0);
    for i in 0..2 {
        let mut sge = ibv_sge {
            addr: a.addr(),
            length: 100,
            lkey: a.lkey(),
        };
        let mut w = send_wr(i, IBV_WR_SEND, &mut sge, 0, 0);
        w.send_flags = IBV_SEND_SIGNALED;
        assert_eq!(post_send(qa, &mut w), (0, None));
    }
    assert_eq!(a.completions(2, WAIT).len(), 2);
    let e = next_async_event(b.ctx, WAIT).expect("no SRQ limit event");
    assert_eq!(
        (e.event_type, e.element),
        (IBV_EVENT_SRQ_LIMIT_REACHED, srq.cast())
    );
    // SAFETY: a live SRQ: the acknowledgement was counted
    assert_eq!(unsafe { (*srq).events_completed }, 1);
    // the limit fires once: it is disarmed now
    assert!(next_async_event(b.ctx, Duration::from_millis(50)).is_none());

    // a QP on an SRQ moved to ERR: its last WQE is reached
    let mut err = ibv_qp_attr {
        qp_state: IBV_QPS_ERR,
        ..Default::default()
    };
    // SAFETY: a live QP and initialised attributes.
    assert_eq!(unsafe { ibv_modify_qp(qb, &mut err, IBV_QP_STATE) }, 0);
    let e = next_async_event(b.ctx, WAIT).expect("no last-WQE event");
    assert_eq!(
        (e.event_type, e.element),
        (IBV_EVENT_QP_LAST_WQE_REACHED, qb.cast())
    );
    let _ = b.completions(2, Duration::from_millis(200));
    destroy(qa);
    destroy(qb);
    // SAFETY: the SRQ, no QP uses it any more.
    assert_eq!(unsafe { ibv_destroy_srq(srq) }, 0);
    a.close();
    b.close();
}
