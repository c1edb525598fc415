//! The host: shots land contiguous, as if each were one large message.
//!
//! Receives are kept posted on a UD QP, each a scatter list of a 40-byte discard segment
//! (the GRH slot) and the slot of one message in a shot buffer, in the order the probe
//! sends. So in the common case every message lands where it belongs and nothing is
//! copied (the paper's Fig. 4).
//!
//! A UD receive queue is consumed in arrival order whatever the message is, so after a loss,
//! a duplicate or a reordering, the messages in flight land in the slots of others. Each
//! completion names its message (the immediate: shot and index). A message found out of its
//! place is copied aside and put in place when its shot is handed on. The receives not yet
//! posted follow the new order:
//! * after a loss they skip the lost slots;
//! * after a duplicate, slots whose place is already taken by a posted receive go to bounce
//!   buffers.
//!
//! No two posted receives ever share a place, so a landing can never overwrite a message
//! not yet taken care of.
//!
//! Shots are handed on in order: complete ones with their bytes, incomplete ones with what
//! was missing. A shot is given up once a shot `reorder` later has arrived, or when nothing
//! came for `timeout`.
//!
//! Messages of shots more than `ahead` beyond the next one to hand on are refused (a forged
//! number must not give up real shots). After a loss longer than that, though, every
//! message the probe sends is beyond: once nothing was taken for `timeout` while at least a
//! shot's worth of the probe's messages came from beyond, the host moves on to the newest
//! of them.

use crate::{Error, shot::Geometry, ud_ready};
use rocelink_io::aligned::AlignedBuf;
use rocelink_transport::{
    Access, CqId, Endpoint, QpInit, QpType, RecvWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use rocelink_wire::ib::grh;
use rocelink_wire::ultrasound::imm;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Host settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShotHostConfig {
    /// The shots' shape.
    pub geometry: Geometry,
    /// Q_Key of the host's UD QP.
    pub qkey: u32,
    /// Shot buffers (shots being received or handed on at once), at least 2.
    pub buffers: usize,
    /// Receives kept posted (default: two shots' messages, 64 to 8192).
    pub posted: usize,
    /// Bounce buffers for receives whose place another posted receive holds.
    pub bounce: usize,
    /// Most messages held out of place at once (beyond, they count as missing).
    pub stash: usize,
    /// A shot is given up when a shot this many later arrived.
    pub reorder: u64,
    /// ...or when nothing arrived for this long.
    pub timeout: Duration,
    /// The number of the first shot expected.
    pub first_shot: u64,
    /// Messages of a shot more than this many ahead of the next one to hand on are
    /// refused as stray (a forged or corrupt number would otherwise give up every shot
    /// before it).
    pub ahead: u64,
    /// Let the kernel put each message's payload straight into the receive posted for it
    /// (a scatter receive, verified in place by the transport) instead of copying it there
    /// from a receive buffer. Off: every message is copied.
    pub land: bool,
}

impl ShotHostConfig {
    /// Defaults for `geometry`: 8 buffers, two shots' receives posted, 64 bounce buffers,
    /// two shots' messages held aside at most, given up 2 shots later or after 100 ms.
    pub fn new(geometry: Geometry) -> ShotHostConfig {
        let m = geometry.messages() as usize;
        ShotHostConfig {
            geometry,
            qkey: 0x5553_0001,
            buffers: 8,
            posted: (2 * m).clamp(64, 8192),
            bounce: 64,
            stash: (2 * m).max(64),
            reorder: 2,
            timeout: Duration::from_millis(100),
            first_shot: 0,
            ahead: 64,
            land: true,
        }
    }
}

/// What the host knows of a shot when it hands it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShotReport {
    /// Shot number.
    pub shot: u64,
    /// Bytes of the shot (whether or not all arrived).
    pub bytes: usize,
    /// Messages received.
    pub messages: u32,
    /// Messages missing.
    pub missing: u32,
    /// Every message arrived: the bytes are the shot's.
    pub complete: bool,
    /// Messages that landed out of place and were copied into it.
    pub moved: u32,
    /// When its trigger was sent, if the host knows ([`Host::note_trigger`]). The
    /// instants are not serialised (they mean nothing outside this process).
    #[serde(skip)]
    pub trigger: Option<Instant>,
    /// When its first and last messages were taken.
    #[serde(skip)]
    pub first: Option<Instant>,
    /// See `first`.
    #[serde(skip)]
    pub last: Option<Instant>,
}

/// Counters of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct HostStats {
    /// Shots handed on.
    pub shots: u64,
    /// Of those, complete.
    pub complete: u64,
    /// Messages taken (each once).
    pub messages: u64,
    /// Messages missing from the shots handed on.
    pub missing: u64,
    /// Messages copied into place (they landed in another's slot).
    pub moved: u64,
    /// Messages received again.
    pub duplicates: u64,
    /// Messages of shots already handed on.
    pub late: u64,
    /// Messages with no immediate, an index past the shot, or the wrong length.
    pub malformed: u64,
    /// Messages dropped because too many were held aside.
    pub stash_full: u64,
    /// Receives that completed with an error.
    pub recv_errors: u64,
    /// Messages not from the probe (another address or source QP), or of a shot more
    /// than [`ShotHostConfig::ahead`] ahead: dropped.
    pub stray: u64,
    /// Times the host moved on to where the probe was, after a loss longer than
    /// [`ShotHostConfig::ahead`] shots (see [`Host::poll`]).
    pub resyncs: u64,
}

/// Counters added field by field (totals over links).
impl std::ops::AddAssign for HostStats {
    fn add_assign(&mut self, o: HostStats) {
        self.shots += o.shots;
        self.complete += o.complete;
        self.messages += o.messages;
        self.missing += o.missing;
        self.moved += o.moved;
        self.duplicates += o.duplicates;
        self.late += o.late;
        self.malformed += o.malformed;
        self.stash_full += o.stash_full;
        self.recv_errors += o.recv_errors;
        self.stray += o.stray;
        self.resyncs += o.resyncs;
    }
}

#[derive(Debug, Clone, Copy)]
struct Posted {
    wr_id: u64,
    /// The message position (shot × messages + index, from the first shot) whose place
    /// this receive is; `None` for a bounce buffer.
    pos: Option<u64>,
    /// Offset of its slot in the region.
    offset: usize,
    /// Its shot buffer, or bounce buffer `bounce`.
    buffer: Option<usize>,
    bounce: usize,
}

#[derive(Debug)]
struct Track {
    got: Vec<u64>,
    count: u32,
    aside: Vec<(u32, Box<[u8]>)>,
    first: Instant,
    last: Instant,
}

impl Track {
    fn new(messages: u32, now: Instant) -> Track {
        Track {
            got: vec![0; (messages as usize).div_ceil(64)],
            count: 0,
            aside: Vec::new(),
            first: now,
            last: now,
        }
    }
    fn has(&self, i: u32) -> bool {
        self.got[i as usize / 64] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, i: u32) {
        self.got[i as usize / 64] |= 1 << (i % 64);
        self.count += 1;
    }
}

/// The receiving host over an endpoint.
#[derive(Debug)]
pub struct Host {
    cfg: ShotHostConfig,
    qpn: u32,
    cq: CqId,
    lkey: u32,
    messages: u32,
    stride: usize,
    posted: VecDeque<Posted>,
    next_wr: u64,
    /// The first receive posted since a message last landed in another's place: only from
    /// it on are the receives in the order messages arrive ([`Host::expected`]).
    aligned_from: u64,
    next_pos: u64,
    bounce_wanted: usize,
    owner: Vec<Option<u64>>,
    pending: Vec<u32>,
    bounce_free: Vec<usize>,
    shots: BTreeMap<u64, Track>,
    triggers: HashMap<u64, Instant>,
    next_report: u64,
    max_seen: Option<u64>,
    last_arrival: Option<Instant>,
    /// Since the last message taken: the newest shot of the probe's messages refused as too
    /// far ahead, and how many such messages came.
    beyond: Option<(u64, u64)>,
    aside: usize,
    /// Messages are taken only from this address (and source QP, once known).
    source: Option<(std::net::IpAddr, Option<u32>)>,
    stats: HostStats,
}

impl Host {
    /// A UD QP with Q_Key `cfg.qkey`, its buffers registered and its receives posted.
    pub fn new(ep: &mut Endpoint, cfg: ShotHostConfig) -> Result<Host, Error> {
        let g = cfg.geometry;
        g.check()?;
        if cfg.buffers < 2 || cfg.posted == 0 || cfg.bounce == 0 || cfg.reorder == 0 {
            return Err(Error::HostBuffers);
        }
        if !(cfg.reorder..=1 << 14).contains(&cfg.ahead) {
            return Err(Error::Ahead {
                ahead: cfg.ahead,
                reorder: cfg.reorder,
            });
        }
        let stride = g.stride();
        let len = cfg
            .buffers
            .checked_mul(stride)
            .and_then(|n| n.checked_add(cfg.bounce * g.message_bytes as usize))
            .ok_or(Error::BuffersTooLarge {
                buffers: cfg.buffers,
                stride,
            })?;
        let keys = ep.register_mr(AlignedBuf::lazy_zeroed(len), 0, Access::LOCAL_WRITE);
        let cq = ep.create_cq();
        let init = QpInit {
            max_recv_wr: cfg.posted + cfg.bounce,
            recv_cq: cq,
            send_cq: cq,
            ..QpInit::new(QpType::Ud)
        };
        let qpn = ep.create_qp(init)?;
        ud_ready(ep, qpn, cfg.qkey)?;
        let mut h = Host {
            cfg,
            qpn,
            cq,
            lkey: keys.lkey,
            messages: g.messages(),
            stride,
            posted: VecDeque::new(),
            next_wr: 0,
            aligned_from: 0,
            next_pos: 0,
            bounce_wanted: 0,
            owner: vec![None; cfg.buffers],
            pending: vec![0; cfg.buffers],
            bounce_free: (0..cfg.bounce).rev().collect(),
            shots: BTreeMap::new(),
            triggers: HashMap::new(),
            next_report: cfg.first_shot,
            max_seen: None,
            last_arrival: None,
            beyond: None,
            aside: 0,
            source: None,
            stats: HostStats::default(),
        };
        h.post(ep)?;
        Ok(h)
    }

    /// The UD QP shots are sent to.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Its settings.
    pub fn config(&self) -> &ShotHostConfig {
        &self.cfg
    }

    /// The shots' shape.
    pub fn geometry(&self) -> Geometry {
        self.cfg.geometry
    }

    /// Counters.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// The next shot to be handed on.
    pub fn next_shot(&self) -> u64 {
        self.next_report
    }

    /// Take messages only from the probe at `ip` (and, once known, its UD QP `qpn`); the
    /// rest count as [`HostStats::stray`].
    pub fn accept_from(&mut self, ip: std::net::IpAddr, qpn: Option<u32>) {
        self.source = Some((ip, qpn));
    }

    /// Where the next messages' payloads go, in the order they arrive when nothing is lost:
    /// the receives still posted on the endpoint (region [`Host::lkey`]), each as (byte
    /// offset, expected length). A backend may put payloads there before the transport
    /// checks them (those receives' buffers hold nothing yet).
    pub fn expected<'a>(&'a self, ep: &'a Endpoint) -> impl Iterator<Item = (usize, usize)> + 'a {
        let mut open = ep.posted_recvs(self.qpn).peekable();
        // while receives posted in the order before a fault are out, messages land in one
        // another's places: none is expected anywhere then
        let first = open.peek().copied().filter(|&id| id >= self.aligned_from);
        let g = self.cfg.geometry;
        let mb = g.message_bytes as usize;
        let m = u64::from(self.messages);
        self.posted
            .iter()
            .skip_while(move |w| Some(w.wr_id) != first)
            .zip(open)
            .take_while(|(w, id)| w.wr_id == *id)
            .map(move |(w, _)| {
                let len = match w.pos {
                    Some(p) => g.message_range((p % m) as u32).len(),
                    None => mb,
                };
                (w.offset, len)
            })
    }

    /// The region the shots land in.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Remember when the trigger of `shot` was sent (reported with the shot).
    pub fn note_trigger(&mut self, shot: u64, at: Instant) {
        if shot >= self.next_report && self.triggers.len() < 1 << 16 {
            self.triggers.insert(shot, at);
        }
    }

    /// Take what arrived, hand finished shots to `sink` in order — with their bytes when
    /// complete — and keep the receives posted.
    pub fn poll(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        sink: &mut dyn FnMut(&ShotReport, Option<&[u8]>),
    ) -> Result<(), Error> {
        // every completion first: after this no landing is left unaccounted for, so the
        // shots can be assembled in their buffers
        while let Some(wc) = ep.poll_cq(self.cq) {
            self.take(ep, now, &wc);
        }
        self.resync(now);
        self.hand_on(ep, now, sink);
        self.post(ep)
    }

    /// After a loss longer than the window ahead (a full socket buffer dropped more than
    /// [`ShotHostConfig::ahead`] shots at once), every message the probe sends is beyond the
    /// window and refused, and the shot waited for never completes: once nothing was taken
    /// for [`ShotHostConfig::timeout`] while at least a shot's worth of the probe's messages
    /// came from beyond, move on to the newest of them (the shots before it are given up,
    /// in order). A forged shot number alone moves nothing while the probe's own messages
    /// are being taken.
    fn resync(&mut self, now: Instant) {
        let Some((newest, count)) = self.beyond else {
            return;
        };
        let quiet = self
            .last_arrival
            .is_none_or(|t| now >= t + self.cfg.timeout);
        if !quiet || count < u64::from(self.messages) {
            return;
        }
        self.beyond = None;
        self.stats.resyncs += 1;
        // hand_on gives up every shot up to the one before `newest`: the last arrival is
        // `timeout` ago, so none of them is waited for
        let before = newest.saturating_sub(1).max(self.next_report);
        self.max_seen = Some(self.max_seen.map_or(before, |m| m.max(before)));
        if self.last_arrival.is_none() {
            self.last_arrival = Some(now - self.cfg.timeout);
        }
    }

    /// When [`Host::poll`] has a shot to give up, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.beyond.is_some() {
            // the resync is due `timeout` after the last message taken
            let since = self.last_arrival.unwrap_or_else(Instant::now);
            return Some(since + self.cfg.timeout);
        }
        let max = self.max_seen?;
        if max < self.next_report {
            return None;
        }
        let since = match self.shots.get(&self.next_report) {
            Some(t) => t.last,
            None => self.last_arrival?,
        };
        Some(since + self.cfg.timeout)
    }

    fn pos(&self, shot: u64, index: u32) -> u64 {
        (shot - self.cfg.first_shot) * u64::from(self.messages) + u64::from(index)
    }

    /// One completion (the oldest posted receive: a UD queue completes in order).
    fn take(&mut self, ep: &mut Endpoint, now: Instant, wc: &WorkCompletion) {
        let Some(w) = self.posted.pop_front() else {
            self.stats.recv_errors += 1;
            return;
        };
        debug_assert_eq!(w.wr_id, wc.wr_id);
        if let Some(pos) = self.accept(ep, now, wc, &w) {
            // the receives still posted take the messages after this one, in order; the
            // next one posted takes the message after them
            let expect = pos + 1 + self.posted.len() as u64;
            if expect > self.next_pos {
                self.next_pos = expect;
                self.bounce_wanted = 0;
            } else {
                self.bounce_wanted = (self.next_pos - expect) as usize;
            }
        }
        self.release(&w);
    }

    /// Take the message of `wc` that landed in `w`; its position if it is a new one (the
    /// messages after it follow it).
    fn accept(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        wc: &WorkCompletion,
        w: &Posted,
    ) -> Option<u64> {
        let (shot, index, len) = self.admit(wc)?;
        let pos = self.pos(shot, index);
        let messages = self.messages;
        let t = self
            .shots
            .entry(shot)
            .or_insert_with(|| Track::new(messages, now));
        if t.has(index) {
            // says nothing of where the stream is (a copy may come late): the next message
            // that is not one realigns the receives
            self.stats.duplicates += 1;
            return None;
        }
        if w.pos != Some(pos) {
            // the receives posted so far are out of order: expect nothing of them
            self.aligned_from = self.next_wr;
            // landed in another's slot: copy it aside
            if self.aside >= self.cfg.stash {
                self.stats.stash_full += 1;
                return Some(pos);
            }
            let Some(bytes) = ep
                .mr(self.lkey)
                .ok()
                .and_then(|m| m.bytes().get(w.offset..w.offset + len))
            else {
                self.stats.recv_errors += 1;
                return None;
            };
            t.aside.push((index, bytes.into()));
            self.aside += 1;
            self.stats.moved += 1;
        }
        t.set(index);
        t.last = now;
        self.stats.messages += 1;
        self.max_seen = Some(self.max_seen.map_or(shot, |m| m.max(shot)));
        self.last_arrival = Some(now);
        self.beyond = None;
        Some(pos)
    }

    /// Whether `wc` is a message of the stream: a receive from the probe, its immediate a
    /// known message of a shot not yet reported nor too far ahead, its length the
    /// message's. (shot, message index, bytes) when it is; counted when it is not.
    fn admit(&mut self, wc: &WorkCompletion) -> Option<(u64, u32, usize)> {
        if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
            self.stats.recv_errors += 1;
            return None;
        }
        let g = self.cfg.geometry;
        if let Some((ip, qpn)) = self.source {
            let from_probe =
                wc.src.is_some_and(|s| s.ip() == ip) && qpn.is_none_or(|q| q == wc.src_qp);
            if !from_probe {
                self.stats.stray += 1;
                return None;
            }
        }
        let Some(v) = wc.imm else {
            self.stats.malformed += 1;
            return None;
        };
        let (low, index) = imm::decode(v);
        let shot = imm::extend(low, self.max_seen.unwrap_or(self.next_report));
        let len = (wc.byte_len as usize).saturating_sub(grh::SLOT_LEN);
        if index >= self.messages || len != g.message_range(index).len() {
            self.stats.malformed += 1;
            return None;
        }
        if shot < self.next_report {
            self.stats.late += 1;
            return None;
        }
        if shot - self.next_report > self.cfg.ahead {
            self.stats.stray += 1;
            let (newest, count) = self.beyond.unwrap_or((shot, 0));
            self.beyond = Some((newest.max(shot), count + 1));
            return None;
        }
        Some((shot, index, len))
    }

    fn release(&mut self, w: &Posted) {
        match w.buffer {
            Some(b) => self.pending[b] -= 1,
            None => self.bounce_free.push(w.bounce),
        }
    }

    /// Keep `cfg.posted` receives posted, as far as the shot buffers allow.
    fn post(&mut self, ep: &mut Endpoint) -> Result<(), Error> {
        let g = self.cfg.geometry;
        let mb = g.message_bytes as usize;
        let first_unreported = self.pos(self.next_report, 0);
        self.next_pos = self.next_pos.max(first_unreported);
        while self.posted.len() < self.cfg.posted {
            let (pos, buffer, bounce, offset) = if self.bounce_wanted > 0 {
                let Some(i) = self.bounce_free.pop() else {
                    break;
                };
                self.bounce_wanted -= 1;
                (None, None, i, self.cfg.buffers * self.stride + i * mb)
            } else {
                let pos = self.next_pos;
                let m = u64::from(self.messages);
                let shot = self.cfg.first_shot + pos / m;
                let index = (pos % m) as usize;
                let b = (shot % self.cfg.buffers as u64) as usize;
                // a buffer is another shot's until that one was handed on and no receive
                // points into it any more
                let free = self.owner[b] == Some(shot)
                    || (self.owner[b].is_none()
                        && self.pending[b] == 0
                        && shot < self.next_report + self.cfg.buffers as u64);
                if !free {
                    break;
                }
                self.owner[b] = Some(shot);
                self.pending[b] += 1;
                self.next_pos += 1;
                (Some(pos), Some(b), 0, b * self.stride + index * mb)
            };
            let sges = [
                Sge::discard(grh::SLOT_LEN as u32),
                Sge {
                    lkey: self.lkey,
                    va: offset as u64,
                    len: mb as u32,
                },
            ];
            let wr_id = self.next_wr;
            self.next_wr += 1;
            let wr = RecvWr::scatter(wr_id, &sges).ok_or(Error::ScatterList)?;
            ep.post_recv(self.qpn, wr)?;
            self.posted.push_back(Posted {
                wr_id,
                pos,
                offset,
                buffer,
                bounce,
            });
        }
        Ok(())
    }

    /// Hand on, in order, every shot that is complete or given up.
    fn hand_on(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        sink: &mut dyn FnMut(&ShotReport, Option<&[u8]>),
    ) {
        let g = self.cfg.geometry;
        while let Some(max) = self.max_seen.filter(|&m| m >= self.next_report) {
            let s = self.next_report;
            let t = self.shots.get(&s);
            let complete = t.is_some_and(|t| t.count == self.messages);
            let since = t.map(|t| t.last).or(self.last_arrival);
            let give_up =
                max >= s + self.cfg.reorder || since.is_some_and(|l| now >= l + self.cfg.timeout);
            if !complete && !give_up {
                break;
            }
            let t = self.shots.remove(&s);
            let b = (s % self.cfg.buffers as u64) as usize;
            let base = b * self.stride;
            let mut report = ShotReport {
                shot: s,
                bytes: g.bytes(),
                messages: t.as_ref().map_or(0, |t| t.count),
                missing: self.messages - t.as_ref().map_or(0, |t| t.count),
                complete,
                moved: t.as_ref().map_or(0, |t| t.aside.len() as u32),
                trigger: self.triggers.remove(&s),
                first: t.as_ref().map(|t| t.first),
                last: t.as_ref().map(|t| t.last),
            };
            let mut data = None;
            if let Some(t) = t {
                self.aside -= t.aside.len();
                if complete && let Ok(m) = ep.mr_mut(self.lkey) {
                    let bytes = m.bytes_mut();
                    // no posted receive has landed anything since the completions were
                    // taken, and none of a later shot points into this buffer yet
                    for (i, piece) in &t.aside {
                        let r = g.message_range(*i);
                        bytes[base + r.start..base + r.end].copy_from_slice(piece);
                    }
                    data = Some(base..base + g.bytes());
                }
            }
            if data.is_none() {
                report.complete = false;
            }
            self.stats.shots += 1;
            self.stats.complete += u64::from(report.complete);
            self.stats.missing += u64::from(report.missing);
            let bytes = data.and_then(|r| ep.mr(self.lkey).ok().map(|m| &m.bytes()[r]));
            sink(&report, bytes);
            if self.owner[b] == Some(s) {
                self.owner[b] = None;
            }
            self.next_report += 1;
        }
    }
}
