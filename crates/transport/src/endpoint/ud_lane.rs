//! The lane of [`Endpoint::handle_landed`] for a UD SEND ONLY (with or without immediate)
//! whose payload already sits where the next posted receive puts it — after a discarded
//! 40-byte GRH slot, in the region it landed in — the ultrasound host's case: one message,
//! one packet, one receive. It makes the general path's checks (layout, QP, P_Key, state,
//! Q_Key, the receive's room and access, ICRC) without its general structures (the parsed
//! header set, the GRH built to be discarded, the scatter list walked twice), and changes
//! nothing unless every check passes: any other packet or receive, or any check that
//! fails, leaves the verdict to the general path, which then counts the reason.
//! `tests/landed_ud.rs` holds both paths to the same counters, completions and bytes.

use super::rx::{check_icrc, pkey_match};
use super::{Endpoint, IcrcStatus, Landed, Landing};
use crate::mr::{Access, MrTable};
use crate::qp::{Qp, QpState, QpType};
use crate::wr::{WcOpcode, WcStatus};
use rocelink_wire::ib::ext::Deth;
use rocelink_wire::ib::{BTH_LEN, Bth, DethRepr, GSI_QKEY, ICRC_LEN, Opcode, grh};

/// BTH and DETH: the headers of a UD SEND ONLY (an immediate adds 4 bytes).
const HEADERS: usize = BTH_LEN + DethRepr::LEN;

impl Endpoint {
    /// Accept UD SEND `d` by the lane, or `None` (nothing changed) for the general path.
    pub(super) fn ud_lane(&mut self, d: &Landed<'_>) -> Option<Landing> {
        let imm = match d.headers.len() {
            HEADERS => None,
            n if n == HEADERS + 4 => {
                Some(u32::from_be_bytes(d.headers[HEADERS..].try_into().ok()?))
            }
            _ => return None,
        };
        let bth = Bth::new_unchecked(&d.headers[..BTH_LEN]);
        let op = match imm {
            None => Opcode::UD_SEND_ONLY,
            Some(_) => Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        };
        // no pad (the tail is the ICRC alone) and transport version 0
        if bth.opcode() != op || bth.pad_count() != 0 || bth.tver() != 0 || d.tail.len() != ICRC_LEN
        {
            return None;
        }
        let deth = Deth::new_unchecked(&d.headers[BTH_LEN..HEADERS]);
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
        let q = qps.get_mut(&bth.dest_qp())?;
        let qkey = if q.qpn == 1 { GSI_QKEY } else { q.qkey };
        if q.qp_type != QpType::Ud
            || !matches!(q.state, QpState::Rtr | QpState::Rts)
            || !pkey_match(bth.pkey(), q.pkey)
            || deth.qkey() != qkey
            || q.srq.is_some()
        {
            return None;
        }
        let payload = in_next_recv(q, mrs, d)?;
        let (status, pcrc) = check_icrc(prefixes, comb, cfg.icrc, d.flow(), d.pieces(payload));
        if status != IcrcStatus::Exact {
            return None;
        }
        // taken: accounted as the general path accounts a UD SEND
        stats.rx_datagrams += 1;
        *last_icrc = Some(status);
        q.stats.rx_packets += 1;
        q.rx_payload_crc = pcrc;
        q.rx_solicited = bth.solicited();
        let wr_id = q.rq.pop_front()?.wr_id;
        q.stats.rx_bytes += d.len as u64;
        let need = (grh::SLOT_LEN + d.len) as u32;
        let wc = q.complete_recv(
            wr_id,
            WcStatus::Success,
            WcOpcode::Recv,
            need,
            imm,
            deth.src_qp(),
            d.src,
        );
        sinks.cqs.push(q.recv_cq, wc);
        sinks.landing = None;
        Some(Landing::Received { in_place: true })
    }
}

/// The payload of `d` if it already sits where QP `q`'s next receive puts it: that receive's
/// GRH slot is discarded, then one segment the payload fits in, of a region the receive may
/// write — what the general path's scatter checks find for it.
fn in_next_recv<'m>(q: &Qp, mrs: &'m MrTable, d: &Landed<'_>) -> Option<&'m [u8]> {
    let [grh_slot, into, ..] = *q.rq.front()?.sg_list.as_slice() else {
        return None;
    };
    if !grh_slot.is_discard()
        || grh_slot.len as usize != grh::SLOT_LEN
        || into.is_discard()
        || into.lkey != d.lkey
        || (into.len as usize) < d.len
    {
        return None;
    }
    let r = mrs.get(d.lkey).ok()?;
    if r.check(into.va, d.len as u64, Access::LOCAL_WRITE).ok()? != d.offset {
        return None;
    }
    r.bytes().get(d.offset..d.offset + d.len)
}
