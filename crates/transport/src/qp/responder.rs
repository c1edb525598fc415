//! The receive side of a QP: PSN and opcode-sequence rules (Linux rxe `rxe_resp.c`), R_Key
//! and bounds checks before any byte moves, placement, ACK/NAK generation, READ responses
//! and their replay, MSN; UC drop-to-next-message; UD Q_Key and GRH slot.

use super::{Qp, QpState, QpType, Sinks, build_packet};
use crate::Event;
use crate::mr::{Access, MrTable};
use crate::wr::{RecvWr, WcOpcode, WcStatus, WorkCompletion};
use rocelink_wire::ib::ext::NakCode;
use rocelink_wire::ib::{AethRepr, BthRepr, GSI_QKEY, IbRepr, Opcode, grh, psn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// READ requests remembered for duplicate replay.
const READ_HISTORY: usize = 16;

#[derive(Debug, Clone, Copy)]
struct ReadReply {
    first_psn: u32,
    va: u64,
    rkey: u32,
    len: u64,
    npkts: u32,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
enum Resp {
    Ack { psn: u32, aeth: AethRepr },
    Read(ReadReply),
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
    out: VecDeque<Resp>,
    history: VecDeque<ReadReply>,
}

impl Responder {
    /// Something is waiting to be sent.
    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Forget everything but the ACKs/NAKs still to be sent (a fatal NAK must go out).
    pub(crate) fn clear(&mut self) {
        self.msg = None;
        self.history.clear();
        self.out.retain(|r| matches!(r, Resp::Ack { .. }));
    }
}

/// Why a request is refused (the NAK it gets on RC).
enum Refuse {
    Nak(NakCode),
    Rnr,
}

impl Qp {
    fn queue_ack(&mut self, p: u32) {
        self.resp.out.push_back(Resp::Ack {
            psn: p,
            aeth: AethRepr::ack(self.resp.msn),
        });
        self.stats.acks_sent += 1;
    }

    fn queue_nak(&mut self, p: u32, code: NakCode) {
        self.resp.out.push_back(Resp::Ack {
            psn: p,
            aeth: AethRepr::nak(code, self.resp.msn),
        });
        self.stats.naks_sent += 1;
    }

    #[allow(clippy::too_many_arguments)]
    fn complete_recv(
        &self,
        r: RecvWr,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
        imm: Option<u32>,
        src_qp: u32,
        src: SocketAddr,
    ) -> WorkCompletion {
        WorkCompletion {
            wr_id: r.wr_id,
            status,
            opcode,
            qpn: self.qpn,
            byte_len,
            imm,
            src_qp,
            src: Some(src),
        }
    }

    /// An error completion of a RECV WR.
    fn recv_failed(
        &self,
        r: RecvWr,
        status: WcStatus,
        src_qp: u32,
        src: SocketAddr,
    ) -> WorkCompletion {
        self.complete_recv(r, status, WcOpcode::Recv, 0, None, src_qp, src)
    }

    /// A request packet (SEND, WRITE, READ request, atomics) for this QP.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_request(
        &mut self,
        now: Instant,
        src: SocketAddr,
        net_header: &[u8],
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let _ = now;
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            self.stats.drops += 1;
            return;
        }
        match self.qp_type {
            QpType::Rc => self.rc_request(src, ib, payload, mrs, sinks),
            QpType::Uc => self.uc_request(src, ib, payload, mrs, sinks),
            QpType::Ud => self.ud_request(src, net_header, ib, payload, mrs, sinks),
        }
    }

    fn rc_request(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let p = ib.bth.psn;
        let d = psn::diff(p, self.resp.epsn);
        if d > 0 {
            self.stats.psn_gaps += 1;
            self.stats.drops += 1;
            if !self.resp.nak_sent {
                self.resp.nak_sent = true;
                let e = self.resp.epsn;
                self.queue_nak(e, NakCode::PsnSequenceError);
            }
            return;
        }
        if d < 0 {
            self.stats.duplicates += 1;
            if ib.bth.opcode == Opcode::RC_RDMA_READ_REQUEST {
                self.replay_read(p, ib);
            } else if ib.bth.ack_req {
                // executed already: acknowledge again, do not execute again (C9-105)
                let last = psn::sub1(self.resp.epsn);
                self.queue_ack(last);
            }
            return;
        }
        self.resp.nak_sent = false;
        let op = ib.bth.opcode;
        let result = if op.is_send() {
            self.rc_uc_send(src, ib, payload, mrs, sinks)
        } else if op.is_write() {
            self.rc_uc_write(src, ib, payload, mrs, sinks)
        } else if op == Opcode::RC_RDMA_READ_REQUEST {
            self.rc_read(ib, mrs)
        } else {
            Err(Refuse::Nak(NakCode::InvalidRequest)) // atomics are not supported
        };
        match result {
            Ok(()) => {
                if op != Opcode::RC_RDMA_READ_REQUEST {
                    self.resp.epsn = psn::add(p, 1);
                    self.stats.rx_bytes += payload.len() as u64;
                    if ib.bth.ack_req {
                        self.queue_ack(p);
                    }
                }
            }
            Err(Refuse::Rnr) => {
                let aeth = AethRepr::rnr_nak(self.min_rnr_timer, self.resp.msn);
                self.resp.out.push_back(Resp::Ack { psn: p, aeth });
                self.stats.naks_sent += 1;
            }
            Err(Refuse::Nak(code)) => {
                self.queue_nak(p, code);
                self.enter_error(sinks);
            }
        }
    }

    fn uc_request(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let p = ib.bth.psn;
        let op = ib.bth.opcode;
        let start = op.is_first() || op.is_only();
        let d = psn::diff(p, self.resp.epsn);
        if d != 0 || self.resp.uc_drop {
            if d > 0 {
                self.stats.psn_gaps += 1;
            } else if d < 0 {
                self.stats.duplicates += 1;
            }
            if d != 0 {
                self.uc_damage(sinks);
            }
            if !start {
                self.resp.uc_drop = true;
                self.stats.drops += 1;
                return;
            }
            self.resp.uc_drop = false;
        }
        if start && self.resp.msg.is_some() {
            // the previous message never got its LAST
            self.uc_damage(sinks);
        }
        let result = if op.is_send() {
            self.rc_uc_send(src, ib, payload, mrs, sinks)
        } else if op.is_write() {
            self.rc_uc_write(src, ib, payload, mrs, sinks)
        } else {
            Err(Refuse::Nak(NakCode::InvalidRequest))
        };
        match result {
            Ok(()) => {
                self.resp.epsn = psn::add(p, 1);
                self.stats.rx_bytes += payload.len() as u64;
            }
            Err(_) => {
                // UC has no NAKs: drop the rest of the message
                self.stats.drops += 1;
                self.uc_damage(sinks);
                self.resp.uc_drop = true;
                self.resp.epsn = psn::add(p, 1);
            }
        }
    }

    /// Discard the UC message in progress, reporting it; its RECV WR is reused.
    fn uc_damage(&mut self, sinks: &mut Sinks) {
        if let Some(m) = self.resp.msg.take() {
            self.stats.damaged_messages += 1;
            if let Some(r) = m.recv {
                self.rq.push_front(r);
            }
            sinks.events.push_back(Event::MessageDamaged {
                qpn: self.qpn,
                first_psn: m.first_psn,
                bytes_placed: m.offset,
                write: m.write,
            });
        }
    }

    fn rc_uc_send(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        let op = ib.bth.opcode;
        let mtu = self.mtu.bytes();
        let start = op.is_first() || op.is_only();
        let end = op.is_last() || op.is_only();
        let len_ok = if op.is_first() || op.is_middle() {
            payload.len() == mtu
        } else {
            payload.len() <= mtu
        };
        if start {
            if self.resp.msg.is_some() {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            if !len_ok {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            let Some(recv) = self.rq.pop_front() else {
                if self.qp_type == QpType::Uc {
                    self.resp.uc_drop = !end;
                }
                return Err(Refuse::Rnr);
            };
            self.resp.msg = Some(InMsg {
                write: false,
                first_psn: ib.bth.psn,
                offset: 0,
                va: 0,
                rkey: 0,
                dma_len: 0,
                recv: Some(recv),
            });
        } else if !matches!(self.resp.msg, Some(InMsg { write: false, .. })) || !len_ok {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let Some(mut m) = self.resp.msg else {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        };
        let Some(recv) = m.recv else {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        };
        if m.offset + payload.len() as u64 > recv.sg_list.total_len() {
            self.resp.msg = None;
            let wc = self.recv_failed(recv, WcStatus::LocalLengthError, 0, src);
            sinks.cqs.push(self.recv_cq, wc);
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        if !payload.is_empty() {
            match mrs.scatter(&recv.sg_list, m.offset, payload) {
                Ok(()) => {}
                Err(_) => {
                    self.resp.msg = None;
                    let wc = self.recv_failed(recv, WcStatus::LocalProtectionError, 0, src);
                    sinks.cqs.push(self.recv_cq, wc);
                    return Err(Refuse::Nak(NakCode::RemoteOperationalError));
                }
            }
        }
        m.offset += payload.len() as u64;
        if end {
            self.resp.msg = None;
            self.resp.msn = psn::add(self.resp.msn, 1);
            let wc = self.complete_recv(
                recv,
                WcStatus::Success,
                WcOpcode::Recv,
                m.offset as u32,
                ib.immdt,
                0,
                src,
            );
            sinks.cqs.push(self.recv_cq, wc);
        } else {
            self.resp.msg = Some(m);
        }
        Ok(())
    }

    fn rc_uc_write(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        let op = ib.bth.opcode;
        let mtu = self.mtu.bytes() as u64;
        let start = op.is_first() || op.is_only();
        let end = op.is_last() || op.is_only();
        let plen = payload.len() as u64;
        let mut m = if start {
            if self.resp.msg.is_some() {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            let reth = ib.reth.unwrap_or_default();
            let dma_len = u64::from(reth.dma_len);
            if dma_len > 1 << 31 {
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            if dma_len > 0 {
                let ok = mrs
                    .get(reth.rkey)
                    .and_then(|r| r.slice(reth.va, dma_len, Access::REMOTE_WRITE).map(|_| ()));
                if ok.is_err() {
                    self.stats.access_violations += 1;
                    return Err(Refuse::Nak(NakCode::RemoteAccessError));
                }
            }
            InMsg {
                write: true,
                first_psn: ib.bth.psn,
                offset: 0,
                va: reth.va,
                rkey: reth.rkey,
                dma_len,
                recv: None,
            }
        } else {
            match self.resp.msg {
                Some(m @ InMsg { write: true, .. }) => m,
                _ => return Err(Refuse::Nak(NakCode::InvalidRequest)),
            }
        };
        let remaining = m.dma_len - m.offset;
        let len_ok = if op.is_first() || op.is_middle() {
            plen == mtu && remaining > mtu
        } else {
            plen == remaining && plen <= mtu
        };
        if !len_ok {
            self.resp.msg = None;
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let recv = if op.has_immediate() {
            match self.rq.pop_front() {
                Some(r) => Some(r),
                None => {
                    if start {
                        self.resp.msg = None;
                    }
                    return Err(Refuse::Rnr);
                }
            }
        } else {
            None
        };
        if plen > 0 {
            // checked against the whole message at its first packet; re-checked here in case
            // the region was deregistered in between
            match mrs
                .get_mut(m.rkey)
                .and_then(|r| r.slice_mut(m.va + m.offset, plen, Access::REMOTE_WRITE))
            {
                Ok(dst) => {
                    dst.copy_from_slice(payload);
                    if self.report_writes {
                        sinks.events.push_back(Event::Placed {
                            qpn: self.qpn,
                            psn: ib.bth.psn,
                            rkey: m.rkey,
                            va: m.va + m.offset,
                            len: plen as u32,
                            crc: self.rx_payload_crc,
                        });
                    }
                }
                Err(_) => {
                    if let Some(r) = recv {
                        self.rq.push_front(r);
                    }
                    self.resp.msg = None;
                    self.stats.access_violations += 1;
                    return Err(Refuse::Nak(NakCode::RemoteAccessError));
                }
            }
        }
        m.offset += plen;
        if end {
            self.resp.msg = None;
            self.resp.msn = psn::add(self.resp.msn, 1);
            if let Some(r) = recv {
                let wc = self.complete_recv(
                    r,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    m.dma_len as u32,
                    ib.immdt,
                    0,
                    src,
                );
                sinks.cqs.push(self.recv_cq, wc);
            }
        } else {
            self.resp.msg = Some(m);
        }
        Ok(())
    }

    fn rc_read(&mut self, ib: &IbRepr, mrs: &MrTable) -> Result<(), Refuse> {
        if self.resp.msg.is_some() {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let reth = ib.reth.unwrap_or_default();
        let len = u64::from(reth.dma_len);
        if len > 1 << 31 {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        if len > 0
            && mrs
                .get(reth.rkey)
                .and_then(|r| r.slice(reth.va, len, Access::REMOTE_READ).map(|_| ()))
                .is_err()
        {
            self.stats.access_violations += 1;
            return Err(Refuse::Nak(NakCode::RemoteAccessError));
        }
        let npkts = self.mtu.packets(len as usize);
        let r = ReadReply {
            first_psn: ib.bth.psn,
            va: reth.va,
            rkey: reth.rkey,
            len,
            npkts,
            next: 0,
        };
        self.resp.msn = psn::add(self.resp.msn, 1);
        self.resp.out.push_back(Resp::Read(r));
        if self.resp.history.len() == READ_HISTORY {
            self.resp.history.pop_front();
        }
        self.resp.history.push_back(r);
        self.resp.epsn = psn::add(ib.bth.psn, npkts);
        Ok(())
    }

    /// A duplicate READ request: send the responses again from its PSN, if it lies inside
    /// a READ we executed and asks for nothing beyond it.
    fn replay_read(&mut self, p: u32, ib: &IbRepr) {
        let mtu = self.mtu.bytes() as u64;
        let reth = ib.reth.unwrap_or_default();
        let Some(orig) = self.resp.history.iter().rev().find(|r| {
            let d = psn::diff(p, r.first_psn);
            d >= 0 && (d as u32) < r.npkts
        }) else {
            self.stats.drops += 1;
            return;
        };
        let k = psn::diff(p, orig.first_psn) as u32;
        let va = orig.va + u64::from(k) * mtu;
        let len = orig.len - (u64::from(k) * mtu).min(orig.len);
        if reth.rkey != orig.rkey || reth.va != va || u64::from(reth.dma_len) != len {
            self.stats.drops += 1;
            return;
        }
        let r = ReadReply {
            first_psn: p,
            va,
            rkey: orig.rkey,
            len,
            npkts: orig.npkts - k,
            next: 0,
        };
        self.resp.out.push_back(Resp::Read(r));
    }

    fn ud_request(
        &mut self,
        src: SocketAddr,
        net_header: &[u8],
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let op = ib.bth.opcode;
        if op != Opcode::UD_SEND_ONLY && op != Opcode::UD_SEND_ONLY_WITH_IMMEDIATE {
            self.stats.drops += 1;
            return;
        }
        let deth = ib.deth.unwrap_or_default();
        let want = if self.qpn == 1 { GSI_QKEY } else { self.qkey };
        if deth.qkey != want {
            self.stats.drops += 1;
            self.stats.access_violations += 1;
            return;
        }
        let Some(recv) = self.rq.pop_front() else {
            self.stats.drops += 1;
            return;
        };
        let need = grh::SLOT_LEN + payload.len();
        if need as u64 > recv.sg_list.total_len() {
            let wc = self.recv_failed(recv, WcStatus::LocalLengthError, deth.src_qp, src);
            sinks.cqs.push(self.recv_cq, wc);
            return;
        }
        // the GRH slot and the payload, checked together before either is written
        let mut slot = [0u8; grh::SLOT_LEN];
        if grh::fill(&mut slot, net_header).is_err() {
            slot = [0; grh::SLOT_LEN];
        }
        let placed = mrs
            .check_scatter(&recv.sg_list, 0, need as u64)
            .and_then(|()| mrs.scatter(&recv.sg_list, 0, &slot))
            .and_then(|()| mrs.scatter(&recv.sg_list, grh::SLOT_LEN as u64, payload));
        match placed {
            Ok(()) => {
                self.stats.rx_bytes += payload.len() as u64;
                let wc = self.complete_recv(
                    recv,
                    WcStatus::Success,
                    WcOpcode::Recv,
                    need as u32,
                    ib.immdt,
                    deth.src_qp,
                    src,
                );
                sinks.cqs.push(self.recv_cq, wc);
            }
            Err(_) => {
                let wc = self.recv_failed(recv, WcStatus::LocalProtectionError, deth.src_qp, src);
                sinks.cqs.push(self.recv_cq, wc);
            }
        }
    }

    /// Write the next ACK/NAK or READ response into `buf`.
    pub(crate) fn poll_response(
        &mut self,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
    ) -> Option<(SocketAddr, usize)> {
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
                    return Some((dst, build_packet(buf, &ib, &[], self.local, dst)));
                }
                Resp::Read(mut r) => {
                    if self.state == QpState::Error {
                        self.resp.out.pop_front();
                        continue;
                    }
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
                    let payload = if plen == 0 {
                        &[][..]
                    } else {
                        match mrs
                            .get(r.rkey)
                            .and_then(|m| m.slice(r.va + off, plen, Access::REMOTE_READ))
                        {
                            Ok(s) => s,
                            Err(_) => {
                                // deregistered since the request was accepted
                                self.resp.out.pop_front();
                                continue;
                            }
                        }
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
                    let n = build_packet(buf, &ib, payload, self.local, dst);
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += plen;
                    r.next += 1;
                    if r.next >= r.npkts {
                        self.resp.out.pop_front();
                    } else if let Some(Resp::Read(x)) = self.resp.out.front_mut() {
                        *x = r;
                    }
                    return Some((dst, n));
                }
            }
        }
    }
}
