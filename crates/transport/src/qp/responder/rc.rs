//! RC requests: PSN order with NAK-sequence and duplicate re-ACK, READ and its replay,
//! atomics and theirs.

use super::*;

impl Qp {
    pub(super) fn rc_request(
        &mut self,
        now: Instant,
        src: SocketAddr,
        ib: &IbRepr,
        payload: Payload<'_>,
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
            } else if is_atomic(ib.bth.opcode) {
                self.replay_atomic(p);
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
            self.allows(Access::REMOTE_READ)
                .and_then(|()| self.rc_read(ib, mrs))
        } else if is_atomic(op) {
            self.allows(Access::REMOTE_ATOMIC)
                .and_then(|()| self.rc_atomic(ib, mrs))
        } else {
            Err(Refuse::Nak(NakCode::InvalidRequest))
        };
        match result {
            Ok(()) => {
                if op != Opcode::RC_RDMA_READ_REQUEST && !is_atomic(op) {
                    self.resp.epsn = psn::add(p, 1);
                    self.stats.rx_bytes += payload.len() as u64;
                    if ib.bth.ack_req {
                        self.ack(p, now);
                    }
                }
            }
            Err(Refuse::Rnr) => {
                self.resp.release_held();
                let aeth = AethRepr::rnr_nak(self.min_rnr_timer, self.resp.msn);
                self.resp.out.push_back(Resp::Ack { psn: p, aeth });
                self.stats.naks_sent += 1;
            }
            Err(Refuse::Nak(code)) => {
                self.queue_nak(p, code);
                let why = if code == NakCode::RemoteAccessError {
                    crate::ErrorCause::AccessError
                } else {
                    crate::ErrorCause::InvalidRequest
                };
                self.enter_error(sinks, why);
            }
        }
    }

    /// Refuse what the QP's own access flags do not allow its peer
    /// ([`crate::QpInit::remote_access`]), whatever the region allows.
    pub(super) fn allows(&mut self, need: Access) -> Result<(), Refuse> {
        if self.remote_access.contains(need) {
            Ok(())
        } else {
            self.stats.access_violations += 1;
            Err(Refuse::Nak(NakCode::RemoteAccessError))
        }
    }

    pub(super) fn rc_read(&mut self, ib: &IbRepr, mrs: &MrTable) -> Result<(), Refuse> {
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
                .get_in(self.pd_id, reth.rkey)
                .and_then(|r| r.check(reth.va, len, Access::REMOTE_READ))
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
        self.resp.release_held();
        self.resp.out.push_back(Resp::Read(r));
        if self.resp.history.len() == READ_HISTORY {
            self.resp.history.pop_front();
        }
        self.resp.history.push_back(r);
        self.resp.epsn = psn::add(ib.bth.psn, npkts);
        Ok(())
    }

    /// Compare-and-swap or fetch-and-add on an 8-byte aligned word of a region that allows
    /// atomics: run once, serialised with every other request of this endpoint (atomic
    /// with respect to this device's atomics: `IBV_ATOMIC_HCA`), and answered with the word
    /// as it was.
    pub(super) fn rc_atomic(&mut self, ib: &IbRepr, mrs: &mut MrTable) -> Result<(), Refuse> {
        let Some(a) = ib.atomic_eth.filter(|_| self.resp.msg.is_none()) else {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        };
        if a.va % u64::from(crate::wr::ATOMIC_LEN) != 0 {
            return Err(Refuse::Nak(NakCode::InvalidRequest));
        }
        let mut word = [0u8; 8];
        let region = mrs.get_mut_in(self.pd_id, a.rkey).map_err(|_| ());
        let orig = region
            .and_then(|r| {
                r.read(a.va, &mut word, Access::REMOTE_ATOMIC)
                    .map_err(|_| ())?;
                let orig = u64::from_ne_bytes(word);
                let new = if ib.bth.opcode == Opcode::RC_COMPARE_SWAP {
                    if orig == a.compare { a.swap_add } else { orig }
                } else {
                    orig.wrapping_add(a.swap_add)
                };
                if new != orig {
                    r.write(a.va, &new.to_ne_bytes(), Access::REMOTE_ATOMIC)
                        .map_err(|_| ())?;
                }
                Ok(orig)
            })
            .map_err(|()| {
                self.stats.access_violations += 1;
                Refuse::Nak(NakCode::RemoteAccessError)
            })?;
        let reply = AtomicReply {
            psn: ib.bth.psn,
            orig,
        };
        self.resp.msn = psn::add(self.resp.msn, 1);
        self.resp.release_held();
        self.resp.out.push_back(Resp::Atomic(reply));
        if self.resp.atomics.len() == READ_HISTORY {
            self.resp.atomics.pop_front();
        }
        self.resp.atomics.push_back(reply);
        self.resp.epsn = psn::add(ib.bth.psn, 1);
        Ok(())
    }

    /// A duplicate atomic: the answer it got, again (it is not run again: C9-112 of the
    /// specification, as rxe keeps its atomic replies).
    pub(super) fn replay_atomic(&mut self, p: u32) {
        match self.resp.atomics.iter().rev().find(|a| a.psn == p) {
            Some(&a) => {
                self.resp.release_held();
                self.resp.out.push_back(Resp::Atomic(a));
            }
            None => self.stats.drops += 1,
        }
    }

    /// A duplicate READ request: send the responses again from its PSN, if it lies inside
    /// a READ we executed and asks for nothing beyond it.
    pub(super) fn replay_read(&mut self, p: u32, ib: &IbRepr) {
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
        self.resp.release_held();
        self.resp.out.push_back(Resp::Read(r));
    }
}

/// Compare-and-swap or fetch-and-add.
fn is_atomic(op: Opcode) -> bool {
    op == Opcode::RC_COMPARE_SWAP || op == Opcode::RC_FETCH_ADD
}
