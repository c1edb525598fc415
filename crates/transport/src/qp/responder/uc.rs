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
            match payload {
                Payload::Bytes(b) => self.rc_uc_send(src, ib, b, mrs, sinks),
                Payload::Landed { .. } => Err(Refuse::Nak(NakCode::InvalidRequest)),
            }
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
    pub(super) fn uc_damage(&mut self, sinks: &mut Sinks) {
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
}
