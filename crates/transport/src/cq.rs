//! Completion queues (`ibv_cq`): a QP is created with a send CQ and a receive CQ, shared
//! or not, and a role polls only its own.

use crate::wr::{WcStatus, WorkCompletion};
use std::collections::VecDeque;

/// A completion queue of an [`crate::Endpoint`] (from [`crate::Endpoint::create_cq`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqId(pub(crate) u32);

impl CqId {
    /// The endpoint's default CQ: what [`crate::Endpoint::poll_completion`] polls, and where
    /// a QP's completions go unless its [`crate::QpInit`] names other CQs.
    pub const DEFAULT: CqId = CqId(0);
}

/// How many completions a CQ was given so far: all, and those an application waiting
/// only for solicited events is woken by (a received message whose sender asked for an
/// event, and every error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CqCounts {
    /// Every completion.
    pub all: u64,
    /// Solicited receives and errors.
    pub solicited: u64,
}

#[derive(Debug, Default)]
struct Cq {
    queue: VecDeque<WorkCompletion>,
    counts: CqCounts,
}

/// The CQs of an endpoint (a destroyed CQ's slot is reused).
#[derive(Debug)]
pub(crate) struct Cqs(Vec<Option<Cq>>, u64);

impl Default for Cqs {
    fn default() -> Cqs {
        Cqs(vec![Some(Cq::default())], 0)
    }
}

impl Cqs {
    pub(crate) fn create(&mut self) -> CqId {
        if let Some(i) = self.0.iter().position(Option::is_none) {
            self.0[i] = Some(Cq::default());
            return CqId(i as u32);
        }
        self.0.push(Some(Cq::default()));
        CqId(self.0.len() as u32 - 1)
    }
    /// Remove CQ `id` (not the default one); its completions are dropped.
    pub(crate) fn destroy(&mut self, id: CqId) -> bool {
        match self.0.get_mut(id.0 as usize) {
            Some(slot @ Some(_)) if id != CqId::DEFAULT => {
                *slot = None;
                true
            }
            _ => false,
        }
    }
    pub(crate) fn exists(&self, id: CqId) -> bool {
        matches!(self.0.get(id.0 as usize), Some(Some(_)))
    }
    /// Queue a completion (a QP's CQs exist: they were checked when it was created, and a
    /// CQ a QP uses is not destroyed).
    pub(crate) fn push(&mut self, id: CqId, wc: WorkCompletion) {
        let i = if self.exists(id) { id.0 as usize } else { 0 };
        if let Some(Some(cq)) = self.0.get_mut(i) {
            cq.counts.all += 1;
            if wc.solicited || wc.status != WcStatus::Success {
                cq.counts.solicited += 1;
            }
            cq.queue.push_back(wc);
        }
        self.1 += 1;
    }
    /// Completions queued so far, in all CQs.
    pub(crate) fn pushed(&self) -> u64 {
        self.1
    }
    pub(crate) fn counts(&self, id: CqId) -> Option<CqCounts> {
        Some(self.0.get(id.0 as usize)?.as_ref()?.counts)
    }
    pub(crate) fn get(&self, id: CqId) -> Option<&VecDeque<WorkCompletion>> {
        Some(&self.0.get(id.0 as usize)?.as_ref()?.queue)
    }
    pub(crate) fn get_mut(&mut self, id: CqId) -> Option<&mut VecDeque<WorkCompletion>> {
        Some(&mut self.0.get_mut(id.0 as usize)?.as_mut()?.queue)
    }
}
