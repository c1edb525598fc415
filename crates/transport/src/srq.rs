//! Shared receive queues: receives posted once for many QPs, each SEND (or WRITE with
//! immediate) taking the next, whichever QP it arrives on; a limit that, once armed, says
//! when the queue ran low ([`crate::Event::SrqLimit`]) — after `ibv_create_srq`.

use crate::wr::RecvWr;
use std::collections::{HashMap, VecDeque};

/// What a shared receive queue is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqInit {
    /// Most receives posted at once.
    pub max_wr: usize,
    /// The protection domain its receives' buffers must be in.
    pub pd: u32,
}

/// What a shared receive queue holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqInfo {
    /// Most receives posted at once.
    pub max_wr: usize,
    /// The armed limit (0: not armed).
    pub limit: u32,
    /// Receives posted and not yet taken.
    pub posted: usize,
}

#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) max_wr: usize,
    pub(crate) limit: u32,
    pub(crate) pd: u32,
    /// QPs created on it.
    pub(crate) users: usize,
}

/// The endpoint's shared receive queues.
#[derive(Debug, Default)]
pub(crate) struct Srqs {
    map: HashMap<u32, Srq>,
    next: u32,
}

/// Most shared receive queues an endpoint holds.
pub const MAX_SRQS: usize = 4096;

impl Srqs {
    /// A new queue's number (never 0), or `None` when [`MAX_SRQS`] exist.
    pub(crate) fn create(&mut self, init: SrqInit) -> Option<u32> {
        if self.map.len() >= MAX_SRQS {
            return None;
        }
        loop {
            self.next = self.next.wrapping_add(1).max(1);
            if !self.map.contains_key(&self.next) {
                break;
            }
        }
        self.map.insert(
            self.next,
            Srq {
                rq: VecDeque::new(),
                max_wr: init.max_wr,
                limit: 0,
                pd: init.pd,
                users: 0,
            },
        );
        Some(self.next)
    }

    pub(crate) fn get(&self, id: u32) -> Option<&Srq> {
        self.map.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Srq> {
        self.map.get_mut(&id)
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<Srq> {
        self.map.remove(&id)
    }

    /// Take the next receive of queue `id`; true in `.1` when that brought the queue below
    /// its armed limit (the limit is then disarmed, as InfiniBand's is).
    pub(crate) fn take(&mut self, id: u32) -> (Option<RecvWr>, bool) {
        let Some(s) = self.map.get_mut(&id) else {
            return (None, false);
        };
        let r = s.rq.pop_front();
        let low = r.is_some() && s.limit > 0 && s.rq.len() < s.limit as usize;
        if low {
            s.limit = 0;
        }
        (r, low)
    }

    /// Give a receive back to the front of queue `id` (its message was refused).
    pub(crate) fn put_back(&mut self, id: u32, r: RecvWr) {
        if let Some(s) = self.map.get_mut(&id) {
            s.rq.push_front(r);
        }
    }
}
