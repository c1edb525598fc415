//! The lane of [`Endpoint::handle_landed`] for its common case — a UC RDMA WRITE ONLY
//! without immediate, in order, to a QP between messages, already where its RETH points —
//! which makes the same checks as the general path without building its general structures
//! (the parsed header set, the datagram, the dispatch by opcode). It changes nothing unless
//! every check passes; any other packet, or any check that fails, leaves the verdict to the
//! general path, which then counts the reason. `tests/landed.rs` holds both paths to the
//! same counters, events and bytes.

use super::rx::{check_icrc, pkey_match};
use super::{Endpoint, IcrcStatus, Landed, Landing};
use rocelink_wire::ib::ext::Reth;
use rocelink_wire::ib::{BTH_LEN, Bth, ICRC_LEN, Opcode};

/// BTH and RETH: the headers of a WRITE ONLY without immediate.
const HEADERS: usize = BTH_LEN + 16;

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
}
