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
