//! SEND and WRITE messages (RC and UC): opcode sequence, lengths, R_Key and bounds, placement
//! and completion.

use super::*;

impl Qp {
    pub(super) fn rc_uc_send(
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

    pub(super) fn rc_uc_write(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: Payload<'_>,
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
            let id = MsgId {
                first_psn: ib.bth.psn,
                va: reth.va,
                rkey: reth.rkey,
                len: u32::try_from(dma_len).unwrap_or(0),
            };
            if dma_len > 1 << 31 {
                self.note_refusal(id, MessageOutcome::FrameLength);
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            if !self.write_rules.aligned(reth.va) {
                self.note_refusal(id, MessageOutcome::Misaligned);
                return Err(Refuse::Nak(NakCode::InvalidRequest));
            }
            // a WRITE ONLY without immediate is checked once, where it is placed (the same
            // range, after the length check as in rxe); a longer message or one that takes
            // a RECV is checked whole here, before anything else happens
            if dma_len > 0 && (!op.is_only() || op.has_immediate()) {
                let ok = mrs
                    .get(reth.rkey)
                    .and_then(|r| r.check_remote_write(reth.va, dma_len));
                if let Err(e) = ok {
                    self.stats.access_violations += 1;
                    self.note_refusal(id, MessageOutcome::from(e));
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
                _ => {
                    self.note_refusal(MsgId::no_start(ib.bth.psn), MessageOutcome::NoStart);
                    return Err(Refuse::Nak(NakCode::InvalidRequest));
                }
            }
        };
        let rules = self.write_rules;
        let marked = ib.bth.resv7 & rules.marks;
        if marked != 0 {
            // the sender says this packet or its message is bad: nothing of it is placed
            self.resp.msg = None;
            self.note_refusal(MsgId::from(&m), MessageOutcome::Marked(marked));
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
        if !len_ok || plen < u64::from(rules.min_packet) {
            self.resp.msg = None;
            // a packet that fits the MTU but not what is left of the message: the message
            // is longer or shorter than its RETH says
            let frame =
                plen <= mtu && plen >= u64::from(rules.min_packet) && (end || rules.stepped(plen));
            let why = if frame {
                MessageOutcome::FrameLength
            } else {
                MessageOutcome::Length
            };
            self.note_refusal(MsgId::from(&m), why);
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let recv = if op.has_immediate() {
            match self.rq.pop_front() {
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
        if plen > 0 {
            // checked against the whole message at its first packet; re-checked here in case
            // the region was deregistered in between
            let va = m.va.wrapping_add(m.offset);
            let placed = match payload {
                Payload::Bytes(b) => mrs
                    .get_mut(m.rkey)
                    .and_then(|r| r.write_remote(va, b))
                    .map(|()| false),
                Payload::Landed { lkey, offset, .. } => {
                    mrs.place_landed(m.rkey, va, plen, lkey, offset)
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
                }
                Err(e) => {
                    if let Some(r) = recv {
                        self.rq.push_front(r);
                    }
                    self.resp.msg = None;
                    self.stats.access_violations += 1;
                    self.note_refusal(MsgId::from(&m), MessageOutcome::from(e));
                    return Err(Refuse::Nak(NakCode::RemoteAccessError));
                }
            }
        }
        if plen == 0 && matches!(payload, Payload::Landed { .. }) {
            sinks.landing = Some(crate::Landing::InPlace(None));
        }
        m.offset += plen;
        if end {
            self.resp.msg = None;
            self.resp.msn = psn::add(self.resp.msn, 1);
            self.report_message(sinks, MsgId::from(&m), MessageOutcome::Delivered);
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
}

impl Qp {
    /// Keep why a UC WRITE packet was refused for `uc_request`, which reports the message
    /// (RC answers with a NAK and the requester retries: nothing to report).
    fn note_refusal(&mut self, id: MsgId, outcome: MessageOutcome) {
        if self.qp_type == QpType::Uc {
            self.resp.why = Some((id, outcome));
        }
    }
}
