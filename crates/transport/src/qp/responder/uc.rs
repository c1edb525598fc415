//! UC requests: a PSN gap or a refused packet drops the rest of the message, reported
//! as damaged.

use super::*;

impl Qp {
    pub(super) fn uc_request(
        &mut self,
        src: SocketAddr,
        ib: &IbRepr,
        payload: Payload<'_>,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let p = ib.bth.psn;
        let op = ib.bth.opcode;
        let start = op.is_first() || op.is_only();
        if self.psn_unknown && start {
            // the peer's stream starts here
            self.psn_unknown = false;
            self.resp.epsn = p;
        }
        let d = psn::diff(p, self.resp.epsn);
        if self.psn_window > 0 && (d < 0 || d as u32 >= self.psn_window) {
            // not where the peer's stream is: a replay, or not the peer's
            self.stats.psn_refused += 1;
            return;
        }
        if d != 0 || self.resp.uc_drop {
            if d > 0 {
                self.stats.psn_gaps += 1;
            } else if d < 0 {
                self.stats.duplicates += 1;
            }
            if d != 0 {
                if self.resp.msg.is_none() && !self.resp.uc_drop && !start && op.is_write() {
                    // between messages, a packet out of sequence that is no FIRST: the
                    // FIRST of its message was lost
                    self.report_message(sinks, MsgId::no_start(p), MessageOutcome::NoStart);
                }
                self.uc_damage(sinks, MessageOutcome::Sequence);
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
            self.uc_damage(sinks, MessageOutcome::Interrupted);
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
                // UC has no NAKs: drop the rest of the message, reporting why
                self.stats.drops += 1;
                let why = self.resp.why.take();
                if self.resp.msg.is_some() {
                    let (outcome, faults) = why.map_or(
                        (
                            MessageOutcome::Sequence,
                            Faults::of(MessageOutcome::Sequence),
                        ),
                        |(_, o, f)| (o, f),
                    );
                    self.uc_damage_faults(sinks, outcome, faults);
                } else if let Some((id, outcome, faults)) = why {
                    self.report_faults(sinks, id, outcome, faults);
                }
                self.resp.uc_drop = true;
                self.resp.epsn = psn::add(p, 1);
            }
        }
    }

    /// Discard the UC message in progress, reporting it (a WRITE also with `why`); its
    /// RECV WR is reused.
    pub(super) fn uc_damage(&mut self, sinks: &mut Sinks, why: MessageOutcome) {
        self.uc_damage_faults(sinks, why, Faults::of(why));
    }

    /// [`Qp::uc_damage`] with every check the message failed.
    fn uc_damage_faults(&mut self, sinks: &mut Sinks, why: MessageOutcome, faults: Faults) {
        if let Some(m) = self.resp.msg.take() {
            self.stats.damaged_messages += 1;
            if m.write {
                self.report_faults(sinks, MsgId::from(&m), why, faults);
            }
            if let Some(r) = m.recv {
                self.put_back_recv(sinks, r);
            }
            sinks.events.push_back(Event::MessageDamaged {
                qpn: self.qpn,
                first_psn: m.first_psn,
                bytes_placed: m.offset,
                write: m.write,
            });
        }
    }
}

/// The common case of a landed payload (see `Endpoint::handle_landed` and its lane): a UC
/// RDMA WRITE ONLY without immediate.
impl Qp {
    /// Whether a UC WRITE ONLY without immediate of `len` bytes with `psn` would be
    /// accepted by [`Qp::uc_request`] with nothing more to check than its placement: a UC
    /// QP able to receive, between messages, not dropping, in order, within the MTU.
    #[inline]
    pub(crate) fn uc_write_only_ready(&self, psn: u32, len: usize) -> bool {
        self.qp_type == QpType::Uc
            && matches!(self.state, QpState::Rtr | QpState::Rts)
            && !self.resp.uc_drop
            && self.resp.msg.is_none()
            && self.resp.epsn == psn
            && len > 0
            && len <= self.mtu_bytes
            && self.write_rules == crate::WriteRules::NONE
            && self.remote_access.contains(crate::Access::REMOTE_WRITE)
    }

    /// Account a placed UC WRITE ONLY that [`Qp::uc_write_only_ready`] passed, exactly as
    /// `uc_request` and `rc_uc_write` do for it: packet counted, payload CRC kept, the
    /// placement reported, the message closed (MSN) and the PSN moved on.
    #[inline]
    pub(crate) fn uc_write_only_placed(
        &mut self,
        psn: u32,
        rkey: u32,
        va: u64,
        len: usize,
        payload_crc: u32,
        sinks: &mut Sinks,
    ) -> crate::Placement {
        self.stats.rx_packets += 1;
        self.rx_payload_crc = payload_crc;
        self.resp.msn = psn::add(self.resp.msn, 1);
        self.resp.epsn = psn::add(psn, 1);
        self.stats.rx_bytes += len as u64;
        let id = MsgId {
            first_psn: psn,
            va,
            rkey,
            len: len as u32,
        };
        self.report_message(sinks, id, MessageOutcome::Delivered);
        crate::Placement {
            psn,
            rkey,
            va,
            len: len as u32,
            crc: payload_crc,
        }
    }

    /// Account for a run of UC WRITE ONLY packets placed right after one that
    /// [`Qp::uc_write_only_placed`] accounted, each of which passed
    /// [`Qp::uc_write_only_ready`] in turn (PSN by PSN, nothing else changing in between):
    /// as that function would for each, at once.
    pub(crate) fn uc_write_only_run_placed(&mut self, run: &[crate::Placement], sinks: &mut Sinks) {
        let Some(last) = run.last() else {
            return;
        };
        let n = run.len() as u32;
        self.stats.rx_packets += u64::from(n);
        self.stats.rx_bytes += run.iter().map(|p| u64::from(p.len)).sum::<u64>();
        self.rx_payload_crc = last.crc;
        self.resp.msn = psn::add(self.resp.msn, n);
        self.resp.epsn = psn::add(last.psn, 1);
        if self.report_messages {
            for p in run {
                let id = MsgId {
                    first_psn: p.psn,
                    va: p.va,
                    rkey: p.rkey,
                    len: p.len,
                };
                self.report_message(sinks, id, MessageOutcome::Delivered);
            }
        }
    }
}
