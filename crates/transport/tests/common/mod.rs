//! A two-endpoint harness: regions on both sides, QPs connected, data patterns that
//! identify every message, and checks of what arrived.
#![allow(dead_code, clippy::unwrap_used)]

pub(crate) mod ring;
pub(crate) mod twins;

use rocelink_transport::sim::{LinkConfig, Pair, Rng, connect};
use rocelink_transport::*;
use std::net::SocketAddr;
use std::time::Instant;

pub(crate) const REGION: usize = 1 << 20;

pub(crate) struct Harness {
    pub(crate) pair: Pair,
    pub(crate) qa: u32,
    pub(crate) qb: u32,
    /// A's source/READ-destination region (VA 0x10_0000).
    pub(crate) a_mem: MrKeys,
    /// B's WRITE target / READ source region (VA 0).
    pub(crate) b_mem: MrKeys,
    /// B's RECV buffers (VA 0x4000_0000).
    pub(crate) b_recv: MrKeys,
}

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

impl Harness {
    pub(crate) fn new(t: QpType, mtu: Mtu, link: LinkConfig, seed: u64) -> Harness {
        Self::with_addrs(
            t,
            mtu,
            link,
            seed,
            addr("10.0.0.1:4791"),
            addr("10.0.0.2:4791"),
        )
    }

    pub(crate) fn with_addrs(
        t: QpType,
        mtu: Mtu,
        link: LinkConfig,
        seed: u64,
        a_addr: SocketAddr,
        b_addr: SocketAddr,
    ) -> Harness {
        let mut a = Endpoint::new(EndpointConfig::new(a_addr));
        let mut b = Endpoint::new(EndpointConfig::new(b_addr));
        let a_mem = a.register_mr(
            vec![0u8; REGION].into_boxed_slice(),
            0x10_0000,
            Access::LOCAL_WRITE,
        );
        let b_mem = b.register_mr(
            vec![0u8; REGION].into_boxed_slice(),
            0,
            Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE,
        );
        let b_recv = b.register_mr(
            vec![0u8; REGION].into_boxed_slice(),
            0x4000_0000,
            Access::LOCAL_WRITE,
        );
        let qa = a.create_qp(QpInit::new(t)).unwrap();
        let qb = b.create_qp(QpInit::new(t)).unwrap();
        let mut r = Rng::new(seed ^ 0xABCD);
        let (pa, pb) = (
            (r.next_u64() & 0xFF_FFFF) as u32,
            (r.next_u64() & 0xFF_FFFF) as u32,
        );
        connect(&mut a, qa, &mut b, qb, mtu, pa, pb, 0x1111_1111).unwrap();
        Harness {
            pair: Pair::new(a, b, link, seed, Instant::now()),
            qa,
            qb,
            a_mem,
            b_mem,
            b_recv,
        }
    }

    /// Fill A's region at `off` with a pattern unique to `tag`.
    pub(crate) fn fill_a(&mut self, off: usize, len: usize, tag: u64) {
        let m = self.pair.a.mr_mut(self.a_mem.lkey).unwrap().bytes_mut();
        fill(&mut m[off..off + len], tag);
    }

    pub(crate) fn fill_b(&mut self, off: usize, len: usize, tag: u64) {
        let m = self.pair.b.mr_mut(self.b_mem.lkey).unwrap().bytes_mut();
        fill(&mut m[off..off + len], tag);
    }

    pub(crate) fn a_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.pair.a.mr(self.a_mem.lkey).unwrap().bytes()[off..off + len].to_vec()
    }
    pub(crate) fn b_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.pair.b.mr(self.b_mem.lkey).unwrap().bytes()[off..off + len].to_vec()
    }
    pub(crate) fn b_recv_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.pair.b.mr(self.b_recv.lkey).unwrap().bytes()[off..off + len].to_vec()
    }

    pub(crate) fn sge_a(&self, off: usize, len: usize) -> Sge {
        Sge {
            lkey: self.a_mem.lkey,
            va: self.a_mem.va + off as u64,
            len: len as u32,
        }
    }

    pub(crate) fn post_recv_b(&mut self, wr_id: u64, off: usize, len: usize) {
        let sge = Sge {
            lkey: self.b_recv.lkey,
            va: self.b_recv.va + off as u64,
            len: len as u32,
        };
        self.pair
            .b
            .post_recv(self.qb, RecvWr::new(wr_id, sge))
            .unwrap();
    }
}

/// A pattern that differs for every tag and offset.
pub(crate) fn fill(buf: &mut [u8], tag: u64) {
    let mut r = Rng::new(tag);
    for chunk in buf.chunks_mut(8) {
        let v = r.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

pub(crate) fn pattern(len: usize, tag: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, tag);
    v
}

pub(crate) fn drain(ep: &mut Endpoint) -> Vec<WorkCompletion> {
    std::iter::from_fn(|| ep.poll_completion()).collect()
}

/// An endpoint at `addr` with region `mem` (`access`, VA 0), one CQ and a UD QP ready with
/// Q_Key `qkey` (4 KiB MTU, 64 WRs each way): (endpoint, region keys, CQ, QPN).
pub(crate) fn ud_end(
    addr: SocketAddr,
    mem: Vec<u8>,
    access: Access,
    qkey: u32,
) -> (Endpoint, MrKeys, CqId, u32) {
    let mut ep = Endpoint::new(EndpointConfig::new(addr));
    let mr = ep.register_mr(mem.into_boxed_slice(), 0, access);
    let cq = ep.create_cq();
    let init = QpInit {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 64,
        max_recv_wr: 64,
        ..QpInit::new(QpType::Ud)
    };
    let qp = ep.create_qp(init).unwrap();
    ep.ready_qp(qp, qkey, None, 0, Mtu::M4096).unwrap();
    (ep, mr, cq, qp)
}
