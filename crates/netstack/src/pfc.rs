//! Priority flow control (802.1Qbb) as blue-ethernet's `mkPriorityFlowControlRx/Tx`
//! build it: eight classes; on receive, a queue per class whose fill past a threshold
//! sends a pause for that class (and a resume once it drains); on transmit, a queue per
//! class, round-robin among the classes not paused, a pause honoured for its quanta
//! (one quantum: 512 bit times at the link rate).
//!
//! Sans-IO: time is an argument, pause frames come out of [`PfcRx::poll_pause`] as
//! [`rocelink_wire::pfc::Repr`] and go into [`PfcTx::handle_pause`].

use rocelink_wire::pfc;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Number of traffic classes.
pub const CLASSES: usize = 8;

/// The class of a packet: its 802.1Q priority when tagged, else the DSCP's class
/// selector (the top three bits: CS0–CS7 → 0–7).
pub fn class_of(pcp: Option<u8>, dscp: u8) -> u8 {
    pcp.map_or(dscp >> 3, |p| p & 7) & 7
}

/// How long `quanta` pause at `link_bps`.
pub fn pause_time(quanta: u16, link_bps: u64) -> Duration {
    Duration::from_nanos(u64::from(quanta) * 512 * 1_000_000_000 / link_bps.max(1))
}

/// Per-class counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Packets queued.
    pub queued: u64,
    /// Packets taken out.
    pub dequeued: u64,
    /// Packets dropped on a full queue.
    pub dropped: u64,
    /// Pause frames sent (receive side) or honoured (transmit side).
    pub pauses: u64,
    /// Resumes (quanta 0) sent or honoured.
    pub resumes: u64,
    /// How long the class was paused (transmit side: by the peer's frames, overlapping
    /// pauses counted once, a resume ending one early).
    pub paused: Duration,
}

/// Receive side: queues, thresholds, pause frames.
#[derive(Debug)]
pub struct PfcRx<T> {
    queues: [VecDeque<T>; CLASSES],
    capacity: usize,
    xoff: usize,
    xon: usize,
    quanta: u16,
    link_bps: u64,
    /// When each paused class's pause runs out at the sender (refresh before then).
    paused: [Option<Instant>; CLASSES],
    frames: VecDeque<pfc::Repr>,
    /// Per-class counters.
    pub stats: [ClassStats; CLASSES],
}

impl<T> PfcRx<T> {
    /// Queues of `capacity` packets; a pause of `quanta` goes out when a queue reaches
    /// `xoff` packets, a resume when it falls to `xon`. `capacity − xoff` must cover what
    /// is in flight while the pause travels (a link round trip) for the class to be
    /// lossless.
    pub fn new(capacity: usize, xoff: usize, xon: usize, quanta: u16, link_bps: u64) -> PfcRx<T> {
        PfcRx {
            queues: Default::default(),
            capacity,
            xoff: xoff.min(capacity),
            xon: xon.min(xoff),
            quanta: quanta.max(1),
            link_bps,
            paused: [None; CLASSES],
            frames: VecDeque::new(),
            stats: [ClassStats::default(); CLASSES],
        }
    }

    /// Queue `item` in `class`; a full queue drops it (returned).
    pub fn push(&mut self, now: Instant, class: u8, item: T) -> Result<(), T> {
        let c = usize::from(class & 7);
        if self.queues[c].len() >= self.capacity {
            self.stats[c].dropped += 1;
            return Err(item);
        }
        self.queues[c].push_back(item);
        self.stats[c].queued += 1;
        if self.queues[c].len() >= self.xoff && self.paused[c].is_none() {
            self.pause(now, c);
        }
        Ok(())
    }

    fn pause(&mut self, now: Instant, c: usize) {
        self.frames
            .push_back(pfc::Repr::pause(c as u8, self.quanta));
        self.paused[c] = Some(now + pause_time(self.quanta, self.link_bps));
        self.stats[c].pauses += 1;
    }

    /// Take the oldest packet of `class`; a queue that drains to `xon` resumes its sender.
    pub fn pop(&mut self, class: u8) -> Option<T> {
        let c = usize::from(class & 7);
        let item = self.queues[c].pop_front()?;
        self.stats[c].dequeued += 1;
        if self.paused[c].is_some() && self.queues[c].len() <= self.xon {
            self.paused[c] = None;
            self.frames.push_back(pfc::Repr::pause(c as u8, 0));
            self.stats[c].resumes += 1;
        }
        Some(item)
    }

    /// Packets waiting in `class`.
    pub fn len(&self, class: u8) -> usize {
        self.queues[usize::from(class & 7)].len()
    }

    /// True when no class holds a packet.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    /// The next pause or resume frame to send. A class still above `xon` when half its
    /// pause has run is paused again, so a slow consumer never lets its sender loose.
    pub fn poll_pause(&mut self, now: Instant) -> Option<pfc::Repr> {
        let half = pause_time(self.quanta, self.link_bps) / 2;
        for c in 0..CLASSES {
            if let Some(until) = self.paused[c]
                && until.checked_sub(half).is_none_or(|t| now >= t)
            {
                self.pause(now, c);
            }
        }
        self.frames.pop_front()
    }

    /// When a pause next needs refreshing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let half = pause_time(self.quanta, self.link_bps) / 2;
        self.paused
            .iter()
            .flatten()
            .map(|&u| u.checked_sub(half).unwrap_or(u))
            .min()
    }
}

/// Transmit side: queues, round robin, pauses honoured.
#[derive(Debug)]
pub struct PfcTx<T> {
    queues: [VecDeque<T>; CLASSES],
    capacity: usize,
    paused_until: [Option<Instant>; CLASSES],
    next: usize,
    link_bps: u64,
    /// Per-class counters.
    pub stats: [ClassStats; CLASSES],
}

impl<T> PfcTx<T> {
    /// Queues of `capacity` packets on a link of `link_bps`.
    pub fn new(capacity: usize, link_bps: u64) -> PfcTx<T> {
        PfcTx {
            queues: Default::default(),
            capacity,
            paused_until: [None; CLASSES],
            next: 0,
            link_bps,
            stats: [ClassStats::default(); CLASSES],
        }
    }

    /// Queue `item` for `class`; a full queue refuses it (returned: the caller waits).
    pub fn push(&mut self, class: u8, item: T) -> Result<(), T> {
        let c = usize::from(class & 7);
        if self.queues[c].len() >= self.capacity {
            return Err(item);
        }
        self.queues[c].push_back(item);
        self.stats[c].queued += 1;
        Ok(())
    }

    /// Honour a PFC frame received at `now`.
    pub fn handle_pause(&mut self, now: Instant, frame: &pfc::Repr) {
        for c in 0..CLASSES {
            if frame.class_enable & (1 << c) == 0 {
                continue;
            }
            let q = frame.quanta[c];
            // a pause still running: its rest is counted again below, or given back
            let rest =
                self.paused_until[c].map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
            self.stats[c].paused = self.stats[c].paused.saturating_sub(rest);
            if q == 0 {
                self.paused_until[c] = None;
                self.stats[c].resumes += 1;
            } else {
                let d = pause_time(q, self.link_bps);
                self.paused_until[c] = Some(now + d);
                self.stats[c].paused += d;
                self.stats[c].pauses += 1;
            }
        }
    }

    /// Whether `class` may not send at `now`.
    pub fn is_paused(&self, class: u8, now: Instant) -> bool {
        self.paused_until[usize::from(class & 7)].is_some_and(|u| now < u)
    }

    /// The next packet to send: classes in turn, skipping empty and paused ones.
    pub fn poll(&mut self, now: Instant) -> Option<(u8, T)> {
        for i in 0..CLASSES {
            let c = (self.next + i) % CLASSES;
            if self.queues[c].is_empty() || self.is_paused(c as u8, now) {
                continue;
            }
            let item = self.queues[c].pop_front()?;
            self.stats[c].dequeued += 1;
            self.next = (c + 1) % CLASSES;
            return Some((c as u8, item));
        }
        None
    }

    /// When a paused class with packets may send again.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        (0..CLASSES)
            .filter(|&c| !self.queues[c].is_empty())
            .filter_map(|c| self.paused_until[c].filter(|&u| u > now))
            .min()
    }

    /// Packets waiting in `class`.
    pub fn len(&self, class: u8) -> usize {
        self.queues[usize::from(class & 7)].len()
    }

    /// True when no class holds a packet.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }
}

/// Receive side for one buffer shared by every class and seen only by its fill level (an
/// AF_XDP receive ring): past `xoff` entries it pauses the classes that were arriving,
/// refreshes the pause at half its time while the level stays above `xon`, and resumes
/// them (quanta 0) once the level falls to `xon`.
#[derive(Debug)]
pub struct LevelPause {
    xoff: u32,
    xon: u32,
    quanta: u16,
    link_bps: u64,
    /// The classes paused, since when, and when their pause needs refreshing.
    paused: u8,
    since: [Option<Instant>; CLASSES],
    refresh_at: Option<Instant>,
    /// Per-class counters of what was sent.
    pub stats: [ClassStats; CLASSES],
}

impl LevelPause {
    /// Pause at `xoff` entries, resume at `xon`, pauses of `quanta` on a link of `link_bps`.
    pub fn new(xoff: u32, xon: u32, quanta: u16, link_bps: u64) -> LevelPause {
        LevelPause {
            xoff: xoff.max(1),
            xon: xon.min(xoff.saturating_sub(1)),
            quanta: quanta.max(1),
            link_bps,
            paused: 0,
            since: [None; CLASSES],
            refresh_at: None,
            stats: [ClassStats::default(); CLASSES],
        }
    }

    /// The buffer holds `level` entries at `now`; `arriving` is the classes seen arriving
    /// lately (bit n = class n; none known: every class). The frame to send, if any.
    pub fn handle_level(&mut self, now: Instant, level: u32, arriving: u8) -> Option<pfc::Repr> {
        let time = pause_time(self.quanta, self.link_bps);
        if self.paused != 0 && level <= self.xon {
            let f = pfc::Repr {
                class_enable: std::mem::take(&mut self.paused),
                quanta: [0; CLASSES],
            };
            self.refresh_at = None;
            for c in 0..CLASSES {
                if let Some(t) = self.since[c].take() {
                    self.stats[c].resumes += 1;
                    self.stats[c].paused += now.saturating_duration_since(t);
                }
            }
            return Some(f);
        }
        let due = self.refresh_at.is_some_and(|t| now >= t);
        let newly = if level >= self.xoff {
            let want = if arriving == 0 { 0xFF } else { arriving };
            want & !self.paused
        } else {
            0
        };
        if newly == 0 && !due {
            return None;
        }
        self.paused |= newly;
        self.refresh_at = Some(now + time / 2);
        let mut f = pfc::Repr {
            class_enable: self.paused,
            quanta: [0; CLASSES],
        };
        for c in 0..CLASSES {
            if self.paused & (1 << c) != 0 {
                f.quanta[c] = self.quanta;
            }
        }
        for c in 0..CLASSES {
            if self.paused & (1 << c) != 0 {
                self.stats[c].pauses += 1;
                self.since[c].get_or_insert(now);
            }
        }
        Some(f)
    }

    /// The classes paused now (bit n = class n).
    pub fn paused(&self) -> u8 {
        self.paused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_from_pcp_or_dscp() {
        assert_eq!(class_of(Some(5), 0), 5);
        assert_eq!(class_of(None, 26), 3); // AF31
        assert_eq!(class_of(None, 46), 5); // EF
        assert_eq!(class_of(None, 0), 0);
    }

    #[test]
    fn quanta_are_512_bit_times() {
        // 0xFFFF quanta at 10 Gbit/s: 3.355 ms
        assert_eq!(
            pause_time(0xFFFF, 10_000_000_000),
            Duration::from_nanos(3_355_392)
        );
        assert_eq!(pause_time(1, 100_000_000_000), Duration::from_nanos(5));
    }

    #[test]
    fn round_robin_skips_paused_classes() {
        let t = Instant::now();
        let mut tx = PfcTx::new(16, 10_000_000_000);
        for i in 0..3 {
            tx.push(1, (1, i)).unwrap();
            tx.push(3, (3, i)).unwrap();
        }
        assert_eq!(tx.poll(t), Some((1, (1, 0))));
        assert_eq!(tx.poll(t), Some((3, (3, 0))));
        tx.handle_pause(t, &pfc::Repr::pause(3, 1000));
        assert!(tx.is_paused(3, t));
        assert_eq!(tx.poll(t), Some((1, (1, 1))));
        assert_eq!(tx.poll(t), Some((1, (1, 2))));
        assert_eq!(tx.poll(t), None, "class 3 waits");
        let until = tx.poll_timeout(t).unwrap();
        assert_eq!(until - t, pause_time(1000, 10_000_000_000));
        assert_eq!(tx.poll(until), Some((3, (3, 1))));
        // a resume lifts it at once
        tx.handle_pause(until, &pfc::Repr::pause(3, 0xFFFF));
        assert_eq!(tx.poll(until), None);
        tx.handle_pause(until, &pfc::Repr::pause(3, 0));
        assert_eq!(tx.poll(until), Some((3, (3, 2))));
        assert_eq!(tx.stats[3].pauses, 2);
        assert_eq!(tx.stats[3].resumes, 1);
    }

    #[test]
    fn thresholds_send_pause_then_resume() {
        let t = Instant::now();
        let mut rx = PfcRx::new(8, 4, 1, 0xFFFF, 10_000_000_000);
        for i in 0..3 {
            rx.push(t, 2, i).unwrap();
        }
        assert_eq!(rx.poll_pause(t), None);
        rx.push(t, 2, 3).unwrap();
        assert_eq!(rx.poll_pause(t), Some(pfc::Repr::pause(2, 0xFFFF)));
        assert_eq!(rx.poll_pause(t), None);
        // still full at half the pause: paused again
        let half = t + pause_time(0xFFFF, 10_000_000_000) / 2;
        assert_eq!(rx.poll_timeout(), Some(half));
        assert_eq!(rx.poll_pause(half), Some(pfc::Repr::pause(2, 0xFFFF)));
        for _ in 0..3 {
            rx.pop(2).unwrap();
        }
        assert_eq!(rx.poll_pause(half), Some(pfc::Repr::pause(2, 0)));
        assert_eq!(rx.stats[2].pauses, 2);
        assert_eq!(rx.stats[2].resumes, 1);
        // a full queue drops, and says so
        for i in 0..8 {
            let _ = rx.push(half, 2, i);
        }
        assert_eq!(rx.len(2), 8);
        assert_eq!(rx.stats[2].dropped, 1);
    }

    #[test]
    fn paused_time_counts_overlaps_once_and_ends_at_a_resume() {
        let t = Instant::now();
        let link = 10_000_000_000;
        let q = pause_time(1000, link);
        let mut tx: PfcTx<u8> = PfcTx::new(4, link);
        tx.handle_pause(t, &pfc::Repr::pause(1, 1000));
        // refreshed half-way: the second half is not counted twice
        tx.handle_pause(t + q / 2, &pfc::Repr::pause(1, 1000));
        assert_eq!(tx.stats[1].paused, q + q / 2);
        // resumed a quarter into the refreshed pause
        tx.handle_pause(t + q / 2 + q / 4, &pfc::Repr::pause(1, 0));
        assert_eq!(tx.stats[1].paused, q / 2 + q / 4);
        assert_eq!(tx.stats[0].paused, Duration::ZERO);
    }

    #[test]
    fn a_filling_ring_pauses_the_arriving_classes_refreshes_and_resumes() {
        let t = Instant::now();
        let link = 10_000_000_000;
        let half = pause_time(0xFFFF, link) / 2;
        let mut lp = LevelPause::new(1536, 512, 0xFFFF, link);
        assert_eq!(lp.handle_level(t, 1000, 0b1), None);
        let f = lp.handle_level(t, 1600, 0b1).unwrap();
        assert_eq!(f.class_enable, 0b1);
        assert_eq!(f.quanta[0], 0xFFFF);
        assert_eq!(f.quanta[1], 0);
        // nothing new before half the pause has run
        assert_eq!(lp.handle_level(t + half / 2, 1600, 0b1), None);
        // another class arrives while full: paused with the first
        let f = lp.handle_level(t + half / 2, 1700, 0b1000).unwrap();
        assert_eq!(f.class_enable, 0b1001);
        // still above xon at the refresh: paused again
        let f = lp.handle_level(t + half * 2, 800, 0).unwrap();
        assert_eq!(f.class_enable, 0b1001);
        assert_eq!(f.quanta[3], 0xFFFF);
        // drained: resumed, quanta 0
        let f = lp.handle_level(t + half * 2, 500, 0).unwrap();
        assert_eq!(f.class_enable, 0b1001);
        assert_eq!(f.quanta, [0; 8]);
        assert_eq!(lp.paused(), 0);
        assert_eq!(lp.handle_level(t + half * 9, 0, 0), None);
        assert_eq!(lp.stats[0].pauses, 3);
        assert_eq!(lp.stats[3].pauses, 2);
        assert_eq!(lp.stats[0].resumes, 1);
        assert_eq!(lp.stats[0].paused, half * 2);
        assert_eq!(lp.stats[3].paused, half * 2 - half / 2);
        // nothing known to arrive: every class
        let f = lp.handle_level(t + half * 10, 2000, 0).unwrap();
        assert_eq!(f.class_enable, 0xFF);
    }
}
