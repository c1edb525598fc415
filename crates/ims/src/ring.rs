//! The buffer unit's book of its ring (Figure 3.2): which frames were delivered, and the
//! read pointer the consumer moves over consecutively delivered frames. The write window
//! is `[read pointer, read pointer + ring size)`; the transport's ring region enforces it,
//! this book only says where it is.

use crate::align_up;
use std::collections::BTreeMap;

/// What a delivered frame was to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Not seen before.
    New,
    /// Delivered before (its ACK was lost and the worker sent it again).
    Duplicate,
}

/// Delivered frames and the read pointer of one data channel.
#[derive(Debug, Clone)]
pub struct RingBook {
    /// First VA of the stream (VA_OFFS).
    start: u64,
    ring: u64,
    /// Read pointer: every frame before it was consumed.
    rp: u64,
    /// Delivered, not yet consumed: stream offset (VA − start) → length.
    delivered: BTreeMap<u64, u32>,
    /// The longest frame ever delivered.
    longest: u32,
}

impl RingBook {
    /// A stream starting at VA `start` into a ring of `ring` bytes.
    pub fn new(start: u64, ring: u64) -> RingBook {
        RingBook {
            start,
            ring,
            rp: start,
            delivered: BTreeMap::new(),
            longest: 0,
        }
    }

    /// The write window: (first VA, length).
    pub fn window(&self) -> (u64, u64) {
        (self.rp, self.ring)
    }

    /// The read pointer.
    pub fn read_pointer(&self) -> u64 {
        self.rp
    }

    fn offset(&self, va: u64) -> u64 {
        va.wrapping_sub(self.start)
    }

    /// True when `va` lies in `[start, read pointer)`: a frame there was delivered and
    /// consumed.
    pub fn behind(&self, va: u64) -> bool {
        self.offset(va) < self.offset(self.rp)
    }

    /// Record the frame `[va, va + len)` as delivered.
    pub fn delivered(&mut self, va: u64, len: u32) -> Delivery {
        if self.behind(va) {
            return Delivery::Duplicate;
        }
        self.longest = self.longest.max(len);
        match self.delivered.insert(self.offset(va), len) {
            Some(_) => Delivery::Duplicate,
            None => Delivery::New,
        }
    }

    /// The delivered frame at the read pointer, if any: (VA, length).
    pub fn next(&self) -> Option<(u64, u32)> {
        let at = self.offset(self.rp);
        self.delivered.get(&at).map(|&len| (self.rp, len))
    }

    /// Move the read pointer over a gap to the first delivered frame, when none is at it:
    /// for a channel that takes no more writes, where the gap will never fill. That frame
    /// (VA, length), or `None` when nothing is delivered.
    pub fn pass_gap(&mut self) -> Option<(u64, u32)> {
        if let Some(next) = self.next() {
            return Some(next);
        }
        let (&at, &len) = self.delivered.first_key_value()?;
        self.rp = self.start.wrapping_add(at);
        Some((self.rp, len))
    }

    /// The consumer is done with [`RingBook::next`]'s frame: move the read pointer past it
    /// (to the next 64-byte boundary). False when there was none.
    pub fn consume(&mut self) -> bool {
        let at = self.offset(self.rp);
        match self.delivered.remove(&at) {
            Some(len) => {
                self.rp = align_up(self.rp.wrapping_add(u64::from(len)));
                true
            }
            None => false,
        }
    }

    /// True when a frame at `va` was delivered and is not yet consumed.
    pub fn holds(&self, va: u64) -> bool {
        self.delivered.contains_key(&self.offset(va))
    }

    /// True when `[va, va + len)` overlaps a frame delivered and not yet consumed (stream
    /// offsets; a range that wraps the VA space counts as overlapping).
    pub fn overlaps_delivered(&self, va: u64, len: u64) -> bool {
        let at = self.offset(va);
        let Some(end) = at.checked_add(len) else {
            return true;
        };
        // frames starting before `end` and late enough to reach past `at`
        let from = at.saturating_sub(u64::from(self.longest));
        self.delivered
            .range(from..end)
            .any(|(&f, &n)| f + u64::from(n) > at)
    }

    /// Frames delivered and not yet consumed that follow each other from the read pointer
    /// on (those the consumer can take without a gap).
    pub fn in_order(&self) -> usize {
        let mut at = self.offset(self.rp);
        let mut n = 0;
        while let Some(&len) = self.delivered.get(&at) {
            n += 1;
            at = align_up(at.wrapping_add(u64::from(len)));
        }
        n
    }

    /// Frames delivered and not yet consumed.
    pub fn pending(&self) -> usize {
        self.delivered.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_pointer_moves_only_over_consecutive_frames() {
        let start = u64::MAX - 127; // the stream wraps the VA space after two frames
        let mut b = RingBook::new(start, 4096);
        assert_eq!(b.window(), (start, 4096));
        // the second frame first: nothing to consume
        assert_eq!(b.delivered(start + 64, 100), Delivery::New);
        assert_eq!(b.next(), None);
        assert!(!b.consume());
        assert_eq!(b.delivered(start, 64), Delivery::New);
        assert_eq!(b.delivered(start, 64), Delivery::Duplicate);
        assert_eq!(b.next(), Some((start, 64)));
        assert!(b.consume());
        assert_eq!(b.next(), Some((start + 64, 100)));
        assert!(b.consume());
        // 64 + 100 rounded up to 192: past 2^64, at VA 64
        assert_eq!(b.read_pointer(), 64);
        assert_eq!(b.window(), (64, 4096));
        assert!(b.behind(start) && b.behind(start + 64) && b.behind(0));
        assert!(!b.behind(64) && !b.behind(1 << 40));
        assert_eq!(
            b.delivered(start + 64, 100),
            Delivery::Duplicate,
            "consumed"
        );
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn a_range_over_a_delivered_frame_is_seen() {
        let mut b = RingBook::new(1000, 1 << 20);
        b.delivered(1000 + 4096, 4096);
        b.delivered(1000 + 3 * 4096, 100);
        for (va, len, want) in [
            (1000, 4096, false),               // before the first
            (1000, 4097, true),                // its first byte
            (1000 + 8191, 1, true),            // its last byte
            (1000 + 8192, 4096, false),        // the gap between
            (1000 + 3 * 4096 + 99, 5, true),   // the short one's last byte
            (1000 + 3 * 4096 + 100, 9, false), // after it
            (1000 + 2048, 1 << 16, true),      // over both
        ] {
            assert_eq!(b.overlaps_delivered(va, len), want, "{va} +{len}");
        }
        assert!(b.consume() || b.pass_gap().is_some());
    }

    #[test]
    fn a_closed_channel_passes_the_gaps_that_will_never_fill() {
        let mut b = RingBook::new(1 << 20, 4096);
        assert_eq!(b.pass_gap(), None, "nothing delivered");
        assert_eq!(b.delivered((1 << 20) + 128, 64), Delivery::New);
        assert_eq!(b.delivered((1 << 20) + 256, 64), Delivery::New);
        assert_eq!(b.next(), None, "the first frame never came");
        assert_eq!(b.pass_gap(), Some(((1 << 20) + 128, 64)));
        assert!(b.consume());
        assert_eq!(b.next(), None, "a second gap, 64 bytes");
        assert_eq!(b.pass_gap(), Some(((1 << 20) + 256, 64)));
        assert!(b.consume());
        assert_eq!(b.pending(), 0);
        assert!(
            b.behind((1 << 20) + 64),
            "the gap is behind the read pointer"
        );
    }
}
