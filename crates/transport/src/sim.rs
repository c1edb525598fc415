//! A deterministic link simulator for tests: two endpoints, a virtual clock, and a link that
//! loses, duplicates, reorders, corrupts and delays datagrams with a seeded generator.
//!
//! Same seed, same run: every decision comes from one SplitMix64 stream.

use crate::endpoint::{Datagram, Endpoint};
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// Link behaviour, the same in both directions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability a datagram is held back (up to 4 × `delay` extra) so later ones overtake it.
    pub reorder: f64,
    /// Probability one random bit of a datagram is flipped.
    pub corrupt: f64,
    /// One-way delay.
    pub delay: Duration,
    /// Uniform extra delay in [0, jitter).
    pub jitter: Duration,
    /// A bottleneck: datagrams per second each direction forwards (0: unlimited). Those
    /// that find `queue` already waiting are dropped, as a slow receiver or a switch
    /// queue drops a burst.
    pub rate: f64,
    /// Datagrams that may wait at the bottleneck.
    pub queue: usize,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            delay: Duration::from_micros(20),
            jitter: Duration::ZERO,
            rate: 0.0,
            queue: 64,
        }
    }
}

/// Which way a datagram travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// From `a` to `b`.
    AtoB,
    /// From `b` to `a`.
    BtoA,
}

#[derive(Debug, PartialEq, Eq)]
struct InFlight {
    at: Instant,
    seq: u64,
    dir: Dir,
    src: SocketAddr,
    dst: SocketAddr,
    bytes: Vec<u8>,
}

impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // BinaryHeap is a max-heap: earliest first
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// Counters of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub sent: u64,
    /// Datagrams delivered (duplicates count twice).
    pub delivered: u64,
    /// Lost on purpose.
    pub lost: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Held back to be reordered.
    pub reordered: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Addressed to nobody.
    pub misrouted: u64,
    /// Dropped at a full bottleneck queue.
    pub overflowed: u64,
}

type Filter = Box<dyn FnMut(Dir, &mut Vec<u8>) -> bool>;

/// Two endpoints joined by a simulated link, and a virtual clock.
pub struct Pair {
    /// Endpoint A.
    pub a: Endpoint,
    /// Endpoint B.
    pub b: Endpoint,
    /// Virtual time.
    pub now: Instant,
    /// Link behaviour.
    pub link: LinkConfig,
    /// Link counters.
    pub stats: LinkStats,
    rng: Rng,
    seq: u64,
    queue: BinaryHeap<InFlight>,
    buf: Vec<u8>,
    filter: Option<Filter>,
    /// Per direction: when each datagram waiting at the bottleneck leaves it.
    bottleneck: [std::collections::VecDeque<Instant>; 2],
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("now", &self.now)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Pair {
    /// Join `a` and `b`; `seed` fixes every random decision.
    pub fn new(a: Endpoint, b: Endpoint, link: LinkConfig, seed: u64, now: Instant) -> Pair {
        Pair {
            a,
            b,
            now,
            link,
            stats: LinkStats::default(),
            rng: Rng::new(seed),
            seq: 0,
            queue: BinaryHeap::new(),
            buf: Vec::new(),
            filter: None,
            bottleneck: Default::default(),
        }
    }

    /// Inspect or rewrite every datagram before the link acts on it; return false to drop
    /// it. Used by tests to inject hostile packets or targeted losses.
    pub fn set_filter(&mut self, f: impl FnMut(Dir, &mut Vec<u8>) -> bool + 'static) {
        self.filter = Some(Box::new(f));
    }

    /// Put a raw datagram on the link as if `dir`'s sender had sent it.
    pub fn inject(&mut self, dir: Dir, bytes: Vec<u8>) {
        let (src, dst) = match dir {
            Dir::AtoB => (self.a.config().local, self.b.config().local),
            Dir::BtoA => (self.b.config().local, self.a.config().local),
        };
        self.seq += 1;
        self.queue.push(InFlight {
            at: self.now,
            seq: self.seq,
            dir,
            src,
            dst,
            bytes,
        });
    }

    fn offer(&mut self, dir: Dir, src: SocketAddr, dst: SocketAddr, mut bytes: Vec<u8>) {
        self.stats.sent += 1;
        if let Some(f) = self.filter.as_mut()
            && !f(dir, &mut bytes)
        {
            self.stats.lost += 1;
            return;
        }
        if self.rng.chance(self.link.loss) {
            self.stats.lost += 1;
            return;
        }
        let mut leave = self.now;
        if self.link.rate > 0.0 {
            let q = &mut self.bottleneck[dir as usize];
            while q.front().is_some_and(|&t| t <= self.now) {
                q.pop_front();
            }
            if q.len() >= self.link.queue {
                self.stats.overflowed += 1;
                return;
            }
            let start = q.back().copied().unwrap_or(self.now).max(self.now);
            leave = start + Duration::from_secs_f64(1.0 / self.link.rate);
            q.push_back(leave);
        }
        if self.rng.chance(self.link.corrupt) && !bytes.is_empty() {
            let bit = self.rng.below(bytes.len() as u64 * 8);
            bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            self.stats.corrupted += 1;
        }
        let copies = if self.rng.chance(self.link.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = leave + self.link.delay;
            if !self.link.jitter.is_zero() {
                at += Duration::from_nanos(self.rng.below(self.link.jitter.as_nanos() as u64));
            }
            if self.rng.chance(self.link.reorder) {
                self.stats.reordered += 1;
                at += Duration::from_nanos(
                    self.rng.below(4 * self.link.delay.as_nanos().max(1) as u64),
                );
            }
            self.seq += 1;
            self.queue.push(InFlight {
                at,
                seq: self.seq,
                dir,
                src,
                dst,
                bytes: bytes.clone(),
            });
        }
    }

    /// Move every pending transmit of both endpoints onto the link.
    fn drain_transmits(&mut self) -> bool {
        let mut any = false;
        for dir in [Dir::AtoB, Dir::BtoA] {
            loop {
                let mut buf = std::mem::take(&mut self.buf);
                let ep = if dir == Dir::AtoB {
                    &mut self.a
                } else {
                    &mut self.b
                };
                let Some(t) = ep.poll_transmit(self.now, &mut buf) else {
                    self.buf = buf;
                    break;
                };
                any = true;
                let src = SocketAddr::new(ep.config().local.ip(), t.src_port);
                let bytes = buf[..t.len].to_vec();
                self.buf = buf;
                self.offer(dir, src, t.dst, bytes);
            }
        }
        any
    }

    /// Deliver everything due now.
    fn deliver_due(&mut self) -> bool {
        let mut any = false;
        while self.queue.peek().is_some_and(|p| p.at <= self.now) {
            let Some(p) = self.queue.pop() else { break };
            any = true;
            let ep = if p.dir == Dir::AtoB {
                &mut self.b
            } else {
                &mut self.a
            };
            if ep.config().local != p.dst {
                self.stats.misrouted += 1;
                continue;
            }
            self.stats.delivered += 1;
            ep.handle_datagram(
                self.now,
                Datagram {
                    src: p.src,
                    dst: p.dst,
                    ip_header: None,
                    payload: &p.bytes,
                },
            );
        }
        any
    }

    /// Do everything that can be done at the current time, then advance the clock to the
    /// next delivery or timer. Returns false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.settle();
        self.advance(None)
    }

    /// For something driven alongside the endpoints (a protocol role above them, polled
    /// between calls): if anything was sent or delivered at the current time, return
    /// without moving the clock, so the role sees it at the time it happened; otherwise
    /// move the clock to the next delivery, endpoint timer or `wake` (the role's own next
    /// timer), whichever comes first. Returns false when nothing is left to happen and
    /// there is no `wake` ahead.
    pub fn step_until(&mut self, wake: Option<Instant>) -> bool {
        if self.settle() {
            return true;
        }
        self.advance(wake)
    }

    /// Send, deliver and run timers at the current time until nothing more happens.
    /// True when anything did.
    fn settle(&mut self) -> bool {
        let mut any = false;
        loop {
            let sent = self.drain_transmits();
            let got = self.deliver_due();
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
            if !sent && !got {
                return any;
            }
            any = true;
        }
    }

    /// Move the clock to the next delivery, endpoint timer or `wake`.
    fn advance(&mut self, wake: Option<Instant>) -> bool {
        let next = [
            self.queue.peek().map(|p| p.at),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            wake.filter(|&w| w > self.now),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                if t > self.now {
                    self.now = t;
                }
                true
            }
            None => false,
        }
    }

    /// Step until `done` holds, nothing is left to happen, or `limit` of virtual time
    /// passes. Returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if !self.step() || self.now > end {
                return done(self);
            }
        }
    }
}

/// Bring QP `qa` of `a` and QP `qb` of `b` to RTS, connected to each other (RC/UC), or
/// just ready (UD). PSNs: `a` starts at `psn_a`, `b` at `psn_b`. Q_Key of UD QPs: `qkey`.
#[allow(clippy::too_many_arguments)]
pub fn connect(
    a: &mut Endpoint,
    qa: u32,
    b: &mut Endpoint,
    qb: u32,
    mtu: crate::Mtu,
    psn_a: u32,
    psn_b: u32,
    qkey: u32,
) -> Result<(), crate::QpError> {
    use crate::Modify;
    let (a_addr, b_addr) = (a.config().local, b.config().local);
    for (ep, q, remote, dq, rq_psn, sq_psn) in [
        (a, qa, b_addr, qb, psn_b, psn_a),
        (b, qb, a_addr, qa, psn_a, psn_b),
    ] {
        ep.modify_qp(q, Modify::Init { qkey })?;
        ep.modify_qp(
            q,
            Modify::Rtr {
                remote: Some(remote),
                dest_qpn: dq,
                rq_psn,
                mtu,
                min_rnr_timer: 1,
            },
        )?;
        ep.modify_qp(
            q,
            Modify::Rts {
                sq_psn,
                timeout: Duration::from_millis(5),
                retry_cnt: 7,
                rnr_retry: 7,
            },
        )?;
    }
    Ok(())
}
