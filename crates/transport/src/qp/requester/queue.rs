//! The send queue: the WQEs in flight, in order, and how many at its front have nothing
//! left to send — so finding the next packet to send does not walk past every message in
//! flight (128 of them in perftest's bandwidth tests) for each packet, nor does finding
//! where the sent PSNs end for each ACK.

use super::SendWqe;
use rocelink_wire::ib::psn;
use std::cell::Cell;
use std::collections::VecDeque;

/// WQEs in posting order, with a lower bound on how many at the front have nothing to send.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    q: VecDeque<SendWqe>,
    /// Every WQE before this index has nothing to send (a lower bound, kept by every
    /// change: a mutable borrow of one WQE lowers it to that WQE, of all of them to 0).
    settled: Cell<usize>,
}

impl SendQueue {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }

    pub(crate) fn iter(&self) -> std::collections::vec_deque::Iter<'_, SendWqe> {
        self.q.iter()
    }

    /// Every WQE, mutable: any of them may become sendable again.
    pub(crate) fn iter_mut(&mut self) -> std::collections::vec_deque::IterMut<'_, SendWqe> {
        self.settled.set(0);
        self.q.iter_mut()
    }

    pub(crate) fn front(&self) -> Option<&SendWqe> {
        self.q.front()
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<SendWqe> {
        let w = self.q.pop_front();
        if w.is_some() {
            self.settled.set(self.settled.get().saturating_sub(1));
        }
        w
    }

    /// One past the last PSN sent: the end of the last WQE with anything sent, looked for
    /// from the back (past only WQEs not begun, not through the whole window on every
    /// ACK). `None` when nothing is.
    pub(crate) fn sent_end(&self) -> Option<u32> {
        self.q.iter().rev().find_map(|w| {
            let sent = if w.is_read() {
                if w.max_sent > 0 { w.npkts } else { 0 }
            } else {
                w.max_sent
            };
            (sent > 0).then(|| psn::add(w.first_psn, sent))
        })
    }

    pub(crate) fn push_back(&mut self, w: SendWqe) {
        self.q.push_back(w);
    }

    /// Drop the first WQE, one without inline data (none of it is copied out on the way).
    #[inline]
    pub(crate) fn drop_front(&mut self) {
        if let Some(w) = self.q.front_mut() {
            // the one part that owns anything; what is left is plain data (the work
            // request is `Copy`), so forgetting it leaks nothing and its bytes need not be
            // read out
            const _: () = assert!(!std::mem::needs_drop::<crate::wr::SendWr>());
            drop(w.inline.take());
            std::mem::forget(self.pop_front());
        }
    }

    pub(crate) fn remove(&mut self, idx: usize) -> Option<SendWqe> {
        let w = self.q.remove(idx);
        if w.is_some() && idx < self.settled.get() {
            self.settled.set(self.settled.get() - 1);
        }
        w
    }

    pub(crate) fn drain(&mut self) -> std::collections::vec_deque::Drain<'_, SendWqe> {
        self.settled.set(0);
        self.q.drain(..)
    }

    /// WQE `idx`, mutable: it may become sendable again (the ones before it stay as they
    /// are).
    pub(crate) fn get_mut(&mut self, idx: usize) -> Option<&mut SendWqe> {
        self.settled.set(self.settled.get().min(idx));
        self.q.get_mut(idx)
    }

    /// The first WQE from the front for which `pick` gives something (the next packet to
    /// send), with its index — looking only past the WQEs known to have nothing to send,
    /// and remembering that the ones passed over have nothing either.
    /// `pick(w)` must be `None` exactly when `w` has nothing to send.
    #[inline]
    pub(crate) fn first_sendable<T>(
        &self,
        pick: impl Fn(&SendWqe) -> Option<T>,
    ) -> Option<(usize, T)> {
        let from = self.settled.get().min(self.q.len());
        if from == self.q.len() {
            // the common case between posts: nothing left to send, said without a walk
            self.settled.set(from);
            return None;
        }
        let found = self
            .q
            .range(from..)
            .enumerate()
            .find_map(|(i, w)| pick(w).map(|t| (from + i, t)));
        self.settled
            .set(found.as_ref().map_or(self.q.len(), |(i, _)| *i));
        found
    }
}

impl std::ops::Index<usize> for SendQueue {
    type Output = SendWqe;
    #[inline]
    fn index(&self, idx: usize) -> &SendWqe {
        &self.q[idx]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::{SendOp, SendWr, Sge};
    use proptest::prelude::*;

    fn wqe(npkts: u32, first_psn: u32, read: bool) -> SendWqe {
        SendWqe {
            wr: SendWr {
                wr_id: 0,
                op: if read {
                    SendOp::Read { va: 0, rkey: 0 }
                } else {
                    SendOp::Send
                },
                sg_list: Sge {
                    lkey: 0,
                    va: 0,
                    len: 0,
                }
                .into(),
                signaled: false,
                solicited: false,
                marks: 0,
            },
            len: 0,
            inline: None,
            first_psn,
            npkts,
            next_pkt: 0,
            max_sent: 0,
            read_pkts: 0,
            done: false,
            sent_at: None,
            resent: false,
            gather_at: None,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32, bool),
        SendNext,
        Rewind(usize),
        RewindAll,
        PopFront,
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u32..4, proptest::bool::weighted(0.2)).prop_map(|(n, r)| Op::Push(n, r)),
            Just(Op::SendNext),
            Just(Op::SendNext),
            Just(Op::SendNext),
            (0usize..8).prop_map(Op::Rewind),
            Just(Op::RewindAll),
            Just(Op::PopFront),
            (0usize..8).prop_map(Op::Remove),
        ]
    }

    fn sendable(w: &SendWqe) -> Option<u32> {
        (w.next_pkt < w.npkts).then_some(w.next_pkt)
    }

    proptest! {
        /// Whatever the order of posts, sends, rewinds and removals, the next WQE to send
        /// is the one a walk from the front finds, and the sent PSNs end where such a
        /// walk says (PSNs wrapping at 2²⁴ on the way).
        #[test]
        fn the_next_to_send_is_what_a_walk_from_the_front_finds(
            ops in proptest::collection::vec(op(), 1..200)
        ) {
            let mut q = SendQueue::default();
            let mut next_psn = psn::MASK - 20;
            for op in ops {
                match op {
                    Op::Push(n, read) => {
                        q.push_back(wqe(n, next_psn, read));
                        next_psn = psn::add(next_psn, n);
                    }
                    Op::SendNext => {
                        if let Some((i, _)) = q.first_sendable(sendable) {
                            let w = q.get_mut(i).unwrap();
                            w.next_pkt += 1;
                            w.max_sent = w.max_sent.max(w.next_pkt);
                        }
                    }
                    Op::Rewind(i) => {
                        if let Some(w) = q.get_mut(i) {
                            w.next_pkt = 0;
                        }
                    }
                    Op::RewindAll => q.iter_mut().for_each(|w| w.next_pkt /= 2),
                    Op::PopFront => {
                        q.pop_front();
                    }
                    Op::Remove(i) => {
                        q.remove(i);
                    }
                }
                let walk = q.iter().enumerate().find_map(|(i, w)| sendable(w).map(|t| (i, t)));
                prop_assert_eq!(q.first_sendable(sendable), walk);
                let mut end = None;
                for w in q.iter() {
                    let sent = match (w.is_read(), w.max_sent) {
                        (true, 0) => 0,
                        (true, _) => w.npkts,
                        (false, m) => m,
                    };
                    if sent > 0 {
                        end = Some(psn::add(w.first_psn, sent));
                    }
                }
                prop_assert_eq!(q.sent_end(), end);
            }
        }
    }
}
