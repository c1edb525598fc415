//! The ARP cache of blue-ethernet's `mkArpCache`, in software: a set-associative array
//! (64 sets × 4 ways by default; the set is the low bits of the IPv4 address), tree
//! pseudo-LRU replacement, and non-blocking misses — any number outstanding, one ARP
//! request per address however many wait on it, retried, and answered strictly in the
//! order they were asked (a completion buffer: a later miss whose reply came first waits
//! for the earlier ones).
//!
//! Sans-IO: time is an argument; [`ArpCache::poll_request`] says which ARP requests to
//! send, [`ArpCache::poll_resolved`] hands back answered misses in order.

use rocelink_wire::bytes::Mac;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// Cache geometry and timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpConfig {
    /// Sets (a power of two).
    pub sets: usize,
    /// Ways per set (a power of two, at most 64).
    pub ways: usize,
    /// How long an entry is trusted.
    pub lifetime: Duration,
    /// Wait this long for a reply before asking again.
    pub retry_after: Duration,
    /// Requests sent again after the first before a miss fails.
    pub retries: u32,
}

impl Default for ArpConfig {
    /// blue-ethernet's 64 × 4; Linux-like timers (entries kept 60 s, 1 s between
    /// requests, 3 requests in all).
    fn default() -> ArpConfig {
        ArpConfig {
            sets: 64,
            ways: 4,
            lifetime: Duration::from_secs(60),
            retry_after: Duration::from_secs(1),
            retries: 2,
        }
    }
}

/// A geometry the cache cannot have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ARP cache of {sets} sets x {ways} ways: both must be powers of two, ways at most 64")]
pub struct BadGeometry {
    /// Sets asked for.
    pub sets: usize,
    /// Ways asked for.
    pub ways: usize,
}

/// Names one miss; answers come back with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The address is cached.
    Hit(Mac),
    /// It is not: the answer comes from [`ArpCache::poll_resolved`] under this ticket.
    Miss(Ticket),
}

/// An answered miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The miss.
    pub ticket: Ticket,
    /// The address asked for.
    pub ip: Ipv4Addr,
    /// Its MAC, or `None` when nobody answered any request.
    pub mac: Option<Mac>,
}

/// What the cache did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArpStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// ARP requests asked for (first and retries).
    pub requests: u64,
    /// Valid entries replaced by another address.
    pub evictions: u64,
    /// Addresses given up on after the last retry.
    pub timeouts: u64,
}

#[derive(Debug, Clone, Copy)]
struct Line {
    ip: Ipv4Addr,
    mac: Mac,
    expires: Instant,
}

#[derive(Debug)]
struct Waiting {
    ticket: Ticket,
    ip: Ipv4Addr,
    answer: Option<Option<Mac>>,
}

#[derive(Debug)]
struct Asking {
    ip: Ipv4Addr,
    sent: u32,
    next: Instant,
}

/// The cache.
#[derive(Debug)]
pub struct ArpCache {
    cfg: ArpConfig,
    lines: Vec<Option<Line>>,
    /// Tree pseudo-LRU bits, one word per set: node n's bit says which half of its
    /// subtree holds the less recently used way (0: left).
    plru: Vec<u64>,
    waiting: VecDeque<Waiting>,
    asking: Vec<Asking>,
    next_ticket: u64,
    /// Counters.
    pub stats: ArpStats,
}

impl ArpCache {
    /// An empty cache.
    pub fn new(cfg: ArpConfig) -> Result<ArpCache, BadGeometry> {
        if !cfg.sets.is_power_of_two() || !cfg.ways.is_power_of_two() || cfg.ways > 64 {
            return Err(BadGeometry {
                sets: cfg.sets,
                ways: cfg.ways,
            });
        }
        Ok(ArpCache {
            cfg,
            lines: vec![None; cfg.sets * cfg.ways],
            plru: vec![0; cfg.sets],
            waiting: VecDeque::new(),
            asking: Vec::new(),
            next_ticket: 0,
            stats: ArpStats::default(),
        })
    }

    fn set_of(&self, ip: Ipv4Addr) -> usize {
        u32::from(ip) as usize & (self.cfg.sets - 1)
    }

    fn find(&self, ip: Ipv4Addr, now: Instant) -> Option<usize> {
        let set = self.set_of(ip);
        (0..self.cfg.ways).find(|&w| {
            self.lines[set * self.cfg.ways + w].is_some_and(|l| l.ip == ip && l.expires > now)
        })
    }

    /// Mark way `w` of `set` most recently used.
    fn touch(&mut self, set: usize, w: usize) {
        let mut node = 0usize;
        let mut span = self.cfg.ways;
        let mut lo = 0usize;
        let bits = &mut self.plru[set];
        while span > 1 {
            span /= 2;
            let right = w >= lo + span;
            // the LRU half is the other one
            if right {
                *bits &= !(1 << node);
                lo += span;
                node = 2 * node + 2;
            } else {
                *bits |= 1 << node;
                node = 2 * node + 1;
            }
        }
    }

    /// The way to replace in `set`: an empty or expired one, else the pseudo-LRU one.
    fn victim(&self, set: usize, now: Instant) -> usize {
        let base = set * self.cfg.ways;
        if let Some(w) =
            (0..self.cfg.ways).find(|&w| self.lines[base + w].is_none_or(|l| l.expires <= now))
        {
            return w;
        }
        let (mut node, mut span, mut lo) = (0usize, self.cfg.ways, 0usize);
        while span > 1 {
            span /= 2;
            if self.plru[set] & (1 << node) != 0 {
                lo += span;
                node = 2 * node + 2;
            } else {
                node = 2 * node + 1;
            }
        }
        lo
    }

    /// The MAC of `ip`, or a miss to wait for (an ARP request is asked for unless one is
    /// already out for this address).
    pub fn lookup(&mut self, ip: Ipv4Addr, now: Instant) -> Lookup {
        if let Some(w) = self.find(ip, now) {
            self.stats.hits += 1;
            let set = self.set_of(ip);
            self.touch(set, w);
            if let Some(l) = self.lines[set * self.cfg.ways + w] {
                return Lookup::Hit(l.mac);
            }
        }
        self.stats.misses += 1;
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.waiting.push_back(Waiting {
            ticket,
            ip,
            answer: None,
        });
        if !self.asking.iter().any(|a| a.ip == ip) {
            self.asking.push(Asking {
                ip,
                sent: 0,
                next: now,
            });
        }
        Lookup::Miss(ticket)
    }

    /// The cached MAC of `ip`, without counting, touching or asking.
    pub fn peek(&self, ip: Ipv4Addr, now: Instant) -> Option<Mac> {
        let set = self.set_of(ip);
        self.find(ip, now)
            .and_then(|w| self.lines[set * self.cfg.ways + w])
            .map(|l| l.mac)
    }

    /// Learn `ip` is at `mac` (an ARP reply, or a request aimed at us): cached, and every
    /// miss waiting on it answered.
    pub fn insert(&mut self, ip: Ipv4Addr, mac: Mac, now: Instant) {
        let set = self.set_of(ip);
        let w = match self.find(ip, now) {
            Some(w) => w,
            None => {
                let w = self.victim(set, now);
                if self.lines[set * self.cfg.ways + w].is_some_and(|l| l.expires > now) {
                    self.stats.evictions += 1;
                }
                w
            }
        };
        self.lines[set * self.cfg.ways + w] = Some(Line {
            ip,
            mac,
            expires: now + self.cfg.lifetime,
        });
        self.touch(set, w);
        self.answer(ip, Some(mac));
    }

    /// Refresh `ip` only if it is cached (a gratuitous ARP, or a request not for us).
    pub fn update(&mut self, ip: Ipv4Addr, mac: Mac, now: Instant) {
        if self.find(ip, now).is_some() || self.asking.iter().any(|a| a.ip == ip) {
            self.insert(ip, mac, now);
        }
    }

    fn answer(&mut self, ip: Ipv4Addr, mac: Option<Mac>) {
        self.asking.retain(|a| a.ip != ip);
        for w in self
            .waiting
            .iter_mut()
            .filter(|w| w.ip == ip && w.answer.is_none())
        {
            w.answer = Some(mac);
        }
    }

    /// The next ARP request to send now (first requests and retries); misses whose last
    /// retry went unanswered fail here.
    pub fn poll_request(&mut self, now: Instant) -> Option<Ipv4Addr> {
        let limit = 1 + self.cfg.retries;
        while let Some(i) = self.asking.iter().position(|a| a.next <= now) {
            let a = &mut self.asking[i];
            if a.sent >= limit {
                let ip = a.ip;
                self.stats.timeouts += 1;
                self.answer(ip, None);
                continue;
            }
            a.sent += 1;
            a.next = now + self.cfg.retry_after;
            self.stats.requests += 1;
            return Some(a.ip);
        }
        None
    }

    /// The oldest miss, once it is answered (later ones wait behind it).
    pub fn poll_resolved(&mut self) -> Option<Resolved> {
        let mac = self.waiting.front()?.answer?;
        let w = self.waiting.pop_front()?;
        Some(Resolved {
            ticket: w.ticket,
            ip: w.ip,
            mac,
        })
    }

    /// When [`ArpCache::poll_request`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.asking.iter().map(|a| a.next).min()
    }

    /// Misses not yet handed back.
    pub fn outstanding(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> Mac {
        Mac([2, 0, 0, 0, 0, n])
    }

    fn small() -> ArpCache {
        ArpCache::new(ArpConfig {
            sets: 2,
            ways: 4,
            ..ArpConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn geometry_is_checked() {
        let bad = ArpConfig {
            sets: 3,
            ..ArpConfig::default()
        };
        assert!(ArpCache::new(bad).is_err());
        let bad = ArpConfig {
            ways: 128,
            ..ArpConfig::default()
        };
        assert!(ArpCache::new(bad).is_err());
    }

    #[test]
    fn a_miss_asks_once_and_is_answered() {
        let t = Instant::now();
        let mut c = small();
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        let Lookup::Miss(a) = c.lookup(ip, t) else {
            panic!("hit in an empty cache")
        };
        let Lookup::Miss(b) = c.lookup(ip, t) else {
            panic!()
        };
        assert_eq!(c.poll_request(t), Some(ip));
        assert_eq!(c.poll_request(t), None, "one request per address");
        assert_eq!(c.poll_resolved(), None);
        c.insert(ip, mac(2), t);
        assert_eq!(
            c.poll_resolved().map(|r| (r.ticket, r.mac)),
            Some((a, Some(mac(2))))
        );
        assert_eq!(
            c.poll_resolved().map(|r| (r.ticket, r.mac)),
            Some((b, Some(mac(2))))
        );
        assert_eq!(c.lookup(ip, t), Lookup::Hit(mac(2)));
        assert_eq!(c.stats.hits, 1);
        assert_eq!(c.stats.misses, 2);
    }

    #[test]
    fn answers_come_back_in_request_order() {
        let t = Instant::now();
        let mut c = small();
        let ips: Vec<Ipv4Addr> = (1..=3).map(|i| Ipv4Addr::new(10, 0, 0, i)).collect();
        let tickets: Vec<Ticket> = ips
            .iter()
            .map(|&ip| match c.lookup(ip, t) {
                Lookup::Miss(k) => k,
                Lookup::Hit(_) => panic!(),
            })
            .collect();
        while c.poll_request(t).is_some() {}
        // replies in reverse order: nothing comes out until the first is answered
        c.insert(ips[2], mac(3), t);
        c.insert(ips[1], mac(2), t);
        assert_eq!(c.poll_resolved(), None);
        c.insert(ips[0], mac(1), t);
        let got: Vec<(Ticket, Option<Mac>)> = std::iter::from_fn(|| c.poll_resolved())
            .map(|r| (r.ticket, r.mac))
            .collect();
        assert_eq!(
            got,
            vec![
                (tickets[0], Some(mac(1))),
                (tickets[1], Some(mac(2))),
                (tickets[2], Some(mac(3)))
            ]
        );
    }

    #[test]
    fn retries_then_gives_up() {
        let t = Instant::now();
        let mut c = small();
        let ip = Ipv4Addr::new(10, 0, 0, 9);
        assert!(matches!(c.lookup(ip, t), Lookup::Miss(_)));
        let mut sent = 0;
        let mut now = t;
        for _ in 0..10 {
            while c.poll_request(now).is_some() {
                sent += 1;
            }
            if let Some(r) = c.poll_resolved() {
                assert_eq!(r.mac, None);
                break;
            }
            now = c.poll_timeout().unwrap();
        }
        assert_eq!(sent, 3, "the first request and two retries");
        assert_eq!(c.stats.timeouts, 1);
        assert_eq!(c.outstanding(), 0);
    }

    #[test]
    fn pseudo_lru_evicts_the_least_recently_used_way() {
        let t = Instant::now();
        let mut c = small();
        // five addresses of one set (even last octet: set 0) into its four ways
        let ip = |i: u8| Ipv4Addr::new(10, 0, 0, 2 * i);
        for i in 0..4 {
            c.insert(ip(i), mac(i), t);
        }
        // use 0, 3 and 1 again: 2 is the least recently used (tree pseudo-LRU is exact
        // here: the last use went left, and 3 was used after 2 on the right)
        for i in [0, 3, 1] {
            assert_eq!(c.lookup(ip(i), t), Lookup::Hit(mac(i)));
        }
        c.insert(ip(4), mac(4), t);
        assert_eq!(c.stats.evictions, 1);
        assert_eq!(c.peek(ip(2), t), None, "the LRU way went");
        for i in [0, 1, 3, 4] {
            assert_eq!(c.peek(ip(i), t), Some(mac(i)));
        }
        // the other set was never touched
        c.insert(Ipv4Addr::new(10, 0, 0, 1), mac(9), t);
        assert_eq!(c.stats.evictions, 1);
    }

    #[test]
    fn entries_expire_and_expired_ways_are_reused_first() {
        let t = Instant::now();
        let mut c = small();
        let a = Ipv4Addr::new(10, 0, 0, 2);
        c.insert(a, mac(1), t);
        let later = t + ArpConfig::default().lifetime;
        assert_eq!(c.peek(a, later), None);
        assert!(matches!(c.lookup(a, later), Lookup::Miss(_)));
        // filling the set after expiry evicts nothing that was valid
        for i in 0..4u8 {
            c.insert(Ipv4Addr::new(10, 0, 1, 2 * i), mac(i), later);
        }
        assert_eq!(c.stats.evictions, 0);
    }

    #[test]
    fn gratuitous_arp_refreshes_only_what_is_known() {
        let t = Instant::now();
        let mut c = small();
        let a = Ipv4Addr::new(10, 0, 0, 2);
        c.update(a, mac(1), t);
        assert_eq!(c.peek(a, t), None);
        c.insert(a, mac(1), t);
        c.update(a, mac(7), t);
        assert_eq!(c.peek(a, t), Some(mac(7)));
    }
}
