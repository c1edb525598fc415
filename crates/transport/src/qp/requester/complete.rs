//! What comes back: ACKs and NAKs (retire, go back, RNR back-off, fail), READ responses
//! and the retransmission timer.

use super::*;

impl Qp {
    /// The WR of `kind` (a READ, an atomic) that a response with PSN `p` answers, if it is
    /// one to take now. The responder answers in order: a response for a later request means
    /// an earlier READ or atomic still unanswered was lost on the way (its request or its
    /// answer), so the requester asks again from the first missing packet (and everything
    /// after it, go-back-N as InfiniBand's requester does) — once: the answers to the old
    /// requests still on their way say nothing new. A response for nothing outstanding is a
    /// duplicate.
    fn answered(&mut self, p: u32, kind: impl Fn(&SendOp) -> bool) -> Option<usize> {
        let sq = &self.req.sq;
        let Some(idx) = sq
            .iter()
            .position(|w| kind(&w.wr.op) && !w.done && w.contains(p))
        else {
            self.stats.duplicates += 1;
            return None;
        };
        let resume = sq
            .iter()
            .take(idx)
            .find(|w| w.is_read() && !w.done)
            .map(|w| psn::add(w.first_psn, w.read_pkts));
        let Some(resume) = resume else {
            return Some(idx);
        };
        if self.req.start_retry(resume) {
            self.stats.psn_gaps += 1;
        } else {
            self.stats.duplicates += 1;
        }
        None
    }

    /// Complete finished WQEs from the front, in order; a message sent once gives a
    /// round-trip sample.
    pub(super) fn retire(&mut self, now: Instant, sinks: &mut Sinks) {
        while let Some(w) = self.req.sq.front() {
            let finished = if w.is_read() {
                w.done
            } else {
                w.max_sent == w.npkts && psn::diff(w.last_psn(), self.req.una) < 0
            };
            if !finished {
                break;
            }
            let Some(w) = self.req.sq.pop_front() else {
                break;
            };
            if let (Some(t), false) = (w.sent_at, w.resent) {
                self.req.sample(now.saturating_duration_since(t));
            }
            let w = Some(w.wr);
            if let Some(wr) = w
                && wr.signaled
            {
                let wc = self.wc_send(&wr, WcStatus::Success);
                sinks.cqs.push(self.send_cq, wc);
            }
        }
    }

    /// Fail the WQE holding `p` (or the oldest) with `status` and enter ERROR.
    pub(super) fn fail(&mut self, p: Option<u32>, status: WcStatus, sinks: &mut Sinks) {
        let idx = p
            .and_then(|p| self.req.sq.iter().position(|w| w.contains(p)))
            .unwrap_or(0);
        // earlier WQEs were implicitly acknowledged
        for _ in 0..idx {
            if let Some(w) = self.req.sq.pop_front()
                && w.wr.signaled
            {
                let wc = self.wc_send(&w.wr, WcStatus::Success);
                sinks.cqs.push(self.send_cq, wc);
            }
        }
        if let Some(w) = self.req.sq.pop_front() {
            let wc = self.wc_send(&w.wr, status);
            sinks.cqs.push(self.send_cq, wc);
        }
        self.enter_error(sinks, crate::ErrorCause::Completion);
    }

    /// ACKNOWLEDGE (or ATOMIC ACKNOWLEDGE) from the responder.
    pub(crate) fn handle_ack(&mut self, now: Instant, p: u32, aeth: AethRepr, sinks: &mut Sinks) {
        let nak = !matches!(aeth.kind(), AethKind::Ack { .. });
        if nak && !self.req.nak_in_range(p) {
            // a NAK for nothing outstanding (stale, or not from the peer's stream): a
            // fatal one would otherwise end the QP
            self.stats.psn_refused += 1;
            return;
        }
        match aeth.kind() {
            AethKind::Ack { .. } => {
                let before = self.req.una;
                self.req.ack_through(p);
                self.retire(now, sinks);
                if self.req.una != before {
                    self.req.progress(now);
                }
            }
            AethKind::RnrNak { timer, .. } => {
                self.stats.naks_received += 1;
                self.stats.rnr_naks_received += 1;
                self.req.ack_through(psn::sub1(p));
                self.retire(now, sinks);
                if self.req.rnr_retry != 7 {
                    if self.req.rnr_left == 0 {
                        self.fail(Some(p), WcStatus::RnrRetryExceeded, sinks);
                        return;
                    }
                    self.req.rnr_left -= 1;
                }
                let wait =
                    Duration::from_micros(u64::from(RNR_TIMER_USEC[usize::from(timer & 0x1F)]));
                self.req.rnr_deadline = Some(now + wait);
                self.req.retry_deadline = None;
                self.req.go_back(p);
            }
            AethKind::Nak(NakCode::PsnSequenceError) => {
                self.stats.naks_received += 1;
                let before = self.req.una;
                self.req.ack_through(psn::sub1(p));
                self.retire(now, sinks);
                if self.req.una == before && self.req.retry_cnt != 7 {
                    if self.req.retries_left == 0 {
                        self.fail(Some(p), WcStatus::RetryExceeded, sinks);
                        return;
                    }
                    self.req.retries_left -= 1;
                }
                if self.req.on_loss(false) {
                    self.stats.window_cuts += 1;
                }
                self.req.go_back(p);
                self.req.rearm(now);
            }
            AethKind::Nak(code) => {
                self.stats.naks_received += 1;
                let status = match code {
                    NakCode::InvalidRequest => WcStatus::RemoteInvalidRequest,
                    NakCode::RemoteAccessError => WcStatus::RemoteAccessError,
                    _ => WcStatus::RemoteOperationalError,
                };
                self.fail(Some(p), status, sinks);
            }
            AethKind::Reserved(_) => self.stats.drops += 1,
        }
    }

    /// RDMA READ response packet.
    pub(crate) fn handle_read_response(
        &mut self,
        now: Instant,
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let p = ib.bth.psn;
        let Some(idx) = self.answered(p, |op| matches!(op, SendOp::Read { .. })) else {
            return;
        };
        let mtu = self.mtu.bytes();
        let w = &self.req.sq[idx];
        let expected = psn::add(w.first_psn, w.read_pkts);
        let d = psn::diff(p, expected);
        if d < 0 {
            self.stats.duplicates += 1;
            return;
        }
        if d > 0 {
            // a response was lost: ask again from the missing one (once per gap: the
            // responses still coming for the old request say nothing new)
            if self.req.start_retry(expected) {
                self.stats.psn_gaps += 1;
            } else {
                self.stats.duplicates += 1;
            }
            return;
        }
        let total = w.len as usize;
        let done = w.read_pkts as usize * mtu;
        let remaining = total - done.min(total);
        let op = ib.bth.opcode;
        // The bytes at a PSN are the same whichever request (original or re-request from the
        // middle, which restarts at FIRST/ONLY) produced the response, so only the lengths
        // are checked: FIRST/MIDDLE carry a full MTU, LAST/ONLY exactly what is left.
        let len_ok = if op.is_first() || op.is_middle() {
            payload.len() == mtu && remaining > mtu
        } else {
            payload.len() == remaining
        };
        if !len_ok {
            self.fail(Some(p), WcStatus::BadResponse, sinks);
            return;
        }
        let sg = w.wr.sg_list;
        if !payload.is_empty()
            && mrs
                .check_scatter(&sg, done as u64, payload.len() as u64)
                .and_then(|()| mrs.scatter_within(&sg, done as u64, payload))
                .is_err()
        {
            self.fail(Some(p), WcStatus::LocalProtectionError, sinks);
            return;
        }
        self.stats.rx_bytes += payload.len() as u64;
        let Some(w) = self.req.sq.get_mut(idx) else {
            return;
        };
        w.read_pkts += 1;
        if op.is_last() || op.is_only() {
            w.done = true;
        }
        // everything before this response is acknowledged
        let una = if w.done {
            psn::add(w.first_psn, w.npkts)
        } else {
            psn::add(p, 1)
        };
        self.req.advance_una(una);
        self.retire(now, sinks);
        self.req.progress(now);
    }

    /// ATOMIC ACKNOWLEDGE: the word as it was before the atomic at `p` ran, which lands in
    /// that atomic's local buffer (in this host's byte order) and completes it.
    pub(crate) fn handle_atomic_ack(
        &mut self,
        now: Instant,
        p: u32,
        aeth: AethRepr,
        orig: u64,
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        if !matches!(aeth.kind(), AethKind::Ack { .. }) {
            // a NAK comes as a plain acknowledgement
            self.stats.drops += 1;
            return;
        }
        let Some(idx) = self.answered(p, SendOp::is_atomic) else {
            return;
        };
        let sg = self.req.sq[idx].wr.sg_list;
        let word = orig.to_ne_bytes();
        if mrs
            .check_scatter(&sg, 0, word.len() as u64)
            .and_then(|()| mrs.scatter_within(&sg, 0, &word))
            .is_err()
        {
            self.fail(Some(p), WcStatus::LocalProtectionError, sinks);
            return;
        }
        self.stats.rx_bytes += word.len() as u64;
        let Some(w) = self.req.sq.get_mut(idx) else {
            return;
        };
        w.read_pkts = 1;
        w.done = true;
        let una = psn::add(w.first_psn, 1);
        self.req.advance_una(una);
        self.retire(now, sinks);
        self.req.progress(now);
    }

    /// Retransmit and RNR timers.
    pub(crate) fn handle_request_timeout(&mut self, now: Instant, sinks: &mut Sinks) {
        if self.req.rnr_deadline.is_some_and(|t| t <= now) {
            self.req.rnr_deadline = None;
            self.req.rearm(now);
        }
        if self.req.retry_deadline.is_some_and(|t| t <= now) {
            self.stats.timeouts += 1;
            if self.req.retry_cnt != 7 {
                if self.req.retries_left == 0 {
                    self.fail(None, WcStatus::RetryExceeded, sinks);
                    return;
                }
                self.req.retries_left -= 1;
            }
            if self.req.on_loss(true) {
                self.stats.window_cuts += 1;
            }
            let una = self.req.una;
            self.req.go_back(una);
            self.req.retrying.clear();
            self.req.backoff = (self.req.backoff + 1).min(MAX_BACKOFF);
            self.req.retry_deadline = Some(now + self.req.rto());
        }
    }
}
