//! `poll_transmit_gather` leaves payloads in their region: headers + the region slice + the
//! tail must be byte-for-byte what `poll_transmit` builds for the same work request, for every
//! opcode shape (first/middle/last, with immediate, odd lengths that need pad), and for the
//! READ responses a responder sends (first/middle/last/only, and the ACKs between).

#![allow(clippy::unwrap_used)]

use rocelink_transport::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn endpoint() -> (Endpoint, u32, MrKeys) {
    endpoint_at("10.0.0.1:4791", "10.0.0.2:4791", 0x11, 0x22)
}

/// An RC endpoint at `local` with QP `qpn` connected to `dest_qpn` at `remote`, and a
/// 100 000-byte region (key 0x77, remotely readable) of a known pattern; PSNs start at 5
/// both ways.
fn endpoint_at(local: &str, remote: &str, qpn: u32, dest_qpn: u32) -> (Endpoint, u32, MrKeys) {
    let a: SocketAddr = local.parse().unwrap();
    let b: SocketAddr = remote.parse().unwrap();
    let mut ep = Endpoint::new(EndpointConfig::new(a));
    let mem: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ;
    let mr = ep
        .register_mr_keyed(mem.into_boxed_slice(), 0x1000, access, 0x77)
        .unwrap();
    let qp = ep.create_qp_numbered(qpn, QpInit::new(QpType::Rc)).unwrap();
    ep.modify_qp(qp, Modify::Init { qkey: 0 }).unwrap();
    ep.modify_qp(
        qp,
        Modify::Rtr {
            remote: Some(b),
            dest_qpn,
            rq_psn: 5,
            mtu: Mtu::M1024,
            min_rnr_timer: 0,
        },
    )
    .unwrap();
    ep.modify_qp(
        qp,
        Modify::Rts {
            sq_psn: 5,
            timeout: Duration::from_millis(50),
            retry_cnt: 7,
            rnr_retry: 7,
        },
    )
    .unwrap();
    (ep, qp, mr)
}

#[test]
fn gathered_datagrams_equal_staged_ones() {
    let (mut staged, qa, ma) = endpoint();
    let (mut gathered, qb, mb) = endpoint();
    let ops = [
        (SendOp::Write { va: 0, rkey: 9 }, 3001usize, 7u64),
        (
            SendOp::WriteImm {
                va: 64,
                rkey: 9,
                imm: 0xABCD,
            },
            1023,
            100,
        ),
        (SendOp::SendImm(5), 2, 40_000),
        (SendOp::Send, 0, 0),
        (SendOp::Write { va: 8, rkey: 9 }, 4096, 50_001),
    ];
    for (i, (op, len, off)) in ops.into_iter().enumerate() {
        for (ep, qp, mr) in [(&mut staged, qa, ma), (&mut gathered, qb, mb)] {
            ep.post_send(
                qp,
                SendWr {
                    wr_id: i as u64,
                    op,
                    sg_list: Sge {
                        lkey: mr.lkey,
                        va: mr.va + off,
                        len: len as u32,
                    }
                    .into(),
                    signaled: true,
                    solicited: false,
                    marks: 0,
                },
            )
            .unwrap();
        }
    }
    let now = Instant::now();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut n = 0;
    let mut with_gather = 0;
    while let Some(t) = staged.poll_transmit(now, &mut a) {
        let g = gathered.poll_transmit_gather(now, &mut b).unwrap();
        assert_eq!(t.gather, None);
        let mut whole = b[..g.len].to_vec();
        if let Some(x) = g.gather {
            with_gather += 1;
            let m = gathered.mr(x.lkey).unwrap().bytes();
            whole.extend_from_slice(&m[x.offset..x.offset + x.len]);
            whole.extend_from_slice(&x.tail[..x.tail_len]);
            assert_eq!(g.len + x.wire_len(), t.len);
        }
        assert_eq!(whole, a[..t.len], "datagram {n}");
        assert_eq!((t.dst, t.src_port, t.qpn), (g.dst, g.src_port, g.qpn));
        n += 1;
    }
    assert!(gathered.poll_transmit_gather(now, &mut b).is_none());
    // 3001 B = 3 packets, 1023 = 1, 2 = 1, 0 = 1, 4096 = 4
    assert_eq!(n, 10);
    // payloads of 512 bytes and more are gathered: 3001 (1024, 1024, 953), 1023, 4096 (4×)
    assert_eq!(with_gather, 8);
}

/// Headers + region slice + tail of a gathered datagram, as one buffer.
fn whole(ep: &Endpoint, t: &Transmit, buf: &[u8]) -> Vec<u8> {
    let mut w = buf[..t.len].to_vec();
    if let Some(x) = t.gather {
        let m = ep.mr(x.lkey).unwrap().bytes();
        w.extend_from_slice(&m[x.offset..x.offset + x.len]);
        w.extend_from_slice(&x.tail[..x.tail_len]);
    }
    w
}

#[test]
fn gathered_read_responses_equal_staged_ones() {
    // a requester at .2 READs from two identical responders at .1: one answering staged,
    // one gathered; every response must be the same bytes
    let (mut req, qr, mr) = endpoint_at("10.0.0.2:4791", "10.0.0.1:4791", 0x22, 0x11);
    let (mut staged, _, _) = endpoint();
    let (mut gathered, _, _) = endpoint();
    let reads = [
        (0u64, 3001u32),
        (7, 1024),
        (64, 100),
        (8, 4096),
        (50_001, 2),
    ];
    for (i, (va, len)) in reads.into_iter().enumerate() {
        let wr = SendWr {
            wr_id: i as u64,
            // the responders' region lies where the requester's does
            op: SendOp::Read {
                va: mr.va + va,
                rkey: 0x77,
            },
            sg_list: Sge {
                lkey: mr.lkey,
                va: mr.va,
                len,
            }
            .into(),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        req.post_send(qr, wr).unwrap();
    }
    let now = Instant::now();
    let (from, to) = (req.config().local, staged.config().local);
    let mut q = Vec::new();
    while let Some(t) = req.poll_transmit(now, &mut q) {
        for ep in [&mut staged, &mut gathered] {
            let d = Datagram {
                src: from,
                dst: to,
                ip_header: None,
                payload: &q[..t.len],
            };
            ep.handle_datagram(now, d);
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut n, mut with_gather) = (0, 0);
    while let Some(t) = staged.poll_transmit(now, &mut a) {
        let g = gathered.poll_transmit_gather(now, &mut b).unwrap();
        assert_eq!(t.gather, None);
        with_gather += usize::from(g.gather.is_some());
        assert_eq!(whole(&gathered, &g, &b), a[..t.len], "response {n}");
        assert_eq!((t.dst, t.src_port, t.qpn), (g.dst, g.src_port, g.qpn));
        n += 1;
    }
    assert!(gathered.poll_transmit_gather(now, &mut b).is_none());
    // 3001 B = 3 responses (1024, 1024, 953), 1024 = 1, 100 = 1, 4096 = 4, 2 = 1
    assert_eq!(n, 10);
    // payloads of 512 bytes and more are gathered; 100 and 2 bytes are copied
    assert_eq!(with_gather, 8);
    assert_eq!(staged.qp_stats(0x11).unwrap().tx_packets, 10);
}

/// A UD endpoint at 10.0.0.1 whose region (VA 0) holds a known pattern: (endpoint, QP,
/// region keys, CQ). Built the same way twice, the two have the same keys.
fn ud_endpoint() -> (Endpoint, u32, MrKeys, CqId) {
    let at: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    let mut ep = Endpoint::new(EndpointConfig::new(at));
    let mem: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 253) as u8).collect();
    let mr = ep.register_mr(mem.into_boxed_slice(), 0, Access::NONE);
    let cq = ep.create_cq();
    let init = QpInit {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 64,
        ..QpInit::new(QpType::Ud)
    };
    let qp = ep.create_qp(init).unwrap();
    ep.ready_qp(qp, 0x4444, None, 0, Mtu::M4096).unwrap();
    (ep, qp, mr, cq)
}

/// UD SENDs gathered from a region (the UD send lane: headers kept per destination, PSN
/// and immediate patched) are the bytes `poll_transmit` builds for the same work requests
/// — however destinations, Q_Keys, immediates and lengths change from one to the next —
/// and complete the same; what the lane does not take (small or split payloads, a region
/// gone since posting) goes the general way on both.
#[test]
fn gathered_ud_sends_equal_staged_ones() {
    let (mut staged, qs, ms, cs) = ud_endpoint();
    let (mut gathered, qg, mg, cg) = ud_endpoint();
    assert_eq!((qs, ms.lkey), (qg, mg.lkey));
    let d = |at: &str, qpn: u32, qkey: u32| UdDest {
        addr: at.parse().unwrap(),
        qpn,
        qkey,
    };
    let one = d("10.0.0.2:4791", 0x21, 0x1111);
    // the high bit: the QP's own Q_Key goes out
    let own = d("10.0.0.2:4791", 0x21, 0x8000_0000);
    let other_qp = d("10.0.0.2:4791", 0x22, 0x1111);
    let other_host = d("10.0.0.3:4792", 0x21, 0x1111);
    // (destination, immediate, offset, length): runs to one destination, then changes of
    // each thing the kept headers depend on, pads of 0 to 3, the lane's smallest payload
    // and one under it
    let sends = [
        (one, Some(1), 0, 4096),
        (one, Some(2), 4096, 4096),
        (one, Some(3), 8192, 4096),
        (one, None, 0, 4096),
        (one, Some(4), 0, 4095),
        (one, Some(5), 1, 4093),
        (own, Some(6), 0, 4096),
        (other_qp, Some(7), 0, 4096),
        (other_host, Some(8), 0, 4096),
        (one, Some(9), 0, 512),
        (one, Some(10), 0, 511),
        (one, Some(11), 100, 1001),
        (one, Some(12), 0, 4096),
    ];
    let lkey = ms.lkey;
    for (i, &(dest, imm, at, len)) in sends.iter().enumerate() {
        let wr = SendWr {
            wr_id: i as u64,
            op: SendOp::UdSend { dest, imm },
            sg_list: Sge { lkey, va: at, len }.into(),
            signaled: i % 3 == 0,
            solicited: false,
            marks: 0,
        };
        staged.post_send(qs, wr).unwrap();
        gathered.post_send(qg, wr).unwrap();
    }
    // two pieces: copied on both
    let split = SendWr {
        wr_id: 100,
        op: SendOp::UdSend {
            dest: one,
            imm: Some(13),
        },
        sg_list: SgList::new(&[
            Sge {
                lkey,
                va: 0,
                len: 2048,
            },
            Sge {
                lkey,
                va: 9000,
                len: 2048,
            },
        ])
        .unwrap(),
        signaled: true,
        solicited: false,
        marks: 0,
    };
    staged.post_send(qs, split).unwrap();
    gathered.post_send(qg, split).unwrap();
    let now = Instant::now();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut lane = 0;
    for n in 0..=sends.len() {
        let t = staged.poll_transmit(now, &mut a).unwrap();
        let g = gathered.poll_transmit_gather(now, &mut b).unwrap();
        assert_eq!(t.gather, None);
        lane += usize::from(g.gather.is_some());
        assert_eq!(whole(&gathered, &g, &b), a[..t.len], "send {n}");
        assert_eq!(
            (g.dst, g.src_port, g.qpn, g.response, g.traffic_class),
            (t.dst, t.src_port, t.qpn, t.response, t.traffic_class)
        );
    }
    assert!(staged.poll_transmit(now, &mut a).is_none());
    assert!(gathered.poll_transmit_gather(now, &mut b).is_none());
    // every send of 512 bytes or more from one piece
    assert_eq!(lane, sends.len() - 1);
    let done = |ep: &mut Endpoint, cq| std::iter::from_fn(|| ep.poll_cq(cq)).collect::<Vec<_>>();
    let (ws, wg) = (done(&mut staged, cs), done(&mut gathered, cg));
    assert_eq!(ws.len(), 6);
    assert_eq!(ws, wg);
    assert_eq!(staged.qp_stats(qs), gathered.qp_stats(qg));
}

/// A signaled 4 KiB UD SEND with immediate `n` (its WR ID too) from `lkey` at `va`, to QP
/// 0x21 at 10.0.0.2.
fn signaled_send(n: u32, lkey: u32, va: u64) -> SendWr {
    let dest = UdDest {
        addr: "10.0.0.2:4791".parse().unwrap(),
        qpn: 0x21,
        qkey: 0x1111,
    };
    SendWr {
        wr_id: u64::from(n),
        op: SendOp::UdSend { dest, imm: Some(n) },
        sg_list: Sge {
            lkey,
            va,
            len: 4096,
        }
        .into(),
        signaled: true,
        solicited: false,
        marks: 0,
    }
}

/// A send whose region is gone by the time it would leave completes with a protection
/// error, sending nothing, on both paths; the QP is then in error and flushes the next.
#[test]
fn a_ud_send_from_a_region_gone_since_posting_fails_alike() {
    let mut eps = [ud_endpoint(), ud_endpoint()];
    let now = Instant::now();
    let mut outs = Vec::new();
    for (k, (ep, qp, mr, cq)) in eps.iter_mut().enumerate() {
        let extra: Vec<u8> = vec![9; 8192];
        let gone = ep.register_mr(extra.into_boxed_slice(), 0, Access::NONE);
        for (i, lkey) in [mr.lkey, gone.lkey, mr.lkey].into_iter().enumerate() {
            ep.post_send(*qp, signaled_send(i as u32, lkey, 0)).unwrap();
        }
        assert!(ep.deregister_mr(gone.lkey).is_some());
        let mut buf = Vec::new();
        let mut sent = Vec::new();
        loop {
            let t = match k {
                0 => ep.poll_transmit(now, &mut buf),
                _ => ep.poll_transmit_gather(now, &mut buf),
            };
            let Some(t) = t else { break };
            sent.push(whole(ep, &t, &buf));
        }
        let wcs: Vec<_> = std::iter::from_fn(|| ep.poll_cq(*cq))
            .map(|w| (w.wr_id, w.status))
            .collect();
        outs.push((sent, wcs));
    }
    assert_eq!(outs[0], outs[1]);
    let (sent, wcs) = &outs[0];
    assert_eq!(sent.len(), 1, "the QP is in error after the failed send");
    assert_eq!(wcs[0], (0, WcStatus::Success));
    assert_eq!(wcs[1], (1, WcStatus::LocalProtectionError));
    assert_eq!(wcs[2], (2, WcStatus::WrFlushError));
}

/// A region registered again under the same key after a send was posted from it (its VA
/// base moved): the send reads the new region where its VA now lies, on both paths — the
/// lane does not keep using the offset it checked at posting.
#[test]
fn a_ud_send_from_a_region_registered_again_reads_the_new_one() {
    let mut eps = [ud_endpoint(), ud_endpoint()];
    let now = Instant::now();
    let mut outs = Vec::new();
    for (k, (ep, qp, _, _)) in eps.iter_mut().enumerate() {
        let key = 0x5151_5100;
        let old: Vec<u8> = vec![1; 16384];
        ep.register_mr_keyed(old.into_boxed_slice(), 0x1000, Access::NONE, key)
            .unwrap();
        ep.post_send(*qp, signaled_send(1, key, 0x1000 + 100))
            .unwrap();
        assert!(ep.deregister_mr(key).is_some());
        let new: Vec<u8> = (0..32768u32).map(|i| (i % 251) as u8).collect();
        ep.register_mr_keyed(new.into_boxed_slice(), 0, Access::NONE, key)
            .unwrap();
        let mut buf = Vec::new();
        let t = if k == 0 {
            ep.poll_transmit(now, &mut buf).unwrap()
        } else {
            ep.poll_transmit_gather(now, &mut buf).unwrap()
        };
        assert_eq!(t.gather.is_some(), k == 1);
        outs.push(whole(ep, &t, &buf));
    }
    assert_eq!(outs[0], outs[1]);
    // the payload is the new region's bytes at VA 0x1064
    let want: Vec<u8> = (0x1064..0x1064 + 4096u32)
        .map(|i| (i % 251) as u8)
        .collect();
    let at = outs[0].len() - 4 - 4096;
    assert_eq!(outs[0][at..at + 4096], want[..]);
}
