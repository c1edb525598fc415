//! Work requests in the forms verbs programs post them: gather and scatter lists of several
//! entries across regions, inline data, regions over memory the application keeps
//! ([`SharedMemory`]), solicited events counted per CQ, and CQs destroyed.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_transport::sim::{LinkConfig, Pair, connect};
use rocelink_transport::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Memory the "application" keeps: the endpoint sees it only through copies.
#[derive(Clone)]
struct AppMemory(Arc<Mutex<Vec<u8>>>);

impl AppMemory {
    fn new(len: usize) -> AppMemory {
        AppMemory(Arc::new(Mutex::new(vec![0; len])))
    }
    fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.0.lock().unwrap()[off..off + len].to_vec()
    }
    fn set(&self, off: usize, data: &[u8]) {
        self.0.lock().unwrap()[off..off + data.len()].copy_from_slice(data);
    }
}

impl SharedMemory for AppMemory {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        let m = self.0.lock().unwrap();
        match m.get(offset..offset + dst.len()) {
            Some(b) => {
                dst.copy_from_slice(b);
                true
            }
            None => false,
        }
    }
    fn write(&self, offset: usize, src: &[u8]) -> bool {
        let mut m = self.0.lock().unwrap();
        match m.get_mut(offset..offset + src.len()) {
            Some(b) => {
                b.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

const ALL: Access = Access::LOCAL_WRITE;

/// Two endpoints with one RC (or UC) QP each, MTU 1024, and app memory on both sides.
struct Setup {
    pair: Pair,
    qa: u32,
    qb: u32,
    a_mem: AppMemory,
    a_keys: MrKeys,
    b_mem: AppMemory,
    b_keys: MrKeys,
}

fn setup(t: QpType, a_len: usize, b_len: usize) -> Setup {
    let mut a = Endpoint::new(EndpointConfig::new(addr("10.0.0.1:4791")));
    let mut b = Endpoint::new(EndpointConfig::new(addr("10.0.0.2:4791")));
    let a_mem = AppMemory::new(a_len);
    let b_mem = AppMemory::new(b_len);
    let rights = ALL | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let a_keys = a.register_shared_mr(a_mem.clone(), 0x7f00_0000_0000, rights);
    let b_keys = b.register_shared_mr(b_mem.clone(), 0x7e00_0000_0000, rights);
    let qa = a.create_qp(QpInit::new(t)).unwrap();
    let qb = b.create_qp(QpInit::new(t)).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 10, 20, 0x1111).unwrap();
    let pair = Pair::new(a, b, LinkConfig::default(), 7, Instant::now());
    Setup {
        pair,
        qa,
        qb,
        a_mem,
        a_keys,
        b_mem,
        b_keys,
    }
}

fn sge(k: &MrKeys, off: usize, len: usize) -> Sge {
    Sge {
        lkey: k.lkey,
        va: k.va + off as u64,
        len: len as u32,
    }
}

fn wr(wr_id: u64, op: SendOp, sges: &[Sge]) -> SendWr {
    SendWr {
        wr_id,
        op,
        sg_list: SgList::new(sges).unwrap(),
        signaled: true,
        solicited: false,
        marks: 0,
    }
}

fn run_until_cq(p: &mut Pair, b_side: bool) -> WorkCompletion {
    let ok = p.run_until(Duration::from_secs(2), |p| {
        if b_side {
            p.b.peek_completion().is_some()
        } else {
            p.a.peek_completion().is_some()
        }
    });
    assert!(ok, "no completion");
    if b_side {
        p.b.poll_completion().unwrap()
    } else {
        p.a.poll_completion().unwrap()
    }
}

#[test]
fn a_write_gathered_from_three_pieces_of_shared_memory_lands_whole_in_shared_memory() {
    let mut s = setup(QpType::Rc, 64 << 10, 64 << 10);
    // three pieces, out of order in A's memory, crossing MTU boundaries
    let (p1, p2, p3) = (pattern(1500, 1), pattern(3, 2), pattern(2600, 3));
    s.a_mem.set(40_000, &p1);
    s.a_mem.set(10, &p2);
    s.a_mem.set(20_000, &p3);
    let pieces = [
        sge(&s.a_keys, 40_000, 1500),
        sge(&s.a_keys, 10, 3),
        sge(&s.a_keys, 20_000, 2600),
    ];
    let dst = s.b_keys.va + 777;
    let op = SendOp::Write {
        va: dst,
        rkey: s.b_keys.rkey,
    };
    s.pair.a.post_send(s.qa, wr(5, op, &pieces)).unwrap();
    let wc = run_until_cq(&mut s.pair, false);
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::Success));
    let want = [p1, p2, p3].concat();
    assert_eq!(s.b_mem.bytes(777, want.len()), want);
    // nothing around it
    assert_eq!(s.b_mem.bytes(776, 1), [0]);
    assert_eq!(s.b_mem.bytes(777 + want.len(), 1), [0]);
}

#[test]
fn a_read_scatters_into_several_entries_and_is_served_from_shared_memory() {
    let mut s = setup(QpType::Rc, 64 << 10, 64 << 10);
    let src = pattern(5000, 9);
    s.b_mem.set(3000, &src);
    let into = [
        sge(&s.a_keys, 100, 1000),
        sge(&s.a_keys, 9000, 1),
        sge(&s.a_keys, 30_000, 3999),
    ];
    let op = SendOp::Read {
        va: s.b_keys.va + 3000,
        rkey: s.b_keys.rkey,
    };
    s.pair.a.post_send(s.qa, wr(6, op, &into)).unwrap();
    let wc = run_until_cq(&mut s.pair, false);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (6, WcStatus::Success, WcOpcode::RdmaRead)
    );
    let got = [
        s.a_mem.bytes(100, 1000),
        s.a_mem.bytes(9000, 1),
        s.a_mem.bytes(30_000, 3999),
    ]
    .concat();
    assert_eq!(got, src);
}

#[test]
fn inline_data_is_copied_when_posted_and_the_buffer_may_change_at_once() {
    let mut s = setup(QpType::Rc, 4096, 4096);
    let mut data = pattern(300, 4);
    let want = data.clone();
    let op = SendOp::Write {
        va: s.b_keys.va,
        rkey: s.b_keys.rkey,
    };
    // the gather list names nothing registered: inline sends do not read it
    let junk = Sge {
        lkey: 0xdead,
        va: 1,
        len: 300,
    };
    s.pair
        .a
        .post_send_inline(s.qa, wr(1, op, &[junk]), &data)
        .unwrap();
    data.fill(0xEE);
    let wc = run_until_cq(&mut s.pair, false);
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(s.b_mem.bytes(0, 300), want);
    // too long, or a READ: refused
    let big = vec![0u8; MAX_INLINE + 1];
    assert!(
        s.pair
            .a
            .post_send_inline(s.qa, wr(2, op, &[junk]), &big)
            .is_err()
    );
    let read = SendOp::Read {
        va: s.b_keys.va,
        rkey: s.b_keys.rkey,
    };
    assert!(
        s.pair
            .a
            .post_send_inline(s.qa, wr(3, read, &[junk]), &data[..8])
            .is_err()
    );
}

#[test]
fn a_send_gathered_from_two_regions_scatters_into_a_receive_of_two_entries() {
    let mut s = setup(QpType::Uc, 8192, 8192);
    let extra = s.pair.a.register_mr(pattern(512, 77), 0x1000, Access::NONE);
    s.a_mem.set(0, &pattern(700, 78));
    let recv =
        RecvWr::scatter(44, &[sge(&s.b_keys, 4000, 600), sge(&s.b_keys, 100, 1000)]).unwrap();
    s.pair.b.post_recv(s.qb, recv).unwrap();
    let pieces = [sge(&extra, 0, 512), sge(&s.a_keys, 0, 700)];
    let mut w = wr(8, SendOp::Send, &pieces);
    w.solicited = true;
    s.pair.a.post_send(s.qa, w).unwrap();
    let wc = run_until_cq(&mut s.pair, true);
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len, wc.solicited),
        (44, WcStatus::Success, 1212, true)
    );
    let msg = [pattern(512, 77), pattern(700, 78)].concat();
    let got = [s.b_mem.bytes(4000, 600), s.b_mem.bytes(100, 612)].concat();
    assert_eq!(got, msg);
    let c = s.pair.b.cq_counts(CqId::DEFAULT).unwrap();
    assert_eq!((c.all, c.solicited), (1, 1));
}

#[test]
fn a_gather_entry_outside_its_region_is_refused_when_posted() {
    let mut s = setup(QpType::Rc, 4096, 4096);
    let op = SendOp::Send;
    let bad = [sge(&s.a_keys, 0, 10), sge(&s.a_keys, 4090, 10)];
    assert!(matches!(
        s.pair.a.post_send(s.qa, wr(1, op, &bad)),
        Err(QpError::LocalAccess(AccessError::OutOfBounds { .. }))
    ));
    let unknown = [Sge {
        lkey: 0x4242,
        va: 0,
        len: 1,
    }];
    assert!(s.pair.a.post_send(s.qa, wr(1, op, &unknown)).is_err());
    // the owned-memory views refuse a shared region rather than lend it
    let r = s.pair.a.mr(s.a_keys.lkey).unwrap();
    assert!(r.is_shared() && r.bytes().is_empty());
    assert_eq!(
        r.slice(s.a_keys.va, 1, Access::NONE),
        Err(AccessError::Shared)
    );
}

#[test]
fn unsolicited_receives_count_only_as_all_and_a_cq_in_use_cannot_be_destroyed() {
    let mut h = Harness::new(QpType::Rc, Mtu::M1024, LinkConfig::default(), 3);
    let cq = h.pair.b.create_cq();
    assert_eq!(h.pair.b.destroy_cq(cq), Ok(()));
    assert!(h.pair.b.destroy_cq(cq).is_err());
    assert!(h.pair.b.destroy_cq(CqId::DEFAULT).is_err());
    // a CQ named by a QP is busy until the QP is gone
    let cq = h.pair.b.create_cq();
    let mut init = QpInit::new(QpType::Rc);
    init.recv_cq = cq;
    let q = h.pair.b.create_qp(init).unwrap();
    assert_eq!(h.pair.b.destroy_cq(cq), Err(QpError::Busy));
    h.pair.b.destroy_qp(q).unwrap();
    assert_eq!(h.pair.b.destroy_cq(cq), Ok(()));

    h.post_recv_b(1, 0, 64);
    let src = h.sge_a(0, 64);
    h.pair
        .a
        .post_send(h.qa, SendWr::new(2, SendOp::Send, src))
        .unwrap();
    let wc = run_until_cq(&mut h.pair, true);
    assert!(!wc.solicited);
    let c = h.pair.b.cq_counts(CqId::DEFAULT).unwrap();
    assert_eq!((c.all, c.solicited), (1, 0));
}

/// A responder holding ACKs: B answers each of A's messages with its own, and the ACK of
/// A's message leaves right behind B's answer instead of alone; a one-way stream's ACKs
/// stop being held once one had to go alone.
#[test]
fn held_acks_ride_with_the_answer_and_stop_being_held_when_none_comes() {
    let mut a = Endpoint::new(EndpointConfig::new(addr("10.0.0.1:4791")));
    let mut cfg = EndpointConfig::new(addr("10.0.0.2:4791"));
    cfg.ack_delay = Duration::from_millis(5);
    let mut b = Endpoint::new(cfg);
    let am = a.register_mr(vec![1u8; 4096], 0, Access::LOCAL_WRITE);
    let bm = b.register_mr(vec![2u8; 4096], 0, Access::LOCAL_WRITE);
    let qa = a.create_qp(QpInit::new(QpType::Rc)).unwrap();
    let qb = b.create_qp(QpInit::new(QpType::Rc)).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 0, 0, 0).unwrap();
    let now = Instant::now();
    let mut buf = Vec::new();
    let ping = |ep: &mut Endpoint, qp: u32, k: &MrKeys, id: u64| {
        let mut w = SendWr::new(id, SendOp::Send, sge(k, 0, 16));
        w.signaled = true;
        ep.post_send(qp, w).unwrap();
    };
    for round in 0..3u64 {
        b.post_recv(qb, RecvWr::new(round, sge(&bm, 64, 64)))
            .unwrap();
        a.post_recv(qa, RecvWr::new(round, sge(&am, 64, 64)))
            .unwrap();
        ping(&mut a, qa, &am, round);
        let t = a.poll_transmit(now, &mut buf).unwrap();
        b.handle_datagram(now, datagram(&t, &buf, "10.0.0.1:4791", "10.0.0.2:4791"));
        // B holds its ACK: nothing to send, a timer in 5 ms
        assert!(b.poll_transmit(now, &mut buf).is_none(), "round {round}");
        assert_eq!(b.poll_timeout(), Some(now + Duration::from_millis(5)));
        // B answers: the answer, then the ACK of the ping right behind it
        ping(&mut b, qb, &bm, 100 + round);
        let t1 = b.poll_transmit(now, &mut buf).unwrap();
        assert!(!t1.response);
        let first = buf[..t1.len].to_vec();
        let t2 = b.poll_transmit(now, &mut buf).unwrap();
        assert!(t2.response, "the ACK follows the answer");
        a.handle_datagram(now, datagram(&t1, &first, "10.0.0.2:4791", "10.0.0.1:4791"));
        a.handle_datagram(now, datagram(&t2, &buf, "10.0.0.2:4791", "10.0.0.1:4791"));
        let wcs: Vec<_> = std::iter::from_fn(|| a.poll_completion()).collect();
        assert_eq!(wcs.len(), 2, "A's send and its receive complete");
        // A acknowledges B's answer at once (A holds nothing)
        let t = a.poll_transmit(now, &mut buf).unwrap();
        b.handle_datagram(now, datagram(&t, &buf, "10.0.0.1:4791", "10.0.0.2:4791"));
        while b.poll_completion().is_some() {}
    }
    // a message B does not answer: its ACK goes alone when the delay ends...
    b.post_recv(qb, RecvWr::new(9, sge(&bm, 64, 64))).unwrap();
    ping(&mut a, qa, &am, 9);
    let t = a.poll_transmit(now, &mut buf).unwrap();
    b.handle_datagram(now, datagram(&t, &buf, "10.0.0.1:4791", "10.0.0.2:4791"));
    assert!(b.poll_transmit(now, &mut buf).is_none());
    let later = now + Duration::from_millis(5);
    b.handle_timeout(later);
    assert!(b.poll_transmit(later, &mut buf).is_some_and(|t| t.response));
    // ...and the next is not held at all
    b.post_recv(qb, RecvWr::new(10, sge(&bm, 64, 64))).unwrap();
    ping(&mut a, qa, &am, 10);
    let t = a.poll_transmit(later, &mut buf).unwrap();
    b.handle_datagram(later, datagram(&t, &buf, "10.0.0.1:4791", "10.0.0.2:4791"));
    assert!(b.poll_transmit(later, &mut buf).is_some_and(|t| t.response));
}

fn datagram<'a>(t: &Transmit, buf: &'a [u8], src: &str, dst: &str) -> Datagram<'a> {
    let mut src = addr(src);
    src.set_port(t.src_port);
    Datagram {
        src,
        dst: addr(dst),
        ip_header: None,
        payload: &buf[..t.len],
    }
}

#[test]
fn work_posted_in_error_is_flushed_at_once_and_in_reset_refused() {
    let mut s = setup(QpType::Rc, 4096, 4096);
    s.pair.a.modify_qp(s.qa, Modify::Error).unwrap();
    let op = SendOp::Write {
        va: s.b_keys.va,
        rkey: s.b_keys.rkey,
    };
    let mut w = wr(31, op, &[sge(&s.a_keys, 0, 8)]);
    w.signaled = false;
    s.pair.a.post_send(s.qa, w).unwrap();
    s.pair
        .a
        .post_recv(s.qa, RecvWr::new(32, sge(&s.a_keys, 0, 8)))
        .unwrap();
    let wcs = drain(&mut s.pair.a);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (31, WcStatus::WrFlushError, WcOpcode::RdmaWrite),
            (32, WcStatus::WrFlushError, WcOpcode::Recv)
        ]
    );
    let mut buf = Vec::new();
    assert!(
        s.pair.a.poll_transmit(s.pair.now, &mut buf).is_none(),
        "nothing goes out"
    );
    s.pair.a.modify_qp(s.qa, Modify::Reset).unwrap();
    assert_eq!(
        s.pair.a.post_send(s.qa, w),
        Err(QpError::BadState(QpState::Reset))
    );
    assert_eq!(
        s.pair
            .a
            .post_recv(s.qa, RecvWr::new(33, sge(&s.a_keys, 0, 8))),
        Err(QpError::BadState(QpState::Reset))
    );
}

#[test]
fn a_qp_reaches_only_regions_of_its_protection_domain() {
    let mut a = Endpoint::new(EndpointConfig::new(addr("10.0.0.1:4791")));
    let mut b = Endpoint::new(EndpointConfig::new(addr("10.0.0.2:4791")));
    let src = a.register_mr(pattern(256, 5), 0x1000, Access::LOCAL_WRITE);
    let rights = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    // B: its QP in PD 1, one region in PD 1 and one in PD 2
    let mine = b.register_mr(vec![0u8; 4096], 0, rights);
    let theirs = b.register_mr(vec![0u8; 4096], 0x10_0000, rights);
    b.set_mr_pd(mine.lkey, 1).unwrap();
    b.set_mr_pd(theirs.lkey, 2).unwrap();
    let qa = a.create_qp(QpInit::new(QpType::Rc)).unwrap();
    let mut init = QpInit::new(QpType::Rc);
    init.pd = 1;
    let qb = b.create_qp(init).unwrap();
    connect(&mut a, qa, &mut b, qb, Mtu::M1024, 0, 0, 0).unwrap();
    // locally: a receive into the other domain's region is refused when posted
    let r = RecvWr::new(1, sge(&theirs, 0, 64));
    assert!(matches!(
        b.post_recv(qb, r),
        Err(QpError::LocalAccess(AccessError::UnknownKey(_)))
    ));
    b.post_recv(qb, RecvWr::new(2, sge(&mine, 0, 64))).unwrap();
    let mut p = Pair::new(a, b, LinkConfig::default(), 9, Instant::now());
    // remotely: a WRITE with the other domain's valid key is a remote access error
    let op = |k: &MrKeys| SendOp::Write {
        va: k.va,
        rkey: k.rkey,
    };
    p.a.post_send(qa, wr(3, op(&mine), &[sge(&src, 0, 256)]))
        .unwrap();
    assert_eq!(run_until_cq(&mut p, false).status, WcStatus::Success);
    p.a.post_send(qa, wr(4, op(&theirs), &[sge(&src, 0, 256)]))
        .unwrap();
    let wc = run_until_cq(&mut p, false);
    assert_eq!((wc.wr_id, wc.status), (4, WcStatus::RemoteAccessError));
    assert_eq!(
        p.b.mr(mine.lkey).unwrap().bytes()[..256],
        pattern(256, 5)[..]
    );
    assert!(p.b.mr(theirs.lkey).unwrap().bytes().iter().all(|&x| x == 0));
}
