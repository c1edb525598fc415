//! Twin receivers for the landing tests: one fed whole datagrams, one fed the same
//! packets as landed payloads, and checks that everything observable of the two agrees.

use rocelink_transport::sim::connect;
use rocelink_transport::*;
use rocelink_wire::ib::IbPacket;
use rocelink_wire::icrc;
use std::net::SocketAddr;
use std::time::Instant;

pub(crate) const REGION: usize = 1 << 16;
pub(crate) const MTU: usize = 4096;

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A sender and two identical receivers (same keys and QP numbers).
pub(crate) struct Twins {
    pub(crate) a: Endpoint,
    pub(crate) qa: u32,
    /// Fed whole datagrams.
    pub(crate) copy: Endpoint,
    /// Fed landed payloads.
    pub(crate) land: Endpoint,
    pub(crate) qb: u32,
    /// The sender's source region (VA 0x10_0000).
    pub(crate) src: MrKeys,
    /// The receivers' target region (VA 0).
    pub(crate) dst: MrKeys,
    /// The receivers' RECV buffers, and a second region to land in.
    pub(crate) recv: MrKeys,
    /// What `handle_landed` returned placed, as the copying twin's events say it.
    pub(crate) returned: Vec<Event>,
    pub(crate) now: Instant,
}

impl Twins {
    pub(crate) fn new(t: QpType) -> Twins {
        let (aa, ba) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
        let mut a = Endpoint::new(EndpointConfig::new(aa));
        let data: Vec<u8> = (0..REGION).map(|i| (i * 7 + i / 251) as u8).collect();
        let src = a.register_mr(data.into_boxed_slice(), 0x10_0000, Access::LOCAL_WRITE);
        let qa = a.create_qp(QpInit::new(t)).unwrap();
        let mut eps = Vec::new();
        let (mut dst, mut recv, mut qb) = (None, None, 0);
        for _ in 0..2 {
            let mut b = Endpoint::new(EndpointConfig::new(ba));
            dst = Some(b.register_mr(
                vec![0u8; REGION].into_boxed_slice(),
                0,
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
            ));
            recv = Some(b.register_mr(
                vec![0u8; REGION].into_boxed_slice(),
                0x4000_0000,
                Access::LOCAL_WRITE,
            ));
            qb = b
                .create_qp(QpInit {
                    report_writes: true,
                    ..QpInit::new(t)
                })
                .unwrap();
            eps.push(b);
        }
        let land = eps.pop().unwrap();
        let mut copy = eps.pop().unwrap();
        connect(&mut a, qa, &mut copy, qb, Mtu::M4096, 100, 0xFF_FFF0, 0).unwrap();
        let mut land = land;
        // the same connection on the twin (the sender's side is already set)
        let mut a2 = Endpoint::new(EndpointConfig::new(aa));
        let qa2 = a2.create_qp(QpInit::new(t)).unwrap();
        connect(&mut a2, qa2, &mut land, qb, Mtu::M4096, 100, 0xFF_FFF0, 0).unwrap();
        let recv = recv.unwrap();
        for b in [&mut copy, &mut land] {
            for i in 0..8 {
                let sge = Sge {
                    lkey: recv.lkey,
                    va: 0x4000_0000 + i * 1024,
                    len: 1024,
                };
                b.post_recv(qb, RecvWr::new(i, sge)).unwrap();
            }
        }
        Twins {
            a,
            qa,
            copy,
            land,
            qb,
            src,
            dst: dst.unwrap(),
            recv,
            returned: Vec::new(),
            now: Instant::now(),
        }
    }

    /// Post a WRITE (with `imm`) of `len` bytes from source offset `from` to `va`, and
    /// return its datagrams.
    pub(crate) fn write(&mut self, va: u64, from: u64, len: u32, imm: Option<u32>) -> Vec<Vec<u8>> {
        let op = match imm {
            Some(imm) => SendOp::WriteImm {
                va,
                rkey: self.dst.rkey,
                imm,
            },
            None => SendOp::Write {
                va,
                rkey: self.dst.rkey,
            },
        };
        let wr = SendWr {
            wr_id: 1,
            op,
            sg_list: Sge {
                lkey: self.src.lkey,
                va: 0x10_0000 + from,
                len,
            }
            .into(),
            signaled: false,
            solicited: false,
            marks: 0,
        };
        self.a.post_send(self.qa, wr).unwrap();
        self.sent()
    }

    /// Give one datagram to the copying twin, and to the landing twin as a landed payload at
    /// `dest` of the target region (the backend's guess of where it belongs).
    pub(crate) fn feed(&mut self, d: &[u8], dest: usize) -> Landing {
        let src = addr("10.0.0.1:4791");
        let dst = addr("10.0.0.2:4791");
        self.copy.handle_datagram(
            self.now,
            Datagram {
                src,
                dst,
                ip_header: None,
                payload: d,
            },
        );
        let l = land(&mut self.land, d, self.dst.lkey, dest);
        if let Some(p) = l.placement() {
            self.returned.push(Event::Placed {
                qpn: self.qb,
                psn: p.psn,
                rkey: p.rkey,
                va: p.va,
                len: p.len,
                crc: p.crc,
            });
        }
        l
    }

    /// [`Twins::feed`], the backend's write of the payload at `dest` made on both twins, so
    /// that their regions stay byte-identical whatever is refused (a refused payload leaves
    /// its bytes where it landed, on both).
    pub(crate) fn feed_mirrored(&mut self, d: &[u8], dest: usize) -> Landing {
        let p = IbPacket::new_checked(d).unwrap();
        let (h, n) = (p.header_len(), p.payload_len());
        let zone = self.copy.landing_zone(self.dst.lkey).unwrap();
        if dest + n <= zone.len() {
            zone[dest..dest + n].copy_from_slice(&d[h..h + n]);
        }
        self.feed(d, dest)
    }

    /// Everything observable of both receivers is the same (the target regions' bytes in
    /// `range`: outside the written data, a landing twin may hold landed bytes).
    pub(crate) fn assert_same(&mut self, range: std::ops::Range<usize>) {
        assert_eq!(self.copy.stats(), self.land.stats());
        assert_eq!(self.copy.qp_stats(self.qb), self.land.qp_stats(self.qb));
        let (c, l) = (
            &self.copy.mr(self.dst.lkey).unwrap().bytes()[range.clone()],
            &self.land.mr(self.dst.lkey).unwrap().bytes()[range.clone()],
        );
        assert!(c == l, "target bytes differ in {range:?}");
        // the copying twin queues its placements; the landing one returned them (and queued
        // those of the datagrams it was given after a copy, which came last)
        let copied: Vec<Event> = std::iter::from_fn(|| self.copy.poll_event()).collect();
        let landed: Vec<Event> = std::iter::from_fn(|| self.land.poll_event()).collect();
        let is_placed = |e: &Event| matches!(e, Event::Placed { .. });
        let (placed, other): (Vec<Event>, Vec<Event>) = copied.into_iter().partition(is_placed);
        let (queued, landed): (Vec<Event>, Vec<Event>) = landed.into_iter().partition(is_placed);
        let mut returned = std::mem::take(&mut self.returned);
        returned.extend(queued);
        assert_eq!(placed, returned);
        assert_eq!(other, landed);
        loop {
            let (c1, c2) = (self.copy.poll_completion(), self.land.poll_completion());
            assert_eq!(c1, c2);
            if c1.is_none() {
                break;
            }
        }
        let (mut b1, mut b2) = (Vec::new(), Vec::new());
        loop {
            let t1 = self.copy.poll_transmit(self.now, &mut b1);
            let t2 = self.land.poll_transmit(self.now, &mut b2);
            assert_eq!(t1, t2);
            let Some(t) = t1 else { break };
            assert_eq!(b1[..t.len], b2[..t.len], "responses differ");
        }
    }
}

/// The backend's part: put `d`'s payload at `dest` of region `lkey`, then hand the headers
/// and tail to the endpoint.
pub(crate) fn land(ep: &mut Endpoint, d: &[u8], lkey: u32, dest: usize) -> Landing {
    let p = IbPacket::new_checked(d).unwrap();
    let (h, n) = (p.header_len(), p.payload_len());
    let zone = ep.landing_zone(lkey).unwrap();
    if dest + n <= zone.len() {
        zone[dest..dest + n].copy_from_slice(&d[h..h + n]);
    }
    ep.handle_landed(
        Instant::now(),
        Landed {
            src: addr("10.0.0.1:4791"),
            dst: addr("10.0.0.2:4791"),
            headers: &d[..h],
            lkey,
            offset: dest,
            len: n,
            tail: &d[h + n..],
        },
    )
}

pub(crate) fn refill_icrc(d: &mut [u8]) {
    icrc::fill_socket(addr("10.0.0.1:4791"), addr("10.0.0.2:4791"), d).unwrap();
}

impl Twins {
    /// What the sender sends now.
    pub(crate) fn sent(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while let Some(t) = self.a.poll_transmit(self.now, &mut buf) {
            out.push(buf[..t.len].to_vec());
        }
        out
    }

    /// Post a SEND of `len` bytes from source offset `from`; its datagrams.
    pub(crate) fn send(&mut self, from: u64, len: u32) -> Vec<Vec<u8>> {
        let sge = Sge {
            lkey: self.src.lkey,
            va: 0x10_0000 + from,
            len,
        };
        self.a
            .post_send(self.qa, SendWr::new(2, SendOp::Send, sge))
            .unwrap();
        self.sent()
    }

    /// Give a SEND's datagram to the copying twin, and to the landing twin landed at
    /// `dest` of the receive region.
    pub(crate) fn feed_send(&mut self, d: &[u8], dest: usize) -> Landing {
        let (src, dst) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
        let payload = d;
        self.copy.handle_datagram(
            self.now,
            Datagram {
                src,
                dst,
                ip_header: None,
                payload,
            },
        );
        land(&mut self.land, d, self.recv.lkey, dest)
    }
}
