//! The UD send lane: a UD SEND whose payload is one piece of a region, sent by gather.
//! A probe sends shot after shot to one receiver, so the headers of a SEND are those of
//! the one before but for the PSN and the immediate: they are kept per QP with the ICRC's
//! state after the bytes that stay the same (the IP and UDP headers, the BTH up to its
//! PSN), then copied and patched. Everything else — inline data, several pieces, shared
//! memory, a payload small enough to copy, a region gone since posting — takes the
//! general path, and both write the same bytes (the `ud_send_lane` tests).

use super::{Qp, Sinks};
use crate::mr::MrTable;
use crate::prefix::PrefixCache;
use crate::qp::GATHER_MIN;
use crate::wr::{SendOp, UdDest, WcStatus};
use rocelink_wire::ib::{BTH_LEN, BthRepr, DethRepr, IbRepr, pad_for};
use rocelink_wire::icrc::IcrcHasher;
use std::net::SocketAddr;

/// BTH, DETH and ImmDt.
const MAX_HEADERS: usize = BTH_LEN + DethRepr::LEN + 4;

/// Where the BTH's PSN word starts; the bytes before it stay the same for one destination.
const PSN_AT: usize = 8;

/// Where the ImmDt starts.
const IMM_AT: usize = BTH_LEN + DethRepr::LEN;

/// Everything a UD SEND's headers and ICRC depend on besides its PSN and immediate, and
/// the QP's local address (fixed when it was created). Compared field by field in this
/// order: the numbers first, the address last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UdKey {
    len: u32,
    imm: bool,
    /// The QP's own Q_Key (the one sent where the destination's has its high bit set).
    qkey: u32,
    pkey: u16,
    dest: UdDest,
}

/// The headers of the last UD SEND sent by gather, with the PSN and immediate to patch,
/// and the ICRC's state after its fixed bytes.
#[derive(Debug, Clone)]
pub(crate) struct UdHeaders {
    key: UdKey,
    bytes: [u8; MAX_HEADERS],
    len: usize,
    /// Zero bytes after the payload.
    pad: usize,
    /// The ICRC after the IP and UDP headers and the BTH's first 8 bytes.
    crc: IcrcHasher,
}

impl UdHeaders {
    /// The headers for `key` sent from `from`, from `ib` (its PSN and immediate zero);
    /// `None` where the ICRC cannot be started (mixed address families).
    fn new(
        key: UdKey,
        from: SocketAddr,
        ib: &IbRepr,
        prefixes: &mut PrefixCache,
    ) -> Option<UdHeaders> {
        let mut bytes = [0u8; MAX_HEADERS];
        let len = ib.header_len();
        ib.emit_headers(bytes.get_mut(..len)?);
        let mut crc = prefixes.get(&from, &key.dest.addr, ib.buffer_len())?;
        crc.update_bth_head(bytes[..PSN_AT].try_into().ok()?);
        Some(UdHeaders {
            key,
            bytes,
            len,
            pad: usize::from(ib.bth.pad_count),
            crc,
        })
    }
}

impl Qp {
    /// Send the first WQE of a UD QP's queue by the lane, if it is a UD SEND the lane
    /// takes: its headers into `buf`, the completion if signaled. `None` leaves it to the
    /// general path, untouched. (A UD WQE is one packet and leaves the queue once sent,
    /// so the first is the next to send.)
    pub(super) fn ud_send_gathered(
        &mut self,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
        sinks: &mut Sinks,
    ) -> Option<(SocketAddr, usize, Option<crate::Gather>)> {
        let w = self.req.sq.front()?;
        if w.next_pkt != 0 {
            return None;
        }
        let p = w.first_psn;
        let SendOp::UdSend { dest, imm } = w.wr.op else {
            return None;
        };
        let [sge] = w.wr.sg_list.as_slice() else {
            return None;
        };
        if w.inline.is_some() || (w.len as usize) < GATHER_MIN {
            return None;
        }
        let (lkey, len) = (sge.lkey, w.len as usize);
        let region = mrs.get(lkey).ok()?;
        // the offset checked at posting holds while no region has changed since
        let (payload, offset) = match w.gather_at {
            Some((g, off)) if g == mrs.generation() => (region.bytes_at(off, len)?, off),
            _ => region.readable_at(sge.va, len as u64)?,
        };
        let key = UdKey {
            len: w.len,
            imm: imm.is_some(),
            qkey: self.qkey,
            pkey: self.pkey,
            dest,
        };
        let h = self.ud_headers_for(&key)?;
        let mut head = h.bytes;
        head[PSN_AT..BTH_LEN].copy_from_slice(&(p & rocelink_wire::ib::psn::MASK).to_be_bytes());
        if let Some(i) = imm {
            head[IMM_AT..].copy_from_slice(&i.to_be_bytes());
        }
        // all of the array (a copy of known size), then cut to the headers used
        buf.resize(MAX_HEADERS, 0);
        buf.copy_from_slice(&head);
        buf.truncate(h.len);
        let mut crc = h.crc.clone();
        crc.update(&head[PSN_AT..h.len]);
        crc.update(payload);
        let mut tail = [0u8; 8];
        if h.pad > 0 {
            crc.update(&tail[..h.pad]);
        }
        tail[h.pad..h.pad + 4].copy_from_slice(&crc.finalize().to_le_bytes());
        let gather = crate::Gather {
            lkey,
            offset,
            len,
            tail,
            tail_len: h.pad + 4,
        };
        let n = h.len;
        self.ud_sent(sinks);
        Some((dest.addr, n, Some(gather)))
    }

    /// The kept headers for `key`, made anew where the last ones were for another.
    #[inline]
    fn ud_headers_for(&mut self, key: &UdKey) -> Option<&UdHeaders> {
        if self.req.ud_headers.as_ref().is_some_and(|h| h.key == *key) {
            return self.req.ud_headers.as_ref();
        }
        self.new_ud_headers(*key)
    }

    /// Headers for `key` in place of the kept ones.
    #[cold]
    #[inline(never)]
    fn new_ud_headers(&mut self, key: UdKey) -> Option<&UdHeaders> {
        let mut ib = IbRepr {
            bth: BthRepr {
                pkey: key.pkey,
                pad_count: pad_for(key.len as usize),
                ..Default::default()
            },
            payload_len: key.len as usize,
            ..Default::default()
        };
        self.ud_headers(key.dest, key.imm.then_some(0), &mut ib);
        let h = UdHeaders::new(key, self.local, &ib, &mut self.tx_prefixes)?;
        Some(self.req.ud_headers.insert(h))
    }

    /// The first WQE, a UD SEND, left: it is done, and completes if signaled.
    #[inline(always)]
    fn ud_sent(&mut self, sinks: &mut Sinks) {
        let Some(w) = self.req.sq.front() else {
            return;
        };
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += u64::from(w.len);
        if w.wr.signaled {
            self.ud_completed(sinks);
        }
        self.req.sq.drop_front();
        self.req.una = self.req.next_psn;
    }

    /// The first WQE's completion, successful.
    #[inline(never)]
    fn ud_completed(&mut self, sinks: &mut Sinks) {
        let Some(w) = self.req.sq.front() else {
            return;
        };
        let wc = self.wc_send(&w.wr, WcStatus::Success);
        sinks.cqs.push(self.send_cq, wc);
    }
}
