//! The send side of a QP: segmentation, PSNs, AckReq, ACK/NAK handling, go-back-N
//! retransmission, RNR back-off, READ responses (RC); fire-and-forget (UC, UD).

use super::{Qp, QpState, QpType, Sinks, build_headers, build_packet};
use crate::mr::{Access, MrTable};
use crate::wr::{SendOp, SendWr, WcStatus};
use rocelink_wire::ib::ext::{AethKind, NakCode, RNR_TIMER_USEC};
use rocelink_wire::ib::{AethRepr, BthRepr, DethRepr, IbRepr, Opcode, RethRepr, Transport, psn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Payloads from this size on are left in their region by `poll_transmit_gather`.
const GATHER_MIN: usize = 512;

/// A send WR in flight.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
    first_psn: u32,
    /// PSNs the message uses (READ: the responses' PSNs).
    npkts: u32,
    /// Next packet index to (re)send; READ: 0 = request to (re)send, 1 = sent.
    next_pkt: u32,
    /// Packets sent at least once (to count retransmissions).
    max_sent: u32,
    /// READ: responses received in order.
    read_pkts: u32,
    /// READ finished.
    done: bool,
}

impl SendWqe {
    fn last_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npkts - 1)
    }
    fn is_read(&self) -> bool {
        matches!(self.wr.op, SendOp::Read { .. })
    }
    fn contains(&self, p: u32) -> bool {
        let d = psn::diff(p, self.first_psn);
        d >= 0 && (d as u32) < self.npkts
    }
}

/// Requester state.
#[derive(Debug)]
pub(crate) struct Requester {
    sq: VecDeque<SendWqe>,
    /// PSN of the next new WQE's first packet.
    next_psn: u32,
    /// Oldest PSN not yet acknowledged.
    una: u32,
    timeout: Duration,
    retry_cnt: u8,
    rnr_retry: u8,
    retries_left: u8,
    rnr_left: u8,
    retry_deadline: Option<Instant>,
    rnr_deadline: Option<Instant>,
    /// Most packets in flight (RC).
    pub(crate) window: u32,
    /// Set AckReq at least every this many packets.
    pub(crate) ack_every: u32,
    since_ackreq: u32,
}

impl Default for Requester {
    fn default() -> Self {
        Requester {
            sq: VecDeque::new(),
            next_psn: 0,
            una: 0,
            timeout: Duration::from_millis(67),
            retry_cnt: 7,
            rnr_retry: 7,
            retries_left: 7,
            rnr_left: 7,
            retry_deadline: None,
            rnr_deadline: None,
            window: 1024,
            ack_every: 64,
            since_ackreq: 0,
        }
    }
}

impl Requester {
    pub(crate) fn configure(
        &mut self,
        sq_psn: u32,
        timeout: Duration,
        retry_cnt: u8,
        rnr_retry: u8,
    ) {
        self.next_psn = sq_psn;
        self.una = sq_psn;
        self.timeout = timeout.max(Duration::from_micros(100));
        self.retry_cnt = retry_cnt.min(7);
        self.rnr_retry = rnr_retry.min(7);
        self.retries_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    pub(crate) fn drain(&mut self) -> Vec<SendWr> {
        self.retry_deadline = None;
        self.rnr_deadline = None;
        self.sq.drain(..).map(|w| w.wr).collect()
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.sq.len()
    }

    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        match (self.retry_deadline, self.rnr_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// PSN the next packet to send carries, and its WQE index.
    fn cursor(&self) -> Option<(usize, u32)> {
        self.sq.iter().enumerate().find_map(|(i, w)| {
            if w.is_read() {
                (w.next_pkt == 0 && !w.done).then(|| (i, psn::add(w.first_psn, w.read_pkts)))
            } else {
                (w.next_pkt < w.npkts).then(|| (i, psn::add(w.first_psn, w.next_pkt)))
            }
        })
    }

    /// Resend everything from PSN `p` on.
    fn go_back(&mut self, p: u32) {
        for w in self.sq.iter_mut() {
            if w.is_read() {
                if !w.done && psn::diff(psn::add(w.first_psn, w.npkts), p) > 0 {
                    w.next_pkt = 0;
                }
            } else if w.contains(p) {
                w.next_pkt = w.next_pkt.min(psn::diff(p, w.first_psn) as u32);
            } else if psn::diff(w.first_psn, p) > 0 {
                w.next_pkt = 0;
            }
        }
    }

    fn progress(&mut self, now: Instant) {
        self.retries_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
        self.rearm(now);
    }

    fn rearm(&mut self, now: Instant) {
        let in_flight = self.sq.iter().any(|w| {
            if w.is_read() {
                !w.done && w.next_pkt > 0
            } else {
                w.max_sent > 0
            }
        });
        self.retry_deadline = in_flight.then(|| now + self.timeout);
    }

    /// Cumulative acknowledgement of every PSN up to and including `p`.
    fn ack_through(&mut self, p: u32) {
        // ignore ACKs for PSNs we never sent or already covered
        let sent_end = self.sent_end();
        if psn::diff(p, self.una) < -1 || psn::diff(p, sent_end) >= 0 {
            return;
        }
        let mut una = psn::add(p, 1);
        for w in self.sq.iter_mut() {
            if psn::diff(w.first_psn, p) > 0 {
                break;
            }
            if w.is_read() && !w.done {
                // responses for this READ were lost (the peer already answered later
                // requests): ask again from where they stopped
                let resume = psn::add(w.first_psn, w.read_pkts);
                una = resume;
                w.next_pkt = 0;
                break;
            }
        }
        if psn::diff(una, self.una) > 0 {
            self.una = una;
        }
    }

    /// One past the last PSN sent so far.
    fn sent_end(&self) -> u32 {
        let mut end = self.una;
        for w in &self.sq {
            let sent = if w.is_read() {
                if w.max_sent > 0 { w.npkts } else { 0 }
            } else {
                w.max_sent
            };
            if sent > 0 {
                end = psn::add(w.first_psn, sent);
            }
        }
        end
    }
}

impl Qp {
    /// Queue a send WR (state and local memory are checked here).
    pub(crate) fn post_send(&mut self, wr: SendWr, mrs: &MrTable) -> Result<(), crate::QpError> {
        if self.state != QpState::Rts {
            return Err(crate::QpError::BadState(self.state));
        }
        if self.req.outstanding() >= self.max_send_wr {
            return Err(crate::QpError::QueueFull);
        }
        let len = wr.sge.len as usize;
        let allowed = match (self.qp_type, wr.op) {
            (QpType::Ud, SendOp::UdSend { .. }) => true,
            (
                QpType::Uc,
                SendOp::Send | SendOp::SendImm(_) | SendOp::Write { .. } | SendOp::WriteImm { .. },
            ) => true,
            (QpType::Rc, SendOp::UdSend { .. }) => false,
            (QpType::Rc, _) => true,
            _ => false,
        };
        if !allowed {
            return Err(crate::QpError::UnsupportedOp);
        }
        if self.qp_type == QpType::Ud && len > self.mtu.bytes() {
            return Err(crate::QpError::TooLong);
        }
        if len > 1 << 31 {
            return Err(crate::QpError::TooLong);
        }
        if len > 0 {
            let need = if matches!(wr.op, SendOp::Read { .. }) {
                Access::LOCAL_WRITE
            } else {
                Access::NONE
            };
            mrs.get(wr.sge.lkey)
                .and_then(|m| m.slice(wr.sge.va, u64::from(wr.sge.len), need).map(|_| ()))
                .map_err(crate::QpError::LocalAccess)?;
        }
        let npkts = if self.qp_type == QpType::Ud {
            1
        } else {
            self.mtu.packets(len)
        };
        let first_psn = self.req.next_psn;
        self.req.next_psn = psn::add(first_psn, npkts);
        self.req.sq.push_back(SendWqe {
            wr,
            first_psn,
            npkts,
            next_pkt: 0,
            max_sent: 0,
            read_pkts: 0,
            done: false,
        });
        Ok(())
    }

    /// Write the next request packet into `buf`; returns its destination and length.
    pub(crate) fn poll_request(
        &mut self,
        now: Instant,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
        sinks: &mut Sinks,
        gather: bool,
    ) -> Option<(SocketAddr, usize, Option<crate::Gather>)> {
        if self.state != QpState::Rts || self.req.rnr_deadline.is_some() {
            return None;
        }
        let (idx, p) = self.req.cursor()?;
        if self.qp_type == QpType::Rc && psn::diff(p, self.req.una) >= self.req.window as i32 {
            return None;
        }
        let mtu = self.mtu.bytes();
        let w = self.req.sq[idx].clone();
        let transport = match self.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        };
        let mut ib = IbRepr {
            bth: BthRepr {
                dest_qp: self.dest_qpn,
                psn: p,
                pkey: self.pkey,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut dst = self.remote;
        // (offset, len) of the payload in the SGE
        let (off, plen);
        match w.wr.op {
            SendOp::Read { va, rkey } => {
                let done = u64::from(w.read_pkts) * mtu as u64;
                ib.bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
                ib.reth = Some(RethRepr {
                    va: va.wrapping_add(done),
                    rkey,
                    dma_len: (u64::from(w.wr.sge.len) - done.min(u64::from(w.wr.sge.len))) as u32,
                });
                ib.bth.ack_req = true;
                (off, plen) = (0, 0);
            }
            SendOp::UdSend { dest, imm } => {
                ib.bth.opcode = if imm.is_some() {
                    Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
                } else {
                    Opcode::UD_SEND_ONLY
                };
                ib.bth.dest_qp = dest.qpn & psn::MASK;
                let qkey = if dest.qkey & 0x8000_0000 != 0 {
                    self.qkey
                } else {
                    dest.qkey
                };
                ib.deth = Some(DethRepr {
                    qkey,
                    src_qp: self.qpn,
                });
                ib.immdt = imm;
                dst = Some(dest.addr);
                (off, plen) = (0, w.wr.sge.len as usize);
            }
            op => {
                let k = w.next_pkt;
                let total = w.wr.sge.len as usize;
                off = k as usize * mtu;
                plen = (total - off.min(total)).min(mtu);
                let (first, last) = (k == 0, k + 1 == w.npkts);
                let (is_write, imm) = match op {
                    SendOp::Send => (false, None),
                    SendOp::SendImm(i) => (false, Some(i)),
                    SendOp::Write { .. } => (true, None),
                    SendOp::WriteImm { imm, .. } => (true, Some(imm)),
                    _ => (false, None),
                };
                let base = match (is_write, first, last, imm.is_some()) {
                    (false, true, true, false) => 0x04,
                    (false, true, true, true) => 0x05,
                    (false, true, false, _) => 0x00,
                    (false, false, false, _) => 0x01,
                    (false, false, true, false) => 0x02,
                    (false, false, true, true) => 0x03,
                    (true, true, true, false) => 0x0A,
                    (true, true, true, true) => 0x0B,
                    (true, true, false, _) => 0x06,
                    (true, false, false, _) => 0x07,
                    (true, false, true, false) => 0x08,
                    (true, false, true, true) => 0x09,
                };
                ib.bth.opcode = Opcode::with_transport(transport, base);
                if let (SendOp::Write { va, rkey } | SendOp::WriteImm { va, rkey, .. }, true) =
                    (op, first)
                {
                    ib.reth = Some(RethRepr {
                        va,
                        rkey,
                        dma_len: w.wr.sge.len,
                    });
                }
                if last {
                    ib.immdt = imm;
                    ib.bth.solicited = w.wr.solicited;
                }
                self.req.since_ackreq += 1;
                if self.qp_type == QpType::Rc
                    && (last || self.req.since_ackreq >= self.req.ack_every)
                {
                    ib.bth.ack_req = true;
                    self.req.since_ackreq = 0;
                }
            }
        }
        let dst = dst?;
        let payload = if plen == 0 {
            &[][..]
        } else {
            match mrs
                .get(w.wr.sge.lkey)
                .and_then(|m| m.slice(w.wr.sge.va + off as u64, plen as u64, Access::NONE))
            {
                Ok(s) => s,
                Err(_) => {
                    // the region went away after posting
                    let wc = self.wc_send(&w.wr, WcStatus::LocalProtectionError);
                    sinks.cqs.push(self.send_cq, wc);
                    self.req.sq.remove(idx);
                    self.enter_error(sinks);
                    return None;
                }
            }
        };
        ib.payload_len = plen;
        ib.bth.pad_count = rocelink_wire::ib::pad_for(plen);
        let (n, g) = match mrs
            .get(w.wr.sge.lkey)
            .and_then(|m| m.offset_of(w.wr.sge.va + off as u64, plen as u64))
        {
            // small payloads are cheaper copied than sent as separate iovecs
            Ok(offset) if gather && plen >= GATHER_MIN => {
                let (n, tail, tail_len) = build_headers(buf, &ib, payload, self.local, dst);
                let g = crate::Gather {
                    lkey: w.wr.sge.lkey,
                    offset,
                    len: plen,
                    tail,
                    tail_len,
                };
                (n, Some(g))
            }
            _ => (build_packet(buf, &ib, payload, self.local, dst), None),
        };
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += plen as u64;
        let wq = &mut self.req.sq[idx];
        if wq.is_read() {
            if wq.max_sent > 0 {
                self.stats.retransmissions += 1;
            }
            wq.next_pkt = 1;
            wq.max_sent = 1;
        } else {
            if wq.next_pkt < wq.max_sent {
                self.stats.retransmissions += 1;
            }
            wq.next_pkt += 1;
            wq.max_sent = wq.max_sent.max(wq.next_pkt);
        }
        match self.qp_type {
            QpType::Rc => {
                if self.req.retry_deadline.is_none() {
                    self.req.retry_deadline = Some(now + self.req.timeout);
                }
            }
            // unreliable: done once the last packet left
            QpType::Uc | QpType::Ud => {
                if wq.next_pkt >= wq.npkts {
                    let w = self.req.sq.remove(idx).map(|w| w.wr);
                    self.req.una = self.req.next_psn;
                    if let Some(wr) = w
                        && wr.signaled
                    {
                        let wc = self.wc_send(&wr, WcStatus::Success);
                        sinks.cqs.push(self.send_cq, wc);
                    }
                }
            }
        }
        Some((dst, n, g))
    }

    /// Complete finished WQEs from the front, in order.
    fn retire(&mut self, sinks: &mut Sinks) {
        while let Some(w) = self.req.sq.front() {
            let finished = if w.is_read() {
                w.done
            } else {
                w.max_sent == w.npkts && psn::diff(w.last_psn(), self.req.una) < 0
            };
            if !finished {
                break;
            }
            let w = self.req.sq.pop_front().map(|w| w.wr);
            if let Some(wr) = w
                && wr.signaled
            {
                let wc = self.wc_send(&wr, WcStatus::Success);
                sinks.cqs.push(self.send_cq, wc);
            }
        }
    }

    /// Fail the WQE holding `p` (or the oldest) with `status` and enter ERROR.
    fn fail(&mut self, p: Option<u32>, status: WcStatus, sinks: &mut Sinks) {
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
        self.enter_error(sinks);
    }

    /// ACKNOWLEDGE (or ATOMIC ACKNOWLEDGE) from the responder.
    pub(crate) fn handle_ack(&mut self, now: Instant, p: u32, aeth: AethRepr, sinks: &mut Sinks) {
        match aeth.kind() {
            AethKind::Ack { .. } => {
                let before = self.req.una;
                self.req.ack_through(p);
                self.retire(sinks);
                if self.req.una != before {
                    self.req.progress(now);
                }
            }
            AethKind::RnrNak { timer, .. } => {
                self.stats.naks_received += 1;
                self.stats.rnr_naks_received += 1;
                self.req.ack_through(psn::sub1(p));
                self.retire(sinks);
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
                self.retire(sinks);
                if self.req.una == before && self.req.retry_cnt != 7 {
                    if self.req.retries_left == 0 {
                        self.fail(Some(p), WcStatus::RetryExceeded, sinks);
                        return;
                    }
                    self.req.retries_left -= 1;
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
        let Some(idx) = self
            .req
            .sq
            .iter()
            .position(|w| w.is_read() && !w.done && w.contains(p))
        else {
            self.stats.duplicates += 1;
            return;
        };
        // The responder answers in order: a response for this READ means every response of
        // an earlier, unfinished READ was sent and lost. Ask again from the first missing
        // one (and everything after it) instead of running ahead of it.
        if let Some(earlier) = self
            .req
            .sq
            .iter()
            .take(idx)
            .find(|w| w.is_read() && !w.done)
        {
            let resume = psn::add(earlier.first_psn, earlier.read_pkts);
            self.stats.psn_gaps += 1;
            self.req.go_back(resume);
            return;
        }
        let mtu = self.mtu.bytes();
        let w = &self.req.sq[idx];
        let expected = psn::add(w.first_psn, w.read_pkts);
        let d = psn::diff(p, expected);
        if d < 0 {
            self.stats.duplicates += 1;
            return;
        }
        if d > 0 {
            // a response was lost: ask again from the missing one
            self.stats.psn_gaps += 1;
            self.req.go_back(expected);
            return;
        }
        let total = w.wr.sge.len as usize;
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
        let sge = w.wr.sge;
        if !payload.is_empty() {
            match mrs.get_mut(sge.lkey).and_then(|m| {
                m.slice_mut(
                    sge.va + done as u64,
                    payload.len() as u64,
                    Access::LOCAL_WRITE,
                )
            }) {
                Ok(dst) => dst.copy_from_slice(payload),
                Err(_) => {
                    self.fail(Some(p), WcStatus::LocalProtectionError, sinks);
                    return;
                }
            }
        }
        self.stats.rx_bytes += payload.len() as u64;
        let w = &mut self.req.sq[idx];
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
        if psn::diff(una, self.req.una) > 0 {
            self.req.una = una;
        }
        self.retire(sinks);
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
            let una = self.req.una;
            self.req.go_back(una);
            self.req.retry_deadline = Some(now + self.req.timeout);
        }
    }
}
