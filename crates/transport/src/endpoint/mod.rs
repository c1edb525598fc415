//! The endpoint: one local address, its memory regions, QPs, completion and event queues.

mod lane;
mod rx;
mod ud_lane;

pub use rx::{Landed, LandedFlow, LandedPart, Landing, Placement, RecvUnderWay, WriteUnderWay};

use crate::keymap::KeyMap;
use crate::mr::{Access, MemoryRegion, MrKeys, MrTable, RegionMemory, SharedMemory};
use crate::qp::{Modify, Qp, QpInit, QpState, Sinks};
use crate::stats::{EndpointStats, QpStats};
use crate::wr::{RecvWr, SendWr, WorkCompletion};
use crate::{AccessError, CqId, Event, QpError};
use rocelink_wire::ib::psn;
use rocelink_wire::icrc;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How received ICRCs are checked when the IP header is not available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IcrcPolicy {
    /// Drop a packet unless its ICRC verifies exactly (IPv6, or IPv4 sent with ID 0 as HSB
    /// devices and rocelink do, or with the real IP header supplied).
    #[default]
    Strict,
    /// As `Strict`, but accept an IPv4 packet received without its header if *some* IPv4
    /// Identification makes the ICRC correct (Linux rxe numbers IDs; a UDP socket never
    /// shows them). This is a 2⁻¹⁶-weak check; such packets are counted as
    /// `icrc_unverified` and reported with [`IcrcStatus::IdRecovered`].
    RecoverIpv4Id,
}

/// What was verified about one received packet's ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IcrcStatus {
    /// Exact: every covered byte was known.
    Exact,
    /// IPv4 via a UDP socket: correct for this (recovered) Identification only.
    IdRecovered(u16),
    /// Wrong (the packet was dropped).
    Failed,
}

/// Which UDP source port QPs send from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SrcPort {
    /// Every QP sends from this port (a single UDP socket).
    Fixed(u16),
    /// Each QP gets `0xC000 | (qpn & 0x3FFF)` (Linux convention; the driver must be able
    /// to send from it).
    PerQp,
}

/// Endpoint configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndpointConfig {
    /// The address peers send to (an explicit IP, UDP port normally 4791).
    pub local: SocketAddr,
    /// Source port policy.
    pub src_port: SrcPort,
    /// ICRC policy.
    pub icrc: IcrcPolicy,
    /// Where QP numbers and memory keys start. 0: the same every time (0x11, 0x19e, … —
    /// what the simulator and tests want); anything else (e.g. [`EndpointConfig::random_keys`])
    /// spreads them, as verbs does, so a stale or blind sender of an earlier session
    /// cannot name this session's QP or region.
    pub key_seed: u64,
    /// How long an RC responder may hold a positive ACK back so that it leaves right behind
    /// the next request its QP sends — the answer a latency test's application posts as
    /// soon as the message is seen — instead of alone just before it (zero, the default:
    /// never). ACKs are cumulative, so later ones replace a held one; a held ACK goes alone
    /// when the delay ends, and a QP whose held ACKs go alone stops holding them until it
    /// answers a message within the delay again. NAKs and READ responses are never held.
    pub ack_delay: Duration,
}

impl EndpointConfig {
    /// Strict ICRC, every QP sending from `local`'s port.
    pub fn new(local: SocketAddr) -> EndpointConfig {
        EndpointConfig {
            local,
            src_port: SrcPort::Fixed(local.port()),
            icrc: IcrcPolicy::Strict,
            key_seed: 0,
            ack_delay: Duration::ZERO,
        }
    }

    /// Set [`EndpointConfig::key_seed`] from the operating system's randomness.
    pub fn random_keys(mut self) -> EndpointConfig {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(self.local.port().into());
        self.key_seed = h.finish() | 1;
        self
    }
}

/// One received UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// Sender (IP and UDP port).
    pub src: SocketAddr,
    /// Where it was received (our IP and port).
    pub dst: SocketAddr,
    /// The IP header as received, if the driver saw it (packet/raw socket). Without it the
    /// header is reconstructed (IPv4: ID 0, DF).
    pub ip_header: Option<&'a [u8]>,
    /// UDP payload: BTH … ICRC.
    pub payload: &'a [u8],
}

/// A datagram written by [`Endpoint::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Transmit {
    /// Destination.
    pub dst: SocketAddr,
    /// UDP source port the ICRC was computed for.
    pub src_port: u16,
    /// Bytes written to the buffer.
    pub len: usize,
    /// The QP it belongs to.
    pub qpn: u32,
    /// From [`Endpoint::poll_transmit_gather`]: the buffer holds the headers only, and the
    /// datagram continues with this region slice and tail.
    pub gather: Option<Gather>,
    /// An acknowledgement or READ response (what a responder sends), not a request.
    pub response: bool,
    /// Its QP's traffic class ([`crate::QpInit::traffic_class`]): the IP header's TOS byte.
    pub traffic_class: u8,
}

/// The rest of a datagram whose payload stays in a memory region: send the headers, then
/// `len` bytes at `offset` of the region with `lkey`, then `tail[..tail_len]` (pad and ICRC,
/// already computed over the region bytes) — as separate iovecs, with no staging copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gather {
    /// Local key of the region.
    pub lkey: u32,
    /// Byte offset of the payload in the region.
    pub offset: usize,
    /// Payload bytes.
    pub len: usize,
    /// Zero pad then the ICRC (little-endian).
    pub tail: [u8; 8],
    /// Bytes of `tail` used.
    pub tail_len: usize,
}

impl Gather {
    /// Bytes this part adds to the datagram.
    pub fn wire_len(&self) -> usize {
        self.len + self.tail_len
    }
}

/// A user-space RoCE v2 endpoint (see the crate documentation).
#[derive(Debug)]
pub struct Endpoint {
    cfg: EndpointConfig,
    mrs: MrTable,
    qps: KeyMap<Qp>,
    order: Vec<u32>,
    rr: usize,
    next_qpn: u32,
    sinks: Sinks,
    stats: EndpointStats,
    last_icrc: Option<IcrcStatus>,
    comb: icrc::Combiner,
    prefixes: crate::prefix::PrefixCache,
}

impl Endpoint {
    /// A new endpoint.
    pub fn new(cfg: EndpointConfig) -> Endpoint {
        let seed = cfg.key_seed;
        Endpoint {
            cfg,
            mrs: MrTable::seeded(seed >> 24),
            qps: KeyMap::default(),
            order: Vec::new(),
            rr: 0,
            // QPNs 0x11.. by default; seeded, anywhere in 0x100..0xFF_0000
            next_qpn: if seed == 0 {
                0x11
            } else {
                0x100 + (seed as u32 & 0xFF_FFFF) % 0xFE_FF00
            },
            sinks: Sinks::default(),
            stats: EndpointStats::default(),
            last_icrc: None,
            comb: icrc::Combiner::default(),
            prefixes: Default::default(),
        }
    }

    /// Configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Register `mem` with its first byte at `va`.
    pub fn register_mr(&mut self, mem: impl RegionMemory, va: u64, access: Access) -> MrKeys {
        self.mrs.register(mem, va, access)
    }

    /// Register with a chosen key (lkey = rkey = `key`), e.g. the R_Key a device was
    /// configured with. `None` if the key is 0 or taken.
    pub fn register_mr_keyed(
        &mut self,
        mem: impl RegionMemory,
        va: u64,
        access: Access,
        key: u32,
    ) -> Option<MrKeys> {
        self.mrs.register_keyed(mem, va, access, key)
    }

    /// Register `mem` as a ring over the whole 64-bit VA space, writable inside
    /// `[start, start + window)` (see [`crate::AddressMap::Ring`]). `None` if the window is
    /// longer than the ring.
    pub fn register_ring_mr(
        &mut self,
        mem: impl RegionMemory,
        access: Access,
        start: u64,
        window: u64,
    ) -> Option<MrKeys> {
        self.mrs.register_ring(mem, access, start, window)
    }

    /// Move a ring region's window; refused for a linear region or a window longer than
    /// the ring.
    pub fn set_ring_window(
        &mut self,
        lkey: u32,
        start: u64,
        window: u64,
    ) -> Result<(), AccessError> {
        self.mrs.set_window(lkey, start, window)
    }

    /// Refuse remote writes into the pages of linear region `lkey` the application holds
    /// (see [`crate::Holds`]).
    pub fn set_holds(&mut self, lkey: u32, holds: Arc<crate::Holds>) -> Result<(), AccessError> {
        self.mrs.set_holds(lkey, holds)
    }

    /// Register memory the application keeps ([`SharedMemory`]: copied in and out, never
    /// lent as a slice) with its first byte at `va`.
    pub fn register_shared_mr(
        &mut self,
        mem: impl SharedMemory,
        va: u64,
        access: Access,
    ) -> MrKeys {
        self.mrs
            .register_memory(crate::Memory::Shared(Box::new(mem)), va, access)
    }

    /// Put region `lkey` in protection domain `pd` (0 by default): from then on only QPs
    /// created with [`crate::QpInit::pd`] = `pd` reach it, as a verbs PD confines its
    /// regions; another domain's key is refused as an unknown one.
    pub fn set_mr_pd(&mut self, lkey: u32, pd: u32) -> Result<(), AccessError> {
        self.mrs.set_pd(lkey, pd)
    }

    /// Deregister a region, returning its memory (`None` also for shared memory, which
    /// [`Endpoint::remove_mr`] returns).
    pub fn deregister_mr(&mut self, lkey: u32) -> Option<Box<dyn RegionMemory>> {
        self.mrs.deregister(lkey)
    }

    /// Deregister a region, owned or shared, returning its memory.
    pub fn remove_mr(&mut self, lkey: u32) -> Option<crate::Memory> {
        self.mrs.remove(lkey)
    }

    /// A registered region.
    pub fn mr(&self, lkey: u32) -> Result<&MemoryRegion, AccessError> {
        self.mrs.get(lkey)
    }

    /// A registered region, mutable (the application's own access).
    pub fn mr_mut(&mut self, lkey: u32) -> Result<&mut MemoryRegion, AccessError> {
        self.mrs.get_mut(lkey)
    }

    /// Lend region `lkey`'s bytes (it needs LOCAL_WRITE) to a backend that puts received
    /// payloads straight into it — the kernel through `recvmmsg` iovecs, say — before they
    /// are handed to [`Endpoint::handle_landed`]. Nothing put there counts as placed, is
    /// reported, or may be relied on until `handle_landed` accepts it; a backend only ever
    /// names bytes no accepted data still needs.
    pub fn landing_zone(&mut self, lkey: u32) -> Result<&mut [u8], AccessError> {
        self.mrs.landing_zone(lkey)
    }

    /// Move `len` not-yet-accepted bytes at `from` of region `lkey`'s landing zone to `to`
    /// (a backend whose prediction of where payloads land was off — by lost packets, say).
    /// Checked against the region and its held pages; moves nothing on error.
    pub fn move_landed(
        &mut self,
        lkey: u32,
        from: usize,
        to: usize,
        len: usize,
    ) -> Result<(), AccessError> {
        if self.mrs.held(lkey, to, len) {
            return Err(AccessError::Held {
                va: to as u64,
                len: len as u64,
            });
        }
        let zone = self.mrs.landing_zone(lkey)?;
        let oob = AccessError::OutOfBounds {
            va: to as u64,
            len: len as u64,
        };
        let (Some(fe), Some(te)) = (from.checked_add(len), to.checked_add(len)) else {
            return Err(oob);
        };
        if fe > zone.len() || te > zone.len() {
            return Err(oob);
        }
        zone.copy_within(from..fe, to);
        Ok(())
    }

    /// Create a completion queue. A QP names it in [`QpInit::send_cq`] / [`QpInit::recv_cq`];
    /// [`Endpoint::poll_cq`] takes its completions.
    pub fn create_cq(&mut self) -> CqId {
        self.sinks.cqs.create()
    }

    /// Destroy CQ `cq` (its completions are dropped). Refused for the default CQ, for one
    /// that does not exist, and while a QP sends or receives into it (`ibv_destroy_cq`'s
    /// EBUSY).
    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), QpError> {
        if cq == CqId::DEFAULT || !self.sinks.cqs.exists(cq) {
            return Err(QpError::InvalidAttr("no such completion queue"));
        }
        if self
            .qps
            .values()
            .any(|q| q.send_cq == cq || q.recv_cq == cq)
        {
            return Err(QpError::Busy);
        }
        self.sinks.cqs.destroy(cq);
        Ok(())
    }

    /// How many completions CQ `cq` was given so far (all, and the solicited ones with
    /// the errors): a driver that remembers them when the application asks to be woken
    /// (`ibv_req_notify_cq`) sees from them when to wake it.
    pub fn cq_counts(&self, cq: CqId) -> Option<crate::CqCounts> {
        self.sinks.cqs.counts(cq)
    }

    /// Completions waiting in CQ `cq`.
    pub fn cq_len(&self, cq: CqId) -> usize {
        self.sinks.cqs.get(cq).map_or(0, |q| q.len())
    }

    /// Next completion of `cq` (`None`: empty, or no such CQ).
    pub fn poll_cq(&mut self, cq: CqId) -> Option<WorkCompletion> {
        self.sinks.cqs.get_mut(cq)?.pop_front()
    }

    /// How many completions were queued so far, in all CQs: a driver that sees it grow
    /// while sending (a UD or UC send completes when it leaves) lets the application poll
    /// before it sleeps.
    pub fn completions_queued(&self) -> u64 {
        self.sinks.cqs.pushed()
    }

    /// Look at the next completion of `cq` without taking it.
    pub fn peek_cq(&self, cq: CqId) -> Option<&WorkCompletion> {
        self.sinks.cqs.get(cq)?.front()
    }

    /// Create a QP in RESET; returns its QPN. Refused if its CQs do not exist.
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, QpError> {
        self.check_cqs(&init)?;
        let mut qpn = self.next_qpn;
        while qpn <= 1 || qpn == psn::MASK || self.qps.contains_key(&qpn) {
            qpn = (qpn + 1) & psn::MASK;
        }
        self.next_qpn = (qpn + 1) & psn::MASK;
        self.insert_qp(qpn, init);
        Ok(qpn)
    }

    fn check_cqs(&self, init: &QpInit) -> Result<(), QpError> {
        if !self.sinks.cqs.exists(init.send_cq) || !self.sinks.cqs.exists(init.recv_cq) {
            return Err(QpError::InvalidAttr("no such completion queue"));
        }
        if let Some(id) = init.srq {
            let s = self
                .sinks
                .srqs
                .get(id)
                .ok_or(QpError::InvalidAttr("no such shared receive queue"))?;
            if s.pd != init.pd {
                return Err(QpError::InvalidAttr("a shared receive queue of another PD"));
            }
        }
        Ok(())
    }

    /// Create a shared receive queue ([`QpInit::srq`] names it): `None` when
    /// [`crate::MAX_SRQS`] exist.
    pub fn create_srq(&mut self, init: crate::SrqInit) -> Option<u32> {
        self.sinks.srqs.create(init)
    }

    /// Post a receive to shared receive queue `srq` (its buffers checked as a QP's are, in
    /// the queue's protection domain).
    pub fn post_srq_recv(&mut self, srq: u32, wr: RecvWr) -> Result<(), QpError> {
        let Endpoint { sinks, mrs, .. } = self;
        let s = sinks
            .srqs
            .get_mut(srq)
            .ok_or(QpError::InvalidAttr("no such shared receive queue"))?;
        if s.rq.len() >= s.max_wr {
            return Err(QpError::QueueFull);
        }
        mrs.check_scatter(&wr.sg_list, 0, wr.sg_list.total_len())
            .map_err(QpError::LocalAccess)?;
        for g in wr.sg_list.as_slice().iter().filter(|g| !g.is_discard()) {
            mrs.get_in(s.pd, g.lkey).map_err(QpError::LocalAccess)?;
        }
        s.rq.push_back(wr);
        Ok(())
    }

    /// Change shared receive queue `srq`: its most receives (not below those posted) and
    /// its limit (0 disarms it; armed, [`crate::Event::SrqLimit`] comes once the queue
    /// falls below it).
    pub fn modify_srq(
        &mut self,
        srq: u32,
        max_wr: Option<usize>,
        limit: Option<u32>,
    ) -> Result<(), QpError> {
        let s = self
            .sinks
            .srqs
            .get_mut(srq)
            .ok_or(QpError::InvalidAttr("no such shared receive queue"))?;
        if let Some(m) = max_wr {
            if m < s.rq.len() {
                return Err(QpError::InvalidAttr("fewer receives than are posted"));
            }
            s.max_wr = m;
        }
        if let Some(l) = limit {
            if l as usize > s.max_wr {
                return Err(QpError::InvalidAttr("a limit above the queue's size"));
            }
            s.limit = l;
        }
        Ok(())
    }

    /// What shared receive queue `srq` holds now.
    pub fn srq_info(&self, srq: u32) -> Option<crate::SrqInfo> {
        self.sinks.srqs.get(srq).map(|s| crate::SrqInfo {
            max_wr: s.max_wr,
            limit: s.limit,
            posted: s.rq.len(),
        })
    }

    /// Destroy shared receive queue `srq` (its receives go with it): `Busy` while a QP
    /// uses it.
    pub fn destroy_srq(&mut self, srq: u32) -> Result<(), QpError> {
        match self.sinks.srqs.get(srq) {
            None => Err(QpError::InvalidAttr("no such shared receive queue")),
            Some(s) if s.users > 0 => Err(QpError::Busy),
            Some(_) => {
                self.sinks.srqs.remove(srq);
                Ok(())
            }
        }
    }

    /// Create a QP with a chosen number (for a peer that was configured with it, e.g. a
    /// device someone else set up). Refused if taken, 0, 1 or the multicast QPN.
    pub fn create_qp_numbered(&mut self, qpn: u32, init: QpInit) -> Result<u32, QpError> {
        if qpn <= 1 || qpn >= psn::MASK || self.qps.contains_key(&qpn) {
            return Err(QpError::InvalidAttr("QPN taken or reserved"));
        }
        self.check_cqs(&init)?;
        self.insert_qp(qpn, init);
        Ok(qpn)
    }

    fn insert_qp(&mut self, qpn: u32, init: QpInit) {
        let port = match self.cfg.src_port {
            SrcPort::Fixed(p) => p,
            SrcPort::PerQp => 0xC000 | (qpn & 0x3FFF) as u16,
        };
        let local = SocketAddr::new(self.cfg.local.ip(), port);
        let mut q = Qp::new(qpn, init, local);
        q.ack_delay = self.cfg.ack_delay;
        if let Some(s) = init.srq.and_then(|id| self.sinks.srqs.get_mut(id)) {
            s.users += 1;
        }
        self.qps.insert(qpn, q);
        self.order.push(qpn);
    }

    /// Send QP `qpn`'s held ACK with the next datagrams instead of waiting (see
    /// [`EndpointConfig::ack_delay`]): before the QP is destroyed or its endpoint closed,
    /// so the peer learns what arrived.
    pub fn release_acks(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.resp.release_held();
        }
    }

    /// Destroy a QP (its outstanding WRs are dropped without completions).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), QpError> {
        let q = self.qps.remove(&qpn).ok_or(QpError::NoQp(qpn))?;
        if let Some(s) = q.srq.and_then(|id| self.sinks.srqs.get_mut(id)) {
            s.users -= 1;
        }
        self.order.retain(|&q| q != qpn);
        Ok(())
    }

    fn qp_mut(&mut self, qpn: u32) -> Result<&mut Qp, QpError> {
        self.qps.get_mut(&qpn).ok_or(QpError::NoQp(qpn))
    }

    /// Change a QP's state (RESET → INIT → RTR → RTS, or to ERROR/RESET).
    pub fn modify_qp(&mut self, qpn: u32, m: Modify) -> Result<(), QpError> {
        let Endpoint { qps, sinks, .. } = self;
        qps.get_mut(&qpn)
            .ok_or(QpError::NoQp(qpn))?
            .modify(m, sinks)
    }

    /// Bring QP `qpn` from RESET to RTS in one call, both directions from PSN 0: Q_Key
    /// `qkey` (UD), then as [`Endpoint::connect_qp`].
    pub fn ready_qp(
        &mut self,
        qpn: u32,
        qkey: u32,
        remote: Option<SocketAddr>,
        dest_qpn: u32,
        mtu: crate::Mtu,
    ) -> Result<(), QpError> {
        self.modify_qp(qpn, Modify::Init { qkey })?;
        self.connect_qp(qpn, remote, dest_qpn, mtu)
    }

    /// Bring QP `qpn` from INIT to RTS: peer `remote` and `dest_qpn` (RC/UC; `None` and 0
    /// for UD), `mtu`, both directions from PSN 0, a 100 ms timeout and unlimited retries.
    pub fn connect_qp(
        &mut self,
        qpn: u32,
        remote: Option<SocketAddr>,
        dest_qpn: u32,
        mtu: crate::Mtu,
    ) -> Result<(), QpError> {
        self.modify_qp(
            qpn,
            Modify::Rtr {
                remote,
                dest_qpn,
                rq_psn: 0,
                mtu,
                min_rnr_timer: 1,
            },
        )?;
        self.modify_qp(
            qpn,
            Modify::Rts {
                sq_psn: 0,
                timeout: Duration::from_millis(100),
                retry_cnt: 7,
                rnr_retry: 7,
            },
        )
    }

    /// Take packets for RC/UC QP `qpn` only from its peer's UDP source port `port` (its
    /// IP is the one it was connected to), instead of learning the port from the first
    /// packet in sequence ([`QpInit::pin_peer_port`]): for a protocol that knows where its
    /// peer sends from before the first packet arrives.
    pub fn set_peer_port(&mut self, qpn: u32, port: u16) -> Result<(), QpError> {
        let q = self.qp_mut(qpn)?;
        q.peer_port = Some(port);
        Ok(())
    }

    /// Send what QP `qpn` sends with traffic class `tc` (the IP header's TOS byte on RoCE
    /// v2: DSCP << 2 | ECN) from now on ([`QpInit::traffic_class`]).
    pub fn set_traffic_class(&mut self, qpn: u32, tc: u8) -> Result<(), QpError> {
        self.qp_mut(qpn)?.traffic_class = tc;
        Ok(())
    }

    /// Let QP `qpn`'s peer do what `access` allows of [`Access::REMOTE_WRITE`],
    /// [`Access::REMOTE_READ`] and [`Access::REMOTE_ATOMIC`] from now on
    /// ([`QpInit::remote_access`]; other bits are ignored). A request the QP does not allow
    /// is refused as one the region does not allow: RC answers a remote access error, UC
    /// drops the message.
    pub fn set_remote_access(&mut self, qpn: u32, access: Access) -> Result<(), QpError> {
        let remote = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        self.qp_mut(qpn)?.remote_access = access.intersection(remote);
        Ok(())
    }

    /// The shared receive queue QP `qpn` takes its receives from, if it has one.
    pub fn qp_srq(&self, qpn: u32) -> Option<u32> {
        self.qps.get(&qpn)?.srq
    }

    /// A QP's state.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// The QPs, in creation order.
    pub fn qp_numbers(&self) -> &[u32] {
        &self.order
    }

    /// A QP's counters.
    pub fn qp_stats(&self, qpn: u32) -> Option<QpStats> {
        self.qps.get(&qpn).map(|q| q.stats)
    }

    /// A QP's service type.
    pub fn qp_type(&self, qpn: u32) -> Option<crate::QpType> {
        self.qps.get(&qpn).map(|q| q.qp_type)
    }

    /// The UDP source port a QP sends from.
    pub fn qp_src_port(&self, qpn: u32) -> Option<u16> {
        self.qps.get(&qpn).map(|q| q.local.port())
    }

    /// Tune the RC send window (packets in flight) and the AckReq interval of a QP.
    pub fn set_rc_window(&mut self, qpn: u32, window: u32, ack_every: u32) -> Result<(), QpError> {
        let q = self.qp_mut(qpn)?;
        q.req.window = window.max(1);
        q.req.ack_every = ack_every.max(1);
        Ok(())
    }

    /// Endpoint counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// Post a send WR.
    /// A WR posted to a QP in ERROR completes at once with [`crate::WcStatus::WrFlushError`]
    /// (InfiniBand's rule); in RESET, INIT or RTR it is refused.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), QpError> {
        let Endpoint {
            qps, mrs, sinks, ..
        } = self;
        qps.get_mut(&qpn)
            .ok_or(QpError::NoQp(qpn))?
            .post_send(wr, None, mrs, sinks)
    }

    /// Post a send WR whose message is `data`, copied now (`IBV_SEND_INLINE`): its gather
    /// list is not read, and `data` may be reused as soon as this returns. At most
    /// [`crate::MAX_INLINE`] bytes; not for a READ.
    pub fn post_send_inline(&mut self, qpn: u32, wr: SendWr, data: &[u8]) -> Result<(), QpError> {
        let Endpoint {
            qps, mrs, sinks, ..
        } = self;
        qps.get_mut(&qpn)
            .ok_or(QpError::NoQp(qpn))?
            .post_send(wr, Some(data), mrs, sinks)
    }

    /// Post a receive WR: refused in RESET; in ERROR it completes at once, flushed.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), QpError> {
        let Endpoint {
            qps, mrs, sinks, ..
        } = self;
        let q = qps.get_mut(&qpn).ok_or(QpError::NoQp(qpn))?;
        if q.state == QpState::Reset {
            return Err(QpError::BadState(q.state));
        }
        if q.state == QpState::Error {
            sinks.cqs.push(q.recv_cq, q.recv_flushed(&wr));
            return Ok(());
        }
        if q.srq.is_some() {
            return Err(QpError::InvalidAttr(
                "the QP takes its receives from a shared queue",
            ));
        }
        if q.rq.len() >= q.max_recv_wr {
            return Err(QpError::QueueFull);
        }
        mrs.check_recv(q.pd_id, &wr.sg_list)
            .map_err(QpError::LocalAccess)?;
        q.rq.push_back(wr);
        Ok(())
    }

    /// The work request IDs of QP `qpn`'s receives still posted (not completed), in the
    /// order they complete.
    pub fn posted_recvs(&self, qpn: u32) -> impl Iterator<Item = u64> + '_ {
        self.qps
            .get(&qpn)
            .into_iter()
            .flat_map(|q| q.rq.iter().map(|r| r.wr_id))
    }

    /// Next completion of the default CQ ([`CqId::DEFAULT`]).
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.poll_cq(CqId::DEFAULT)
    }

    /// Look at the next completion of the default CQ without taking it.
    pub fn peek_completion(&self) -> Option<&WorkCompletion> {
        self.peek_cq(CqId::DEFAULT)
    }

    /// Next event of any QP.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.sinks.events.pop_front()
    }

    /// Next event of QP `qpn` (events of other QPs stay queued for their owners).
    pub fn poll_qp_event(&mut self, qpn: u32) -> Option<Event> {
        self.sinks.events.pop_qp(qpn)
    }

    /// What the last `handle_datagram` verified of the ICRC (`None` if it never got that far).
    pub fn last_icrc(&self) -> Option<IcrcStatus> {
        self.last_icrc
    }

    /// Earliest time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps.values().filter_map(Qp::next_timeout).min()
    }

    /// Run the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Endpoint { qps, sinks, .. } = self;
        for q in qps.values_mut() {
            if q.next_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now, sinks);
            }
        }
    }

    /// Write the next datagram (BTH … ICRC) into `buf`. QPs are served round-robin; within
    /// a QP a ready request goes first (a reply the application posted leaves ahead of the
    /// ACK of what it answers, and both can share one GSO send), but a response passed over
    /// once goes next, so under a stream of requests the two alternate and neither starves.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.poll_transmit_inner(now, buf, false)
    }

    /// As [`Endpoint::poll_transmit`], but a request whose payload (512 bytes or more; a
    /// smaller one is cheaper to copy than to send as its own iovec) comes from a memory
    /// region leaves it there: `buf` gets the headers and [`Transmit::gather`] says which
    /// region bytes and tail follow (for a gather send). The ICRC is computed over the
    /// region bytes, which must not change until the datagram is sent.
    pub fn poll_transmit_gather(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.poll_transmit_inner(now, buf, true)
    }

    fn poll_transmit_inner(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        gather: bool,
    ) -> Option<Transmit> {
        let n = self.order.len();
        let Endpoint {
            qps,
            mrs,
            sinks,
            order,
            rr,
            stats,
            ..
        } = self;
        // QPs destroyed since may have left the turn past the end
        let start = if *rr < n { *rr } else { 0 };
        for i in 0..n {
            let k = start + i;
            let qpn = order[if k < n { k } else { k - n }];
            let Some(q) = qps.get_mut(&qpn) else { continue };
            let response_ready = q.has_response();
            let out = if q.response_turn && response_ready {
                q.poll_response(mrs, buf, gather)
                    .map(|o| (o, false))
                    .or_else(|| {
                        q.poll_request(now, mrs, buf, sinks, gather)
                            .map(|o| (o, true))
                    })
            } else {
                q.poll_request(now, mrs, buf, sinks, gather)
                    .map(|o| (o, true))
                    .or_else(|| {
                        // a response only where one waits: most polls between posts
                        // find nothing at all
                        response_ready
                            .then(|| q.poll_response(mrs, buf, gather))
                            .flatten()
                            .map(|o| (o, false))
                    })
            };
            if let Some(((dst, len, gather), request)) = out {
                // a response passed over by a request goes next; otherwise requests first
                q.response_turn = request && response_ready;
                if request {
                    // a held ACK rides right behind it
                    q.request_sent(now);
                }
                *rr = (start + i + 1) % n;
                stats.tx_datagrams += 1;
                return Some(Transmit {
                    dst,
                    src_port: q.local.port(),
                    len,
                    qpn,
                    gather,
                    response: !request,
                    traffic_class: q.traffic_class,
                });
            }
        }
        None
    }
}
