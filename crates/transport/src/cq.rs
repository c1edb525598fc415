//! Completion queues (`ibv_cq`): a QP is created with a send CQ and a receive CQ, shared
//! or not, and a role polls only its own.

use crate::wr::WorkCompletion;
use std::collections::VecDeque;

/// A completion queue of an [`crate::Endpoint`] (from [`crate::Endpoint::create_cq`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqId(pub(crate) u32);

impl CqId {
    /// The endpoint's default CQ: what [`crate::Endpoint::poll_completion`] polls, and where
    /// a QP's completions go unless its [`crate::QpInit`] names other CQs.
    pub const DEFAULT: CqId = CqId(0);
}

/// The CQs of an endpoint.
#[derive(Debug)]
pub(crate) struct Cqs(Vec<VecDeque<WorkCompletion>>, u64);

impl Default for Cqs {
    fn default() -> Cqs {
        Cqs(vec![VecDeque::new()], 0)
    }
}

impl Cqs {
    pub(crate) fn create(&mut self) -> CqId {
        self.0.push(VecDeque::new());
        CqId(self.0.len() as u32 - 1)
    }
    pub(crate) fn exists(&self, id: CqId) -> bool {
        (id.0 as usize) < self.0.len()
    }
    /// Queue a completion (a QP's CQs exist: they were checked when it was created).
    pub(crate) fn push(&mut self, id: CqId, wc: WorkCompletion) {
        let i = if self.exists(id) { id.0 as usize } else { 0 };
        self.0[i].push_back(wc);
        self.1 += 1;
    }
    /// Completions queued so far, in all CQs.
    pub(crate) fn pushed(&self) -> u64 {
        self.1
    }
    pub(crate) fn get(&self, id: CqId) -> Option<&VecDeque<WorkCompletion>> {
        self.0.get(id.0 as usize)
    }
    pub(crate) fn get_mut(&mut self, id: CqId) -> Option<&mut VecDeque<WorkCompletion>> {
        self.0.get_mut(id.0 as usize)
    }
}
