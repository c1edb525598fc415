//! The send side of a QP: segmentation, PSNs, AckReq, ACK/NAK handling, go-back-N
//! retransmission, RNR back-off, READ responses (RC); fire-and-forget (UC, UD).

use super::{Body, Qp, QpState, QpType, Sinks, build_datagram};
use crate::mr::{Access, MrTable};
use crate::wr::{SendOp, SendWr, WcStatus};
use rocelink_wire::ib::ext::{AethKind, NakCode, RNR_TIMER_USEC};
use rocelink_wire::ib::{
    AethRepr, AtomicEthRepr, BthRepr, DethRepr, IbRepr, Opcode, RethRepr, Transport, psn,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod queue;
mod window;

use queue::SendQueue;

/// A send WR in flight.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
    /// The message's length: its gather list's, or its inline data's.
    pub(crate) len: u32,
    /// The data of an inline send, copied when it was posted (its gather list is then
    /// not read).
    pub(crate) inline: Option<std::sync::Arc<[u8]>>,
    first_psn: u32,
    /// PSNs the message uses (READ: the responses' PSNs; an atomic: one).
    npkts: u32,
    /// Next packet index to (re)send; READ and atomics: 0 = request to (re)send, 1 = sent.
    next_pkt: u32,
    /// Packets sent at least once (to count retransmissions).
    max_sent: u32,
    /// READ: responses received in order.
    read_pkts: u32,
    /// READ finished.
    done: bool,
    /// When its first packet was first sent (for a round-trip sample).
    sent_at: Option<Instant>,
    /// A one-piece gather list's offset in its region, checked at posting, with the
    /// region table's generation then ([`MrTable::generation`]): still good while that is.
    pub(crate) gather_at: Option<(u64, usize)>,
    /// Some packet of it was sent again: its completion says nothing of the round trip
    /// (Karn's rule).
    resent: bool,
}

impl SendWqe {
    fn last_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npkts - 1)
    }
    /// A READ or an atomic: one request, answered with data (READ responses, or an atomic
    /// acknowledgement) that completes it.
    fn is_read(&self) -> bool {
        matches!(self.wr.op, SendOp::Read { .. }) || self.wr.op.is_atomic()
    }
    fn contains(&self, p: u32) -> bool {
        let d = psn::diff(p, self.first_psn);
        d >= 0 && (d as u32) < self.npkts
    }
}

/// Requester state.
#[derive(Debug)]
pub(crate) struct Requester {
    sq: SendQueue,
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
    /// The congestion window below `window`.
    pub(crate) cc: window::Cwnd,
    /// Smoothed round trip (request to completion of a message sent once) and its
    /// variation (RFC 6298), once measured.
    srtt: Option<Duration>,
    rttvar: Duration,
    /// Timeouts in a row with no progress: each doubles the next wait.
    backoff: u32,
    /// The READs (their first PSNs) asked for again after a gap: until one is done, more
    /// signs of a gap in it — responses of later READs still on their way, a response past
    /// a lost one — are not a reason to ask again (as rxe's `started_retry`); the timer is.
    retrying: Vec<u32>,
    /// The headers of the last UD SEND sent by gather, kept for the next one
    /// (`ud_send.rs`).
    ud_headers: Option<ud_send::UdHeaders>,
}

impl Default for Requester {
    fn default() -> Self {
        Requester {
            sq: SendQueue::default(),
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
            cc: window::Cwnd::default(),
            srtt: None,
            rttvar: Duration::ZERO,
            backoff: 0,
            retrying: Vec::new(),
            ud_headers: None,
        }
    }
}

/// Most doublings of the retransmit timeout in a row.
const MAX_BACKOFF: u32 = 6;

impl Requester {
    /// How long to wait for progress before sending again: the configured timeout, or the
    /// measured round trip plus four deviations when that is longer, doubled for each
    /// timeout in a row (so a slow peer is not flooded with the same requests).
    pub(crate) fn rto(&self) -> Duration {
        let measured = self.srtt.map_or(Duration::ZERO, |s| s + 4 * self.rttvar);
        self.timeout.max(measured) * (1 << self.backoff)
    }

    /// A round-trip sample (RFC 6298's update).
    fn sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let dev = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + dev) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
    }

    /// A READ's responses stopped at `p` (lost): send again from `p` on. True the first
    /// time for that READ, false while a retry of it is already under way.
    pub(crate) fn start_retry(&mut self, p: u32) -> bool {
        let Some(first) = self
            .sq
            .iter()
            .find(|w| w.is_read() && !w.done && w.contains(p))
            .map(|w| w.first_psn)
        else {
            return false;
        };
        if self.retrying.contains(&first) {
            return false;
        }
        self.retrying.push(first);
        self.go_back(p);
        true
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
        self.cc = window::Cwnd::default();
        self.timeout = timeout.max(Duration::from_micros(100));
        self.srtt = None;
        self.rttvar = Duration::ZERO;
        self.backoff = 0;
        self.retrying.clear();
        self.retry_cnt = retry_cnt.min(7);
        self.rnr_retry = rnr_retry.min(7);
        self.retries_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    pub(crate) fn drain(&mut self) -> Vec<SendWr> {
        self.retry_deadline = None;
        self.rnr_deadline = None;
        self.sq.drain().map(|w| w.wr).collect()
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
        self.sq.first_sendable(|w| {
            if w.is_read() {
                (w.next_pkt == 0 && !w.done).then(|| psn::add(w.first_psn, w.read_pkts))
            } else {
                (w.next_pkt < w.npkts).then(|| psn::add(w.first_psn, w.next_pkt))
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
        self.backoff = 0;
        let sq = &self.sq;
        self.retrying.retain(|&first| {
            sq.iter()
                .any(|w| w.is_read() && !w.done && w.first_psn == first)
        });
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
        self.retry_deadline = in_flight.then(|| now + self.rto());
    }

    /// Cumulative acknowledgement of every PSN up to and including `p`.
    /// Whether an ACK naming `p` can be for this requester: a packet it sent and has not
    /// seen acknowledged (or the one just before, a repeated ACK).
    pub(crate) fn ack_in_range(&self, p: u32) -> bool {
        psn::diff(p, self.una) >= -1 && psn::diff(p, self.sent_end()) < 0
    }

    /// Whether a NAK naming `p` can be for this requester: a packet it sent and has not
    /// seen acknowledged, or (a sequence NAK) the next one it would send.
    pub(crate) fn nak_in_range(&self, p: u32) -> bool {
        psn::diff(p, self.una) >= 0 && psn::diff(p, self.sent_end()) <= 0
    }

    fn ack_through(&mut self, p: u32) {
        // ignore ACKs for PSNs we never sent or already covered
        let sent_end = self.sent_end();
        if psn::diff(p, self.una) < -1 || psn::diff(p, sent_end) >= 0 {
            return;
        }
        let mut una = psn::add(p, 1);
        // an unfinished READ at or before `p`: responses for it were lost (the peer
        // already answered later requests): ask again from where they stopped
        let lost = self
            .sq
            .iter()
            .take_while(|w| psn::diff(w.first_psn, p) <= 0)
            .position(|w| w.is_read() && !w.done);
        if let Some(w) = lost.and_then(|i| self.sq.get_mut(i)) {
            una = psn::add(w.first_psn, w.read_pkts);
            w.next_pkt = 0;
        }
        self.advance_una(una);
    }

    /// Everything before `una` is acknowledged (nothing when it is not ahead): the window
    /// grows by what was.
    fn advance_una(&mut self, una: u32) {
        let n = psn::diff(una, self.una);
        if n > 0 {
            self.una = una;
            self.cc.on_ack(n as u32, una, self.window);
        }
    }

    /// Packets that may be in flight now.
    fn allowed(&self) -> u32 {
        self.window.min(self.cc.cwnd)
    }

    /// A loss was seen (a sequence NAK, or a timeout): cut the window once per event.
    /// Returns whether it was cut.
    fn on_loss(&mut self, timeout: bool) -> bool {
        let end = self.sent_end();
        self.cc.on_loss(timeout, end)
    }

    /// One past the last PSN sent so far.
    fn sent_end(&self) -> u32 {
        self.sq.sent_end().unwrap_or(self.una)
    }
}

impl Qp {
    /// Queue a send WR (state and local memory are checked here); with `inline`, the
    /// message is those bytes (copied now) and the gather list is not read.
    pub(crate) fn post_send(
        &mut self,
        wr: SendWr,
        inline: Option<&[u8]>,
        mrs: &MrTable,
        sinks: &mut Sinks,
    ) -> Result<(), crate::QpError> {
        if self.state == QpState::Error {
            // InfiniBand: a WR posted to a QP in ERROR completes at once, flushed
            let wc = self.wc_send(&wr, WcStatus::WrFlushError);
            sinks.cqs.push(self.send_cq, wc);
            return Ok(());
        }
        if self.state != QpState::Rts {
            return Err(crate::QpError::BadState(self.state));
        }
        if self.req.outstanding() >= self.max_send_wr {
            return Err(crate::QpError::QueueFull);
        }
        let atomic = wr.op.is_atomic();
        let is_read = matches!(wr.op, SendOp::Read { .. }) || atomic;
        if inline.is_some_and(|d| is_read || d.len() > crate::MAX_INLINE) {
            return Err(crate::QpError::InvalidAttr("inline data"));
        }
        if atomic && wr.sg_list.total_len() != u64::from(crate::wr::ATOMIC_LEN) {
            // the original value lands in exactly one word
            return Err(crate::QpError::InvalidAttr(
                "an atomic's local buffer (8 bytes)",
            ));
        }
        let len = match inline {
            Some(d) => d.len(),
            None => usize::try_from(wr.sg_list.total_len()).unwrap_or(usize::MAX),
        };
        self.check_op(&wr, len)?;
        let gather_at = match inline {
            None => self
                .check_gather(&wr, is_read, mrs)?
                .map(|off| (mrs.generation(), off)),
            Some(_) => None,
        };
        let npkts = if self.qp_type == QpType::Ud || atomic {
            1
        } else {
            self.mtu.packets(len)
        };
        let first_psn = self.req.next_psn;
        self.req.next_psn = psn::add(first_psn, npkts);
        self.req.sq.push_back(SendWqe {
            wr,
            len: len as u32,
            inline: inline.map(std::sync::Arc::from),
            first_psn,
            npkts,
            next_pkt: 0,
            max_sent: 0,
            sent_at: None,
            resent: false,
            read_pkts: 0,
            done: false,
            gather_at,
        });
        Ok(())
    }

    /// Whether this QP's transport has `wr`'s operation, and a message of `len` bytes
    /// fits.
    fn check_op(&self, wr: &SendWr, len: usize) -> Result<(), crate::QpError> {
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
        Ok(())
    }

    /// Whether every element of `wr`'s gather list lies in a region of this QP's PD that
    /// allows what the operation does with it (a READ or atomic writes it locally); the
    /// offset in its region of a list's only element.
    fn check_gather(
        &self,
        wr: &SendWr,
        is_read: bool,
        mrs: &MrTable,
    ) -> Result<Option<usize>, crate::QpError> {
        let need = if is_read {
            Access::LOCAL_WRITE
        } else {
            Access::NONE
        };
        let sges = wr.sg_list.as_slice();
        let mut at = None;
        for s in sges.iter().filter(|s| s.len > 0) {
            let off = mrs
                .get_in(self.pd_id, s.lkey)
                .and_then(|m| m.check(s.va, u64::from(s.len), need))
                .map_err(crate::QpError::LocalAccess)?;
            at = Some(off);
        }
        Ok(at.filter(|_| sges.len() == 1))
    }
}

mod complete;
mod send;
mod ud_send;
