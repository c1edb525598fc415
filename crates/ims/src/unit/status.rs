//! The buffer unit's status channel: who may register, open and close channels, and how
//! often it answers.
//!
//! * A worker is known by (LID, QPN), and its LID must be the address it sends from
//!   (rocelink's RoCE mapping of LIDs). The address and UDP port its STAT_REQ came from is
//!   the only one whose DATA_REQ, DATA_TERM and STAT_TERM for that key are taken, and a
//!   second STAT_REQ for the key from elsewhere is refused.
//! * The table holds at most [`UnitConfig::max_workers`]; a worker that does not fit is
//!   answered STAT_DOWN (rocelink's worker reports "buffer unit full"). A DATA_REQ beyond
//!   [`UnitConfig::max_channels`] is answered DATA_DOWN.
//! * A worker silent for [`UnitConfig::idle_timeout`] (no status packet, no data on its
//!   channel) is removed, its channel with it.
//! * Answers are rate-limited ([`UnitConfig::answers_per_sec`]): each is no larger than
//!   the request it answers, and spoofed requests cannot turn the unit into a flood.

use super::{Channel, Unit, UnitConfig, WorkerEntry};
use crate::lid_of;
use rocelink_transport::{Endpoint, SendOp, UdDest};
use rocelink_wire::ims::{Method, StatusRepr, status};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A token bucket: `rate` answers per second, bursts of a tenth of a second's worth.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limiter {
    rate: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl Limiter {
    pub(super) fn new(rate: u32) -> Limiter {
        let rate = f64::from(rate.max(1));
        Limiter {
            rate,
            tokens: Limiter::burst(rate),
            last: None,
        }
    }

    fn burst(rate: f64) -> f64 {
        (rate / 10.0).max(16.0)
    }

    /// Whether one more answer may go out at `now`.
    pub(super) fn take(&mut self, now: Instant) -> bool {
        if let Some(t) = self.last {
            let dt = now.saturating_duration_since(t).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(Limiter::burst(self.rate));
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Unit {
    /// Send a status answer to worker `w` = (address, QPN, Q_Key), if the limiter allows.
    pub(super) fn reply(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        w: (SocketAddr, u32, u32),
        mut p: StatusRepr,
    ) {
        if !self.limiter.take(now) {
            self.stats.answers_dropped += 1;
            return;
        }
        let (addr, qpn, qkey) = w;
        // RoCE v2: to the worker's address at the RoCE port, whatever port it sent from
        let addr = SocketAddr::new(addr.ip(), ep.config().local.port());
        p.major = self.cfg.version.0;
        p.minor = self.cfg.version.1;
        let mut b = [0u8; status::PACKET_LEN];
        p.emit(&mut b);
        let op = SendOp::UdSend {
            dest: UdDest { addr, qpn, qkey },
            imm: None,
        };
        // a full send queue drops the reply: the worker asks again
        let _ = self.status.send(ep, op, &b);
    }

    /// Act on a status request from `src`.
    pub(super) fn status_request(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        p: StatusRepr,
        src: SocketAddr,
    ) {
        let key = (p.lid, p.qpn);
        let answer = |method| StatusRepr {
            method,
            va: 0,
            rkey: 0,
            qkey_or_qpnd: 0,
            ..p
        };
        if p.lid != lid_of(src) {
            // a LID is the address the worker sends from
            self.stats.status_foreign += 1;
            return;
        }
        if p.method == Method::StatReq {
            return self.register(ep, now, p, src);
        }
        let Some(w) = self.table.get_mut(&key) else {
            if p.method == Method::StatTerm {
                // already gone (its STAT_DOWN was lost): say so again
                self.reply(
                    ep,
                    now,
                    (src, p.qpn, p.qkey_or_qpnd),
                    answer(Method::StatDown),
                );
            } else {
                self.stats.status_ignored += 1;
            }
            return;
        };
        if w.addr != src {
            // only the address and port that registered this worker speaks for it
            self.stats.status_foreign += 1;
            return;
        }
        w.last = now;
        let to = (w.addr, p.qpn, w.qkey);
        match p.method {
            Method::DataReq => match self.open_channel(ep, key, p.qkey_or_qpnd) {
                Some(res) => self.reply(ep, now, to, res),
                None => {
                    self.stats.channels_refused += 1;
                    self.reply(ep, now, to, answer(Method::DataDown));
                }
            },
            Method::DataTerm => {
                if let Some(ch) = self.table.get_mut(&key).and_then(|w| w.channel.take()) {
                    self.retire(ep, ch);
                }
                self.reply(ep, now, to, answer(Method::DataDown));
            }
            Method::StatTerm => {
                if let Some(ch) = self.table.remove(&key).and_then(|w| w.channel) {
                    self.retire(ep, ch);
                }
                self.reply(ep, now, to, answer(Method::StatDown));
            }
            // answers are not requests
            _ => self.stats.status_ignored += 1,
        }
    }

    /// STAT_REQ: a new worker if it fits, or the same one again (its STAT_RES was lost).
    fn register(&mut self, ep: &mut Endpoint, now: Instant, p: StatusRepr, src: SocketAddr) {
        let key = (p.lid, p.qpn);
        let to = (src, p.qpn, p.qkey_or_qpnd);
        let res = |method| StatusRepr {
            method,
            va: 0,
            rkey: 0,
            qkey_or_qpnd: 0,
            ..p
        };
        let full = self.table.len() >= self.cfg.max_workers;
        match self.table.get_mut(&key) {
            Some(w) if w.addr != src => {
                self.stats.status_foreign += 1;
                return;
            }
            Some(w) => {
                w.qkey = p.qkey_or_qpnd;
                w.last = now;
            }
            None if full => {
                self.stats.workers_refused += 1;
                self.reply(ep, now, to, res(Method::StatDown));
                return;
            }
            None => {
                self.table.insert(
                    key,
                    WorkerEntry {
                        addr: src,
                        qkey: p.qkey_or_qpnd,
                        channel: None,
                        last: now,
                    },
                );
            }
        }
        self.reply(ep, now, to, res(Method::StatRes));
    }

    /// Remove the workers silent for [`UnitConfig::idle_timeout`]; their channels are
    /// retired (the frames they delivered and the consumer has not taken, never ACKed, are
    /// discarded).
    pub(super) fn expire(&mut self, ep: &mut Endpoint, now: Instant) {
        let idle = self.cfg.idle_timeout;
        let mut gone = Vec::new();
        for (&key, w) in self.table.iter_mut() {
            if w.channel.as_mut().is_some_and(|c| c.active(ep)) {
                w.last = now;
            }
            if now.saturating_duration_since(w.last) >= idle {
                gone.push(key);
            }
        }
        for key in gone {
            if let Some(w) = self.table.remove(&key) {
                self.stats.workers_expired += 1;
                if let Some(ch) = w.channel {
                    self.retire(ep, ch);
                }
            }
        }
    }

    /// When the next worker may expire.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.table
            .values()
            .map(|w| w.last)
            .min()
            .map(|t| t + self.cfg.idle_timeout)
    }

    /// Open (or, for a repeated request, find) the data channel of worker `key` to its
    /// data QP `qpnd`; the DATA_RES to send.
    fn open_channel(
        &mut self,
        ep: &mut Endpoint,
        key: (u32, u32),
        qpnd: u32,
    ) -> Option<StatusRepr> {
        let open = self.channels();
        let cfg: UnitConfig = self.cfg;
        let w = self.table.get_mut(&key)?;
        let res = |ch: &Channel| StatusRepr {
            major: 0,
            minor: 0,
            method: Method::DataRes,
            lid: key.0,
            qpn: key.1,
            qkey_or_qpnd: ch.qpn,
            va: cfg.va_offset,
            rkey: ch.ring.rkey,
        };
        if let Some(ch) = &w.channel
            && ch.remote_qpn == qpnd
        {
            // its DATA_RES was lost: the same answer
            return Some(res(ch));
        }
        if open >= cfg.max_channels && w.channel.is_none() {
            return None;
        }
        let addr = w.addr;
        if let Some(old) = w.channel.take() {
            self.retire(ep, old);
        }
        // the worker's WRITEs go to our RoCE port from its address; its port is learnt
        let ch = Channel::open(
            ep,
            SocketAddr::new(addr.ip(), ep.config().local.port()),
            qpnd,
            &cfg,
        );
        let ch = match ch {
            Ok(ch) => ch,
            Err(_) => {
                self.stats.rings_refused += 1;
                return None;
            }
        };
        let r = res(&ch);
        self.table.get_mut(&key)?.channel = Some(ch);
        Some(r)
    }
}

/// The default time after which a silent worker is forgotten.
pub(super) const IDLE: Duration = Duration::from_secs(60);
