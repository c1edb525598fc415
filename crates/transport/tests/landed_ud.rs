//! Landed UD SENDs (`Endpoint::handle_landed`, the ultrasound host's case) are verified and
//! accounted exactly as whole datagrams: a landing twin and a copying twin get the same
//! packets — with and without immediate, into receives whose GRH slot is discarded or kept,
//! too short or missing, landed where the receive puts them or elsewhere, with another
//! Q_Key, P_Key or QP, or damaged — and stay identical: counters, completions and bytes.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_transport::sim::Rng;
use rocelink_transport::*;
use rocelink_wire::ib::IbPacket;
use std::net::SocketAddr;
use std::time::Instant;

const QKEY: u32 = 0x1111;
const PAYLOAD: usize = 1024;
/// Bytes between receives' buffers in the receivers' region.
const STRIDE: usize = 2048;
const SLOTS: usize = 16;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// [`common::ud_end`] at `at` with the Q_Key of these cases.
fn ud_end(at: &str, mem: Vec<u8>, access: Access) -> (Endpoint, MrKeys, CqId, u32) {
    common::ud_end(addr(at), mem, access, QKEY)
}

/// The receive of slot `k`: its GRH slot discarded (`keep_grh`: in memory, before the
/// payload's place), `room` bytes for the payload.
fn recv(k: usize, lkey: u32, keep_grh: bool, room: u32) -> RecvWr {
    let at = (k * STRIDE) as u64;
    let payload = Sge {
        lkey,
        va: at + 64,
        len: room,
    };
    let grh = match keep_grh {
        true => Sge {
            lkey,
            va: at,
            len: 40,
        },
        false => Sge::discard(40),
    };
    RecvWr::scatter(k as u64, &[grh, payload]).unwrap()
}

struct UdTwins {
    tx: Endpoint,
    tqp: u32,
    src: MrKeys,
    copy: Endpoint,
    land: Endpoint,
    lkey: u32,
    cqs: CqId,
    qpn: u32,
    now: Instant,
}

impl UdTwins {
    fn new() -> UdTwins {
        let data: Vec<u8> = (0..PAYLOAD).map(|i| (i * 13 + 5) as u8).collect();
        let (tx, src, _, tqp) = ud_end("10.0.0.1:4791", data, Access::NONE);
        let mut ends = Vec::new();
        for _ in 0..2 {
            ends.push(ud_end(
                "10.0.0.2:4791",
                vec![0u8; SLOTS * STRIDE],
                Access::LOCAL_WRITE,
            ));
        }
        let (land, mr, cq, qpn) = ends.pop().unwrap();
        let (copy, ..) = ends.pop().unwrap();
        UdTwins {
            tx,
            tqp,
            src,
            copy,
            land,
            lkey: mr.lkey,
            cqs: cq,
            qpn,
            now: Instant::now(),
        }
    }

    /// Post receive `r` on both twins.
    fn post(&mut self, r: RecvWr) {
        for ep in [&mut self.copy, &mut self.land] {
            ep.post_recv(self.qpn, r).unwrap();
        }
    }

    /// A UD SEND of the source bytes to the twins' QP (with `qkey`), as sent.
    fn send(&mut self, imm: Option<u32>, qkey: u32) -> Vec<u8> {
        let wr = SendWr {
            wr_id: 1,
            op: SendOp::UdSend {
                dest: UdDest {
                    addr: addr("10.0.0.2:4791"),
                    qpn: self.qpn,
                    qkey,
                },
                imm,
            },
            sg_list: Sge {
                lkey: self.src.lkey,
                va: 0,
                len: PAYLOAD as u32,
            }
            .into(),
            signaled: false,
            solicited: false,
            marks: 0,
        };
        self.tx.post_send(self.tqp, wr).unwrap();
        let mut buf = Vec::new();
        let t = self.tx.poll_transmit(self.now, &mut buf).unwrap();
        buf[..t.len].to_vec()
    }

    /// Land `d`'s payload at `dest` on both twins, then hand it to the copying twin whole
    /// and to the landing twin landed.
    fn feed(&mut self, d: &[u8], dest: usize) -> Landing {
        let p = IbPacket::new_checked(d).unwrap();
        let (h, n) = (p.header_len(), p.payload_len());
        for ep in [&mut self.copy, &mut self.land] {
            let zone = ep.landing_zone(self.lkey).unwrap();
            zone[dest..dest + n].copy_from_slice(&d[h..h + n]);
        }
        let (src, dst) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
        let g = Datagram {
            src,
            dst,
            ip_header: None,
            payload: d,
        };
        self.copy.handle_datagram(self.now, g);
        let l = Landed {
            src,
            dst,
            headers: &d[..h],
            lkey: self.lkey,
            offset: dest,
            len: n,
            tail: &d[h + n..],
        };
        self.land.handle_landed(self.now, l)
    }

    /// Everything observable of the twins is the same.
    fn assert_same(&mut self, what: &str) {
        assert_eq!(self.copy.stats(), self.land.stats(), "{what}");
        assert_eq!(
            self.copy.qp_stats(self.qpn),
            self.land.qp_stats(self.qpn),
            "{what}"
        );
        loop {
            let (a, b) = (self.copy.poll_cq(self.cqs), self.land.poll_cq(self.cqs));
            assert_eq!(a, b, "{what}");
            if a.is_none() {
                break;
            }
        }
        let (a, b) = (
            self.copy.mr(self.lkey).unwrap().bytes(),
            self.land.mr(self.lkey).unwrap().bytes(),
        );
        assert!(a == b, "{what}: the regions differ");
        let a: Vec<Event> = std::iter::from_fn(|| self.copy.poll_event()).collect();
        let b: Vec<Event> = std::iter::from_fn(|| self.land.poll_event()).collect();
        assert_eq!(a, b, "{what}");
    }
}

#[test]
fn landed_ud_sends_are_accounted_exactly_like_datagrams() {
    let seeds: u64 = std::env::var("ROCELINK_LANE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let (mut in_place, mut copied, mut refused) = (0, 0, 0);
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let mut w = UdTwins::new();
        for step in 0..200 {
            let k = step % SLOTS;
            let kind = rng.below(12);
            // the receive: the usual one, its GRH slot kept, too short, or none (and none
            // while refused packets left several waiting)
            let waiting = w.land.posted_recvs(w.qpn).count();
            match kind {
                _ if waiting >= 8 => {}
                0 => w.post(recv(k, w.lkey, true, PAYLOAD as u32)),
                1 => w.post(recv(k, w.lkey, false, PAYLOAD as u32 - 4)),
                2 => {}
                _ => w.post(recv(k, w.lkey, false, PAYLOAD as u32)),
            }
            let imm = rng.chance(0.5).then_some(step as u32);
            let qkey = if kind == 3 { QKEY ^ 1 } else { QKEY };
            let mut d = w.send(imm, qkey);
            match kind {
                4 => d[2] ^= 0x01, // another P_Key
                5 => d[7] ^= 0x04, // another QP
                _ => {}
            }
            if matches!(kind, 4 | 5) {
                rocelink_wire::icrc::fill_socket(
                    addr("10.0.0.1:4791"),
                    addr("10.0.0.2:4791"),
                    &mut d,
                )
                .unwrap();
            }
            if kind == 6 {
                let n = d.len();
                d[n - 100] ^= 0x08; // the payload damaged after the ICRC
            }
            // where the backend landed it: where the next receive puts it (as a host plans
            // from its posted receives), or elsewhere
            let next = w.land.posted_recvs(w.qpn).next().unwrap_or(k as u64) as usize;
            let dest = if kind == 7 {
                ((next + 1) % SLOTS) * STRIDE + 64
            } else {
                next * STRIDE + 64
            };
            let what = format!("seed {seed} step {step} kind {kind}");
            match w.feed(&d, dest) {
                Landing::Received { in_place: true } => in_place += 1,
                Landing::Received { in_place: false } => copied += 1,
                Landing::Refused => refused += 1,
                l => panic!("{what}: {l:?}"),
            }
            w.assert_same(&what);
            // whatever is still posted stays posted on both; a step that took none leaves
            // its receive for a later packet, as a host would
        }
    }
    assert!(in_place > 300, "{in_place} in place");
    assert!(copied > 10, "{copied} copied");
    assert!(refused > 10, "{refused} refused");
}
