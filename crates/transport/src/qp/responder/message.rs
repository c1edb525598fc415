//! SEND and WRITE messages (RC and UC): opcode sequence, lengths, R_Key and bounds, placement
//! and completion.

use super::*;
use crate::AccessError;

impl Qp {
    pub(super) fn rc_uc_send(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: Payload<'_>,
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
            self.begin_send(ib, end, len_ok, sinks)?;
        } else if !matches!(self.resp.msg, Some(InMsg { write: false, .. })) || !len_ok {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let Some(mut m) = self.resp.msg else {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        };
        let Some(recv) = m.recv else {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        };
        self.place_send(src, &recv, m.offset, payload, mrs, sinks)?;
        m.offset += payload.len() as u64;
        if end {
            self.resp.msg = None;
            self.resp.msn = psn::add(self.resp.msn, 1);
            let wc = self.complete_recv(
                recv.wr_id,
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

    /// A SEND message's first packet: no message may be open, its length must be the
    /// MTU's unless it is the only one, and it takes the next posted receive (none: RNR,
    /// and a UC message's rest is dropped).
    fn begin_send(
        &mut self,
        ib: &IbRepr,
        end: bool,
        len_ok: bool,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        if self.resp.msg.is_some() || !len_ok {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let Some(recv) = self.take_recv(sinks) else {
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
        Ok(())
    }

    /// Place a SEND packet's payload at `offset` of the receive's scatter list; a packet
    /// past its end or outside its regions fails the receive (completed in error) and is
    /// refused.
    fn place_send(
        &mut self,
        src: SocketAddr,
        recv: &RecvWr,
        offset: u64,
        payload: Payload<'_>,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        if offset + payload.len() as u64 > recv.sg_list.total_len() {
            self.resp.msg = None;
            let wc = self.recv_failed(recv.wr_id, WcStatus::LocalLengthError, 0, src);
            sinks.cqs.push(self.recv_cq, wc);
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        if payload.len() > 0 {
            match place_payload(mrs, &recv.sg_list, offset, payload) {
                Ok(in_place) => {
                    if let Payload::Landed { .. } = payload {
                        sinks.landing = Some(crate::Landing::Received { in_place });
                    }
                }
                Err(_) => {
                    self.resp.msg = None;
                    let wc = self.recv_failed(recv.wr_id, WcStatus::LocalProtectionError, 0, src);
                    sinks.cqs.push(self.recv_cq, wc);
                    return Err(Refuse::Nak(NakCode::RemoteOperationalError));
                }
            }
        }
        if payload.len() == 0 && matches!(payload, Payload::Landed { .. }) {
            sinks.landing = Some(crate::Landing::Received { in_place: true });
        }
        Ok(())
    }

    pub(super) fn rc_uc_write(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: Payload<'_>,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        let op = ib.bth.opcode;
        let start = op.is_first() || op.is_only();
        let end = op.is_last() || op.is_only();
        let plen = payload.len() as u64;
        let mut m = if start {
            self.begin_write(ib, plen, mrs)?
        } else {
            match self.resp.msg {
                Some(m @ InMsg { write: true, .. }) => m,
                _ => {
                    self.note_refusal(MsgId::no_start(ib.bth.psn), MessageOutcome::NoStart);
                    return Err(Refuse::Nak(NakCode::InvalidRequest));
                }
            }
        };
        self.check_write_packet(ib, &m, start, plen, mrs)?;
        let recv = if op.has_immediate() {
            match self.take_recv(sinks) {
                Some(r) => Some(r),
                None => {
                    if start {
                        self.resp.msg = None;
                    }
                    self.note_refusal(MsgId::from(&m), MessageOutcome::NoReceive);
                    return Err(Refuse::Rnr);
                }
            }
        } else {
            None
        };
        self.place_write(ib, &m, payload, recv, mrs, sinks)?;
        m.offset += plen;
        if end {
            self.resp.msg = None;
            self.resp.msn = psn::add(self.resp.msn, 1);
            self.report_message(sinks, MsgId::from(&m), MessageOutcome::Delivered);
            if let Some(r) = recv {
                let wc = self.complete_recv(
                    r.wr_id,
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

    /// A WRITE message's first packet: no message may be open, the QP must allow remote
    /// writes, the length and alignment must pass the write rules, and — unless it is a
    /// WRITE ONLY without immediate, checked where it is placed — the whole target range
    /// must lie in a region that allows it. Refused with every cause noted.
    fn begin_write(&mut self, ib: &IbRepr, plen: u64, mrs: &MrTable) -> Result<InMsg, Refuse> {
        let op = ib.bth.opcode;
        if self.resp.msg.is_some() {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let reth = ib.reth.unwrap_or_default();
        let dma_len = u64::from(reth.dma_len);
        let id = MsgId {
            first_psn: ib.bth.psn,
            va: reth.va,
            rkey: reth.rkey,
            len: u32::try_from(dma_len).unwrap_or(0),
        };
        if !self.remote_access.contains(Access::REMOTE_WRITE) {
            self.stats.access_violations += 1;
            self.note_refusal(id, MessageOutcome::Denied);
            return Err(Refuse::Nak(NakCode::RemoteAccessError));
        }
        let mut faults = Faults::default();
        if dma_len > 1 << 31 {
            faults.add(MessageOutcome::FrameLength);
        }
        if !self.write_rules.aligned(reth.va) {
            faults.add(MessageOutcome::Misaligned);
        }
        if !faults.is_empty() {
            // refused: say everything else wrong with it too (IMS reports every cause)
            let access = mrs
                .get_in(self.pd_id, reth.rkey)
                .and_then(|r| r.check_remote_write(reth.va, dma_len.min(1 << 31)));
            if let Err(e) = access {
                faults.add(MessageOutcome::from(e));
            }
            let first = InMsg::first(ib, dma_len);
            faults = self.packet_faults(faults, ib, &first, plen);
            let primary = faults
                .iter()
                .find(|o| matches!(o, MessageOutcome::FrameLength | MessageOutcome::Misaligned));
            let primary = primary.unwrap_or(MessageOutcome::Misaligned);
            self.note_refusal_all(id, primary, faults);
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        // a WRITE ONLY without immediate is checked once, where it is placed (the same
        // range, after the length check as in rxe); a longer message or one that takes
        // a RECV is checked whole here, before anything else happens
        if dma_len > 0 && (!op.is_only() || op.has_immediate()) {
            let ok = mrs
                .get_in(self.pd_id, reth.rkey)
                .and_then(|r| r.check_remote_write(reth.va, dma_len));
            if let Err(e) = ok {
                self.count_refusal(&e);
                let outcome = MessageOutcome::from(e);
                let first = InMsg::first(ib, dma_len);
                let all = self.packet_faults(Faults::of(outcome), ib, &first, plen);
                self.note_refusal_all(id, outcome, all);
                return Err(Refuse::Nak(NakCode::RemoteAccessError));
            }
        }
        Ok(InMsg::first(ib, dma_len))
    }

    /// A WRITE packet of message `m`: not marked bad by its sender, and its length the
    /// MTU's (or what the rules allow) in the middle, the rest of the message at its end.
    /// Refused, the message closed, with every cause noted.
    fn check_write_packet(
        &mut self,
        ib: &IbRepr,
        m: &InMsg,
        start: bool,
        plen: u64,
        mrs: &MrTable,
    ) -> Result<(), Refuse> {
        let op = ib.bth.opcode;
        let mtu = self.mtu.bytes() as u64;
        let rules = self.write_rules;
        let marked = ib.bth.resv7 & rules.marks;
        if marked != 0 {
            // the sender says this packet or its message is bad: nothing of it is placed
            self.resp.msg = None;
            self.note_refusal(MsgId::from(m), MessageOutcome::Marked(marked));
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let remaining = m.dma_len - m.offset;
        let len_ok = if op.is_first() || op.is_middle() {
            (plen == mtu || rules.variable_packets && plen <= mtu)
                && rules.stepped(plen)
                && remaining > plen
        } else {
            plen == remaining && plen <= mtu
        };
        if len_ok && plen >= u64::from(rules.min_packet) {
            return Ok(());
        }
        self.resp.msg = None;
        let mut faults = self.packet_faults(Faults::default(), ib, m, plen);
        let why = faults.iter().next().unwrap_or(MessageOutcome::Length);
        if start && op.is_only() && !op.has_immediate() && m.dma_len > 0 {
            // its access is checked where it would be placed: say if that is wrong too
            let access = mrs
                .get_in(self.pd_id, m.rkey)
                .and_then(|r| r.check_remote_write(m.va, m.dma_len));
            if let Err(e) = access {
                faults.add(MessageOutcome::from(e));
            }
        }
        self.note_refusal_all(MsgId::from(m), why, faults);
        Err(Refuse::Nak(NakCode::InvalidRequest))
    }

    /// Place a WRITE packet's payload at its offset in message `m` (the range was checked
    /// at the message's first packet; checked again here in case the region went away in
    /// between) and say so: the landing, or an event for a QP that reports writes. Refused,
    /// the receive it took put back, when it does not fit.
    fn place_write(
        &mut self,
        ib: &IbRepr,
        m: &InMsg,
        payload: Payload<'_>,
        recv: Option<RecvWr>,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), Refuse> {
        let plen = payload.len() as u64;
        if plen == 0 {
            if matches!(payload, Payload::Landed { .. }) {
                sinks.landing = Some(crate::Landing::InPlace(None));
            }
            return Ok(());
        }
        let va = m.va.wrapping_add(m.offset);
        let placed = match payload {
            Payload::Bytes(b) => mrs
                .get_mut_in(self.pd_id, m.rkey)
                .and_then(|r| r.write_remote(va, b))
                .map(|()| false),
            Payload::Landed { lkey, offset, .. } => {
                mrs.place_landed(self.pd_id, m.rkey, va, plen, lkey, offset)
            }
        };
        match placed {
            Ok(in_place) => {
                let p = crate::Placement {
                    psn: ib.bth.psn,
                    rkey: m.rkey,
                    va,
                    len: plen as u32,
                    crc: self.rx_payload_crc,
                };
                if let Payload::Landed { .. } = payload {
                    // returned by `handle_landed`, not queued
                    sinks.landing = Some(if in_place {
                        crate::Landing::InPlace(Some(p))
                    } else {
                        crate::Landing::Copied(p)
                    });
                } else if self.report_writes {
                    sinks.events.push_back(Event::placed(self.qpn, p));
                }
                Ok(())
            }
            Err(e) => {
                if let Some(r) = recv {
                    self.put_back_recv(sinks, r);
                }
                self.resp.msg = None;
                self.count_refusal(&e);
                self.note_refusal(MsgId::from(m), MessageOutcome::from(e));
                Err(Refuse::Nak(NakCode::RemoteAccessError))
            }
        }
    }
}

impl InMsg {
    /// The WRITE message a FIRST or ONLY packet `ib` starts.
    fn first(ib: &IbRepr, dma_len: u64) -> InMsg {
        let reth = ib.reth.unwrap_or_default();
        InMsg {
            write: true,
            first_psn: ib.bth.psn,
            offset: 0,
            va: reth.va,
            rkey: reth.rkey,
            dma_len,
            recv: None,
        }
    }
}

impl Qp {
    /// Count a refused write: a page the application holds, or the peer's violation.
    fn count_refusal(&mut self, e: &AccessError) {
        match e {
            AccessError::Held { .. } => self.stats.held_refusals += 1,
            _ => self.stats.access_violations += 1,
        }
    }

    /// Keep why a UC WRITE packet was refused for `uc_request`, which reports the message
    /// (RC answers with a NAK and the requester retries: nothing to report).
    fn note_refusal(&mut self, id: MsgId, outcome: MessageOutcome) {
        self.note_refusal_all(id, outcome, Faults::of(outcome));
    }

    /// [`Qp::note_refusal`] with every check the message failed.
    fn note_refusal_all(&mut self, id: MsgId, outcome: MessageOutcome, faults: Faults) {
        if self.qp_type == QpType::Uc {
            self.resp.why = Some((id, outcome, faults));
        }
    }

    /// `faults` plus what is wrong with WRITE packet `ib` of `plen` payload bytes at its
    /// place in message `m`: marks its sender set, a length its opcode or the QP's rules do
    /// not allow (a packet that fits the MTU but not what is left of the message means the
    /// message is longer or shorter than its RETH says: a frame length fault).
    fn packet_faults(&self, mut faults: Faults, ib: &IbRepr, m: &InMsg, plen: u64) -> Faults {
        let op = ib.bth.opcode;
        let rules = self.write_rules;
        let mtu = self.mtu.bytes() as u64;
        let marked = ib.bth.resv7 & rules.marks;
        if marked != 0 {
            faults.add(MessageOutcome::Marked(marked));
        }
        let remaining = m.dma_len.saturating_sub(m.offset);
        let end = op.is_last() || op.is_only();
        let len_ok = if op.is_first() || op.is_middle() {
            (plen == mtu || rules.variable_packets && plen <= mtu)
                && rules.stepped(plen)
                && remaining > plen
        } else {
            plen == remaining && plen <= mtu
        };
        if !len_ok || plen < u64::from(rules.min_packet) {
            let frame =
                plen <= mtu && plen >= u64::from(rules.min_packet) && (end || rules.stepped(plen));
            faults.add(if frame {
                MessageOutcome::FrameLength
            } else {
                MessageOutcome::Length
            });
        }
        faults
    }
}
