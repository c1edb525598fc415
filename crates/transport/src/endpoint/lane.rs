//! The lane of [`Endpoint::handle_landed`] for its common case — a UC RDMA WRITE ONLY
//! without immediate, in order, to a QP between messages, already where its RETH points —
//! which makes the same checks as the general path without building its general structures
//! (the parsed header set, the datagram, the dispatch by opcode). It changes nothing unless
//! every check passes; any other packet, or any check that fails, leaves the verdict to the
//! general path, which then counts the reason. `tests/landed.rs` holds both paths to the
//! same counters, events and bytes.
//!
//! A run of such packets ([`Endpoint::handle_landed_run`]) — one sender's WRITE ONLY
//! packets back to back, as one GRO message brings them — takes its first packet by the
//! lane and each later one by comparison with the one before: the same bytes where they
//! must be the same (BTH up to the PSN, R_Key), the next PSN, the next VA and the next
//! offset in the region, and its own ICRC from the run's IP+UDP prefix. The QP, the region
//! and the prefix are looked up once per run. The first packet that differs in any way is
//! left, with the rest of the run, to the caller's per-packet path.

use super::rx::{check_icrc, exact_icrc, pkey_match};
use super::{Endpoint, IcrcStatus, Landed, LandedFlow, LandedPart, Landing, Placement};
use rocelink_wire::ib::ext::Reth;
use rocelink_wire::ib::{BTH_LEN, Bth, ICRC_LEN, Opcode, psn};

/// BTH and RETH: the headers of a WRITE ONLY without immediate.
const HEADERS: usize = BTH_LEN + 16;
/// The header bytes every packet of a run repeats: the BTH up to its PSN (opcode, flags,
/// P_Key, destination QP, AckReq) …
const SAME_BTH: std::ops::Range<usize> = 0..9;
/// … and the RETH's R_Key.
const SAME_RKEY: std::ops::Range<usize> = BTH_LEN + 8..BTH_LEN + 12;
/// The most bytes a run's region bounds and held pages are looked up for at once: a GRO
/// message holds at most 64 KiB.
const RUN_SPAN: usize = 1 << 16;

impl Endpoint {
    /// Accept `d` by the lane, or `None` (nothing changed) for the general path.
    pub(super) fn landed_lane(&mut self, d: &Landed<'_>) -> Option<Landing> {
        if d.headers.len() != HEADERS || d.tail.len() != ICRC_LEN {
            return None;
        }
        let bth = Bth::new_unchecked(&d.headers[..BTH_LEN]);
        // no pad (the tail is the ICRC alone) and transport version 0
        if bth.opcode() != Opcode::UC_RDMA_WRITE_ONLY || bth.pad_count() != 0 || bth.tver() != 0 {
            return None;
        }
        let reth = Reth::new_unchecked(&d.headers[BTH_LEN..]);
        let (psn, qpn) = (bth.psn(), bth.dest_qp());
        let (va, rkey) = (reth.va(), reth.rkey());
        if reth.dma_len() as usize != d.len {
            return None;
        }
        let Endpoint {
            qps,
            mrs,
            sinks,
            prefixes,
            comb,
            cfg,
            stats,
            last_icrc,
            ..
        } = self;
        let q = qps.get_mut(&qpn)?;
        if !pkey_match(bth.pkey(), q.pkey)
            || !q.is_peer(d.src)
            || !q.uc_write_only_ready(psn, d.len)
        {
            return None;
        }
        // in place (where its RETH says, in the region it landed in): one region lookup
        // for the bounds, the access and the bytes the ICRC reads
        if d.lkey != rkey {
            return None;
        }
        let payload = mrs.in_place(q.pd_id, rkey, va, d.len, d.offset)?;
        let (status, pcrc) = check_icrc(prefixes, comb, cfg.icrc, d.flow(), d.pieces(payload));
        if status != IcrcStatus::Exact {
            return None;
        }
        stats.rx_datagrams += 1;
        *last_icrc = Some(status);
        sinks.landing = None;
        q.learn_peer_port(d.src);
        let p = q.uc_write_only_placed(psn, rkey, va, d.len, pcrc, sinks);
        Some(Landing::InPlace(Some(p)))
    }

    /// Process a run of landed packets from one sender into one region (`flow`) as
    /// [`Endpoint::handle_landed`] would each, as long as they are UC RDMA WRITE ONLY
    /// packets without immediate to one QP, in PSN order, each payload already in place
    /// right after the one before: their placements are pushed to `placed`, and the count
    /// taken is returned. The first packet that is not (or fails any check) is left
    /// untouched, with the rest of the run, for [`Endpoint::handle_landed`], which then
    /// gives and counts its verdict; 0 when that is the first. Every packet is checked as
    /// strictly as by the per-packet path (ICRC, QP, peer, P_Key, PSN, R_Key, access,
    /// bounds, held pages); what the run saves is the lookups and the general structures.
    pub fn handle_landed_run<'a>(
        &mut self,
        flow: LandedFlow,
        run: impl IntoIterator<Item = LandedPart<'a>>,
        placed: &mut Vec<Placement>,
    ) -> usize {
        let mut run = run.into_iter();
        let Some(first) = run.next() else {
            return 0;
        };
        let Some(Landing::InPlace(Some(p))) = self.landed_lane(&flow.landed(first)) else {
            return 0;
        };
        placed.push(p);
        let Endpoint {
            qps,
            mrs,
            sinks,
            prefixes,
            comb,
            stats,
            ..
        } = self;
        // the lane took the first packet: its QP and region are there
        let (Some(q), Some(head)) = (
            qps.get_mut(&Bth::new_unchecked(&first.headers[..BTH_LEN]).dest_qp()),
            first.headers.get(..HEADERS),
        ) else {
            return 1;
        };
        let Ok(r) = mrs.get_in(q.pd_id, p.rkey) else {
            return 1;
        };
        let mut next = Next {
            head,
            region: r,
            // where the run may go on in place, looked up once (a ring region: each packet)
            span: r.in_place_span(first.offset + first.len, RUN_SPAN),
            mtu: q.mtu_bytes,
            rkey: p.rkey,
            va: p.va.wrapping_add(u64::from(p.len)),
            offset: first.offset + first.len,
            psn: psn::add(p.psn, 1),
            prefix: (0, None),
        };
        // the QP is accounted for the rest at the end (`Next` keeps what it expects next)
        let rest = placed.len();
        for d in run {
            let Some(p) = next.take(&d, &flow, prefixes, comb) else {
                break;
            };
            placed.push(p);
        }
        q.uc_write_only_run_placed(&placed[rest..], sinks);
        let taken = 1 + placed.len() - rest;
        stats.rx_datagrams += taken as u64 - 1;
        taken
    }
}

/// What the next packet of a run must be, and what the run looked up once.
struct Next<'r> {
    /// The first packet's headers (BTH and RETH).
    head: &'r [u8],
    region: &'r crate::mr::MemoryRegion,
    span: Option<crate::mr::InPlaceSpan<'r>>,
    /// The QP's path MTU in bytes.
    mtu: usize,
    rkey: u32,
    /// Where the next packet's payload goes: VA, offset in the region …
    va: u64,
    offset: usize,
    /// … and the PSN it must carry.
    psn: u32,
    /// The IP+UDP ICRC prefix of the last IB length seen.
    prefix: (usize, Option<rocelink_wire::icrc::IcrcHasher>),
}

impl Next<'_> {
    /// Whether `d` is the packet this run expects next, checked as the lane checks its
    /// first (the rest of `uc_write_only_ready` held for the first and holds still:
    /// nothing else touches the QP during the run): its placement, the run moved on past
    /// it; `None`, nothing changed, to end the run there.
    #[inline(always)]
    fn take(
        &mut self,
        d: &LandedPart<'_>,
        flow: &LandedFlow,
        prefixes: &mut crate::prefix::PrefixCache,
        comb: &mut rocelink_wire::icrc::Combiner,
    ) -> Option<Placement> {
        let h = d
            .headers
            .get(..HEADERS)
            .filter(|h| h.len() == d.headers.len())?;
        if d.tail.len() != ICRC_LEN
            || h[SAME_BTH] != self.head[SAME_BTH]
            || h[SAME_RKEY] != self.head[SAME_RKEY]
            || d.offset != self.offset
        {
            return None;
        }
        let (bth, reth) = (
            Bth::new_unchecked(&h[..BTH_LEN]),
            Reth::new_unchecked(&h[BTH_LEN..]),
        );
        let psn = bth.psn();
        if psn != self.psn
            || reth.va() != self.va
            || reth.dma_len() as usize != d.len
            || d.len == 0
            || d.len > self.mtu
        {
            return None;
        }
        let payload = match &self.span {
            Some(s) => s.bytes(self.va, d.len, d.offset),
            None => self.region.in_place(self.va, d.len, d.offset),
        }?;
        let ib_len = HEADERS + d.len + ICRC_LEN;
        if self.prefix.0 != ib_len || self.prefix.1.is_none() {
            self.prefix = (ib_len, prefixes.get(&flow.src, &flow.dst, ib_len));
        }
        let crc = exact_icrc(self.prefix.1.as_ref()?, comb, d.pieces(payload))?;
        let p = Placement {
            psn,
            rkey: self.rkey,
            va: self.va,
            len: d.len as u32,
            crc,
        };
        self.va = self.va.wrapping_add(d.len as u64);
        self.offset += d.len;
        self.psn = psn::add(psn, 1);
        Some(p)
    }
}
