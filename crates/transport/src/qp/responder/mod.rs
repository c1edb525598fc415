//! The receive side of a QP: PSN and opcode-sequence rules (Linux rxe `rxe_resp.c`), R_Key
//! and bounds checks before any byte moves, placement, ACK/NAK generation, READ responses
//! and their replay, MSN; UC drop-to-next-message; UD Q_Key and GRH slot.

use super::{Body, Qp, QpState, QpType, Sinks, build_datagram, build_packet};
use crate::mr::{Access, MrTable};
use crate::wr::{RecvWr, WcOpcode, WcStatus, WorkCompletion};
use crate::{AccessError, Event};
use rocelink_wire::ib::ext::NakCode;
use rocelink_wire::ib::{AethRepr, BthRepr, GSI_QKEY, IbRepr, Opcode, grh, psn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use outcome::MsgId;
pub use outcome::{Faults, MessageOutcome};

/// READ requests remembered for duplicate replay (as many as a peer may have outstanding:
/// rxe allows 128).
const READ_HISTORY: usize = 128;

#[derive(Debug, Clone, Copy)]
struct ReadReply {
    first_psn: u32,
    va: u64,
    rkey: u32,
    len: u64,
    npkts: u32,
    next: u32,
}

/// An atomic executed: its PSN and the word as it was before, answered again (never run
/// again) when the request comes again.
#[derive(Debug, Clone, Copy)]
struct AtomicReply {
    psn: u32,
    orig: u64,
}

#[derive(Debug, Clone, Copy)]
enum Resp {
    Ack { psn: u32, aeth: AethRepr },
    Read(ReadReply),
    Atomic(AtomicReply),
}

/// A message being received.
#[derive(Debug, Clone, Copy)]
struct InMsg {
    write: bool,
    first_psn: u32,
    offset: u64,
    va: u64,
    rkey: u32,
    dma_len: u64,
    recv: Option<RecvWr>,
}

/// Responder state.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    pub(crate) epsn: u32,
    msn: u32,
    nak_sent: bool,
    uc_drop: bool,
    msg: Option<InMsg>,
    /// Why the last UC WRITE packet was refused, for the message's report.
    why: Option<(MsgId, MessageOutcome, Faults)>,
    out: VecDeque<Resp>,
    history: VecDeque<ReadReply>,
    /// Atomics executed, for a duplicate's answer (as many as READs).
    atomics: VecDeque<AtomicReply>,
    /// An ACK held back to ride with the next request this QP sends (see
    /// [`crate::EndpointConfig::ack_delay`]): the PSN it acknowledges, its AETH, and when
    /// it goes alone.
    held: Option<(u32, AethRepr, Instant)>,
    /// The last held ACK went alone: hold none until a request follows a packet that
    /// asked for an ACK within the delay.
    alone: bool,
    /// When the last request asking for an ACK was taken.
    ackreq_at: Option<Instant>,
}

impl Responder {
    /// Queue the held ACK, if any (before anything queued after it).
    pub(crate) fn release_held(&mut self) -> bool {
        match self.held.take() {
            Some((psn, aeth, _)) => {
                self.out.push_back(Resp::Ack { psn, aeth });
                true
            }
            None => false,
        }
    }

    /// When the held ACK goes alone.
    pub(crate) fn held_until(&self) -> Option<Instant> {
        self.held.map(|(_, _, t)| t)
    }

    /// Something is waiting to be sent.
    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Forget everything but the ACKs/NAKs still to be sent (a fatal NAK must go out).
    pub(crate) fn clear(&mut self) {
        self.release_held();
        self.msg = None;
        self.why = None;
        self.history.clear();
        self.atomics.clear();
        self.out.retain(|r| matches!(r, Resp::Ack { .. }));
    }
}

/// A request's payload: bytes of a datagram, or bytes a backend already put into a region
/// (`Endpoint::handle_landed`: RDMA WRITEs and SENDs).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    Bytes(&'a [u8]),
    Landed {
        lkey: u32,
        offset: usize,
        len: usize,
    },
}

impl Payload<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Landed { len, .. } => *len,
        }
    }
}

/// Put a received payload at `offset` of the message scattered into `sg`: copied from a
/// datagram, or — landed in a region — left where it is when that is where the receive
/// puts it (true), else copied there. Checked before anything is written.
pub(super) fn place_payload(
    mrs: &mut MrTable,
    sg: &crate::wr::SgList,
    offset: u64,
    payload: Payload<'_>,
) -> Result<bool, AccessError> {
    mrs.check_scatter(sg, offset, payload.len() as u64)?;
    place_checked(mrs, sg, offset, payload)
}

/// As [`place_payload`], where the caller checked the payload's range of `sg` with
/// [`MrTable::check_scatter`] since the table last changed.
pub(super) fn place_checked(
    mrs: &mut MrTable,
    sg: &crate::wr::SgList,
    offset: u64,
    payload: Payload<'_>,
) -> Result<bool, AccessError> {
    match payload {
        Payload::Bytes(b) => mrs.scatter_within(sg, offset, b).map(|()| false),
        Payload::Landed {
            lkey,
            offset: at,
            len,
        } => {
            if mrs.scatters_to(sg, offset, len as u64, lkey, at) {
                return Ok(true);
            }
            // landed elsewhere: copied to its receive (the landing bounds were checked)
            let oob = AccessError::OutOfBounds {
                va: at as u64,
                len: len as u64,
            };
            let bytes = mrs
                .get(lkey)?
                .bytes()
                .get(at..at + len)
                .ok_or(oob)?
                .to_vec();
            mrs.scatter_within(sg, offset, &bytes).map(|()| false)
        }
    }
}

/// Why a request is refused (the NAK it gets on RC).
enum Refuse {
    Nak(NakCode),
    Rnr,
}

impl Qp {
    /// The RDMA WRITE this QP is in the middle of: its region's key, where its next
    /// packet's payload goes (VA), how many bytes are left and the PSN expected next.
    pub(crate) fn write_under_way(&self) -> Option<(u32, u64, u64, u32)> {
        match self.resp.msg {
            Some(m) if m.write && m.offset < m.dma_len => Some((
                m.rkey,
                m.va.wrapping_add(m.offset),
                m.dma_len - m.offset,
                self.resp.epsn,
            )),
            _ => None,
        }
    }

    /// The receive the `k`-th SEND message from now completes (0: the one under way, else
    /// the next posted), where in it the message's next payload goes, and whether that
    /// message is under way; `None` past the posted receives or while a WRITE is.
    pub(crate) fn recv_under_way(&self, k: usize) -> Option<(RecvWr, u64, bool)> {
        if self.srq.is_some() {
            // a shared queue's next receive may go to another QP's message first
            return None;
        }
        match self.resp.msg {
            Some(m) if m.write => None,
            Some(m) if k == 0 => m.recv.map(|r| (r, m.offset, true)),
            Some(_) => self.rq.get(k - 1).map(|r| (*r, 0, false)),
            None => self.rq.get(k).map(|r| (*r, 0, false)),
        }
    }

    /// Acknowledge `p` (a request that asked for it): held back for up to the ACK delay
    /// while held ACKs ride with this QP's requests, else queued now.
    fn ack(&mut self, p: u32, now: Instant) {
        self.resp.ackreq_at = Some(now);
        if self.ack_delay.is_zero() || self.resp.alone {
            return self.queue_ack(p);
        }
        let due = match self.resp.held {
            Some((_, _, t)) => t,
            None => {
                self.stats.acks_sent += 1;
                now + self.ack_delay
            }
        };
        self.resp.held = Some((p, AethRepr::ack(self.resp.msn), due));
    }

    /// This QP sends a request at `now`: a held ACK goes right after it; one that asked
    /// for an ACK within the delay says held ACKs ride again.
    pub(crate) fn request_sent(&mut self, now: Instant) {
        if self
            .resp
            .ackreq_at
            .is_some_and(|t| now.saturating_duration_since(t) <= self.ack_delay)
        {
            self.resp.alone = false;
        }
        if self.resp.release_held() {
            self.response_turn = true;
        }
    }

    /// The held ACK is due at `now`: it goes alone, and the next is not held.
    pub(crate) fn held_ack_due(&mut self, now: Instant) {
        if self.resp.held_until().is_some_and(|t| t <= now) {
            self.resp.release_held();
            self.resp.alone = true;
        }
    }

    fn queue_ack(&mut self, p: u32) {
        self.resp.release_held();
        self.resp.out.push_back(Resp::Ack {
            psn: p,
            aeth: AethRepr::ack(self.resp.msn),
        });
        self.stats.acks_sent += 1;
    }

    fn queue_nak(&mut self, p: u32, code: NakCode) {
        self.resp.release_held();
        self.resp.out.push_back(Resp::Ack {
            psn: p,
            aeth: AethRepr::nak(code, self.resp.msn),
        });
        self.stats.naks_sent += 1;
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn complete_recv(
        &self,
        wr_id: u64,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
        imm: Option<u32>,
        src_qp: u32,
        src: SocketAddr,
    ) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            qpn: self.qpn,
            byte_len,
            imm,
            src_qp,
            src: Some(src),
            solicited: self.rx_solicited,
        }
    }

    /// An error completion of a RECV WR.
    fn recv_failed(
        &self,
        wr_id: u64,
        status: WcStatus,
        src_qp: u32,
        src: SocketAddr,
    ) -> WorkCompletion {
        self.complete_recv(wr_id, status, WcOpcode::Recv, 0, None, src_qp, src)
    }

    /// A request packet (SEND, WRITE, READ request, atomics) for this QP.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_request(
        &mut self,
        now: Instant,
        src: SocketAddr,
        net_header: &[u8],
        ib: &IbRepr,
        payload: Payload<'_>,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let _ = now;
        self.rx_solicited = ib.bth.solicited;
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            self.stats.drops += 1;
            return;
        }
        match self.qp_type {
            QpType::Rc => self.rc_request(now, src, ib, payload, mrs, sinks),
            QpType::Uc => self.uc_request(src, ib, payload, mrs, sinks),
            QpType::Ud => self.ud_request(src, net_header, ib, payload, mrs, sinks),
        }
    }
}

mod message;
mod outcome;
mod rc;
mod uc;
mod ud;

impl Qp {
    /// Write the next ACK/NAK or READ response into `buf`; with `gather`, a READ
    /// response's payload is left in the region (the headers in `buf`, where the payload
    /// lies and the tail returned), as a request's is.
    pub(crate) fn poll_response(
        &mut self,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
        gather: bool,
    ) -> Option<(SocketAddr, usize, Option<crate::Gather>)> {
        let dst = self.remote?;
        loop {
            let front = *self.resp.out.front()?;
            match front {
                Resp::Ack { psn: p, aeth } => {
                    self.resp.out.pop_front();
                    let ib = IbRepr {
                        bth: BthRepr {
                            opcode: Opcode::RC_ACKNOWLEDGE,
                            dest_qp: self.dest_qpn,
                            psn: p,
                            pkey: self.pkey,
                            ..Default::default()
                        },
                        aeth: Some(aeth),
                        ..Default::default()
                    };
                    self.stats.tx_packets += 1;
                    return Some((dst, build_packet(buf, &ib, &[], self.route(dst)), None));
                }
                Resp::Atomic(a) => {
                    self.resp.out.pop_front();
                    if self.state == QpState::Error {
                        continue;
                    }
                    let ib = IbRepr {
                        bth: BthRepr {
                            opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
                            dest_qp: self.dest_qpn,
                            psn: a.psn,
                            pkey: self.pkey,
                            ..Default::default()
                        },
                        aeth: Some(AethRepr::ack(self.resp.msn)),
                        atomic_ack: Some(a.orig),
                        ..Default::default()
                    };
                    self.stats.tx_packets += 1;
                    return Some((dst, build_packet(buf, &ib, &[], self.route(dst)), None));
                }
                Resp::Read(r) => {
                    if self.state == QpState::Error {
                        self.resp.out.pop_front();
                        continue;
                    }
                    match self.read_response(r, mrs, buf, gather, dst) {
                        Some((n, g)) => return Some((dst, n, g)),
                        None => continue,
                    }
                }
            }
        }
    }

    /// The next packet of READ response `r` into `buf` (the payload left in the region with
    /// `gather`); `None`, the response dropped, when its region went away.
    fn read_response(
        &mut self,
        mut r: ReadReply,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
        gather: bool,
        dst: SocketAddr,
    ) -> Option<(usize, Option<crate::Gather>)> {
        let mtu = self.mtu.bytes() as u64;
        let k = r.next;
        let off = u64::from(k) * mtu;
        let plen = (r.len - off.min(r.len)).min(mtu);
        let (first, last) = (k == 0, k + 1 == r.npkts);
        let opcode = match (first, last) {
            (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        };
        let ib = IbRepr {
            bth: BthRepr {
                opcode,
                dest_qp: self.dest_qpn,
                psn: psn::add(r.first_psn, k),
                pkey: self.pkey,
                pad_count: rocelink_wire::ib::pad_for(plen as usize),
                ..Default::default()
            },
            aeth: (first || last).then(|| AethRepr::ack(self.resp.msn)),
            payload_len: plen as usize,
            ..Default::default()
        };
        let sg = crate::wr::Sge {
            lkey: r.rkey,
            va: r.va + off,
            len: plen as u32,
        };
        let body = Body::of(mrs, &sg.into(), 0, plen as usize, Access::REMOTE_READ);
        let Ok((n, g)) = build_datagram(buf, &ib, body, gather, self.route(dst)) else {
            // deregistered since the request was accepted
            self.resp.out.pop_front();
            return None;
        };
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += plen;
        r.next += 1;
        if r.next >= r.npkts {
            self.resp.out.pop_front();
        } else if let Some(Resp::Read(x)) = self.resp.out.front_mut() {
            *x = r;
        }
        Some((n, g))
    }
}
