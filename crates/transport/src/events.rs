//! The endpoint's queue of [`Event`]s: every QP appends, each role takes its own QPs'.
//!
//! A receiver that asks for placement events gets one per packet, so this sits on the
//! per-packet path. It is a vector read from a moving head — an append is a store, a take
//! a load — and it empties (and starts over at the front) whenever its reader catches up,
//! which a receive loop does after every batch.

use crate::Event;

/// Events in the order they happened.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    items: Vec<Event>,
    /// `items[..head]` were taken.
    head: usize,
}

/// Taken slots kept at the front before they are dropped (when events of a QP no one polls
/// hold the queue from emptying).
const COMPACT_AT: usize = 1024;

impl EventQueue {
    /// Append an event.
    #[inline]
    pub(crate) fn push_back(&mut self, e: Event) {
        self.items.push(e);
    }

    /// Take the oldest event.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<Event> {
        let e = *self.items.get(self.head)?;
        self.taken();
        Some(e)
    }

    /// Take the oldest event of QP `qpn` (other QPs' stay, in order).
    #[inline]
    pub(crate) fn pop_qp(&mut self, qpn: u32) -> Option<Event> {
        let live = &self.items[self.head..];
        // the common case — one QP, or this QP's event first — costs no search
        if live.first()?.qpn() == qpn {
            return self.pop_front();
        }
        let i = self.head + live.iter().position(|e| e.qpn() == qpn)?;
        // bring it to the front past the (fewer) other QPs' events ahead of it
        self.items[self.head..=i].rotate_right(1);
        self.pop_front()
    }

    /// Events not yet taken.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len() - self.head
    }

    fn taken(&mut self) {
        self.head += 1;
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
        } else if self.head >= COMPACT_AT && self.head * 2 >= self.items.len() {
            self.items.drain(..self.head);
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stays_four_words() {
        // one is queued per packet on a reporting QP: keep them small
        assert!(
            std::mem::size_of::<Event>() <= 32,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    fn ev(qpn: u32, psn: u32) -> Event {
        Event::Placed {
            qpn,
            psn,
            rkey: 1,
            va: 0,
            len: 0,
            crc: 0,
        }
    }

    fn psn(e: Event) -> u32 {
        match e {
            Event::Placed { psn, .. } => psn,
            _ => unreachable!(),
        }
    }

    #[test]
    fn each_qp_takes_its_own_in_order() {
        let mut q = EventQueue::default();
        for i in 0..6 {
            q.push_back(ev(1 + i % 2, i));
        }
        assert_eq!(q.pop_qp(2).map(psn), Some(1));
        assert_eq!(q.pop_qp(2).map(psn), Some(3));
        assert_eq!(q.pop_front().map(psn), Some(0));
        assert_eq!(q.pop_qp(1).map(psn), Some(2));
        assert_eq!(q.pop_qp(3), None);
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_qp(1).map(psn), Some(4));
        assert_eq!(q.pop_qp(1), None);
        assert_eq!(q.pop_qp(2).map(psn), Some(5));
        assert_eq!(q.pop_front(), None);
        assert_eq!((q.items.len(), q.head), (0, 0), "empty once caught up");
    }

    #[test]
    fn taken_events_are_dropped_though_an_unpolled_qp_keeps_the_queue_from_emptying() {
        let mut q = EventQueue::default();
        for round in 0..20u32 {
            for i in 0..3_000 {
                q.push_back(ev(1, round * 3_000 + i));
            }
            q.push_back(ev(9, round)); // QP 9 never polls
            for i in 0..3_000 {
                assert_eq!(q.pop_qp(1).map(psn), Some(round * 3_000 + i));
            }
            assert_eq!(q.len(), round as usize + 1);
            assert!(q.items.len() <= 2 * COMPACT_AT + 21, "{}", q.items.len());
        }
        for round in 0..20 {
            assert_eq!(q.pop_qp(9).map(psn), Some(round));
        }
        assert_eq!(q.pop_front(), None);
    }
}
