//! A device's state, under the one lock every call and the device's thread take: the
//! endpoint, its driver (socket or AF_XDP port), the CQs armed for an event, and who did the
//! work.

use crate::channel::{Channel, CqEvent};
use rocelink_io::backend::Backend;
use rocelink_runtime::Driver;
use rocelink_transport::{CqCounts, CqId, Endpoint};
use std::sync::Arc;
use std::time::Instant;

/// A CQ armed for one event (`ibv_req_notify_cq`).
#[derive(Debug)]
pub(crate) struct Armed {
    cq: CqId,
    solicited_only: bool,
    at: CqCounts,
    channel: Arc<Channel>,
    event: CqEvent,
}

/// The state every call and the thread share, under one lock.
#[derive(Debug)]
pub struct Core {
    /// The endpoint: regions, QPs, CQs.
    pub ep: Endpoint,
    pub(crate) driver: Option<Driver<Box<dyn Backend + Send>>>,
    pub(crate) armed: Vec<Armed>,
    /// I/O errors seen while progressing (the socket keeps going).
    pub io_errors: u64,
    /// Who did the work.
    pub work: Work,
}

/// Who ran the endpoint, and how much came of it: the program's calls or the device's
/// thread (`ROCELINK_VERBS_STATS=1` prints them when the device closes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Rounds run by the program's calls.
    pub app_rounds: u64,
    /// Datagrams those received.
    pub app_datagrams: u64,
    /// Rounds run by the thread.
    pub thread_rounds: u64,
    /// Datagrams those received.
    pub thread_datagrams: u64,
}

impl Core {
    /// The state of a device whose endpoint is `ep`, with no socket yet.
    pub fn new(ep: Endpoint) -> Core {
        Core {
            ep,
            driver: None,
            armed: Vec::new(),
            io_errors: 0,
            work: Work::default(),
        }
    }

    /// Run the endpoint once without waiting (timers, sends, one batch of receives), then
    /// wake the CQs whose event came. Returns the datagrams handled and whether every
    /// datagram went out.
    pub fn progress(&mut self, now: Instant) -> (usize, bool) {
        let r = match self.driver.as_mut() {
            Some(d) => d.progress(&mut self.ep, now).unwrap_or_else(|_| {
                self.io_errors += 1;
                (0, true)
            }),
            None => (0, true),
        };
        self.settle();
        r
    }

    /// Send what is ready (after a post), without receiving.
    pub fn transmit(&mut self, now: Instant) {
        if let Some(d) = self.driver.as_mut()
            && d.transmit(&mut self.ep, now).is_err()
        {
            self.io_errors += 1;
        }
        self.settle();
    }

    /// Wake every armed CQ that got a completion it waits for since it was armed.
    pub fn settle(&mut self) {
        let ep = &self.ep;
        self.armed.retain(|a| {
            let now = ep.cq_counts(a.cq).unwrap_or_default();
            let due = if a.solicited_only {
                now.solicited > a.at.solicited
            } else {
                now.all > a.at.all
            };
            if due {
                a.channel.push(a.event);
            }
            !due
        });
    }

    /// Arm `cq` for one event on `channel` (again: once).
    pub fn arm(&mut self, cq: CqId, solicited_only: bool, channel: Arc<Channel>, event: CqEvent) {
        let at = self.ep.cq_counts(cq).unwrap_or_default();
        if let Some(a) = self.armed.iter_mut().find(|a| a.cq == cq) {
            // armed twice: the weaker request (any completion) wins
            a.solicited_only &= solicited_only;
            return;
        }
        self.armed.push(Armed {
            cq,
            solicited_only,
            at,
            channel,
            event,
        });
    }

    /// Forget `cq`'s arming (it is being destroyed).
    pub fn disarm(&mut self, cq: CqId) {
        self.armed.retain(|a| a.cq != cq);
    }

    /// CQs armed.
    pub fn armed(&self) -> usize {
        self.armed.len()
    }

    /// Whether the socket is open.
    pub fn has_io(&self) -> bool {
        self.driver.is_some()
    }

    /// The earliest timer.
    pub fn next_timer(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }
}
