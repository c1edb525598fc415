//! A device's state, under the one lock every call and the device's thread take: the
//! endpoint, its driver (socket or AF_XDP port), the CQs armed for an event, and who did the
//! work.

use crate::abi::{
    IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_QP_REQ_ERR,
    IBV_EVENT_SRQ_LIMIT_REACHED,
};
use crate::channel::{Channel, CqEvent};
use rocelink_io::backend::Backend;
use rocelink_io::event::EventFd;
use rocelink_runtime::Driver;
use rocelink_transport::{CqCounts, CqId, Endpoint, ErrorCause, Event};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// An asynchronous event (`ibv_get_async_event`), by the transport's numbers: the program's
/// object is looked up when it is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AsyncEvent {
    /// `enum ibv_event_type`.
    pub(crate) kind: u32,
    /// The QP's number, or the SRQ's id for `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub(crate) id: u32,
}

/// Most asynchronous events kept for the program; more are counted and dropped (a peer
/// must not grow what a program that never reads them holds).
pub(crate) const MAX_ASYNC_EVENTS: usize = 1024;

/// The device's asynchronous events, and the descriptor that counts them (one count per
/// event: a semaphore `eventfd`, readable while any waits).
#[derive(Debug)]
pub(crate) struct AsyncEvents {
    queue: VecDeque<AsyncEvent>,
    pub(crate) fd: Arc<EventFd>,
    /// Events dropped for want of room.
    pub(crate) dropped: u64,
}

impl AsyncEvents {
    fn push(&mut self, e: AsyncEvent) {
        if self.queue.len() >= MAX_ASYNC_EVENTS {
            self.dropped += 1;
            return;
        }
        self.queue.push_back(e);
        let _ = self.fd.signal();
    }

    /// The oldest event (after its count was taken from the descriptor).
    pub(crate) fn pop(&mut self) -> Option<AsyncEvent> {
        self.queue.pop_front()
    }
}

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
    /// Asynchronous events for the program.
    pub(crate) asyncs: AsyncEvents,
    /// Datagrams received by the last of the program's rounds that received any.
    pub(crate) last_app_batch: usize,
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
    /// Times a program's round found an answer come apart from its ACK and the thread
    /// was asked to watch the socket ([`crate::progress::WATCH`]).
    pub watches: u64,
}

impl Core {
    /// The state of a device whose endpoint is `ep`, with no socket yet; its asynchronous
    /// events counted on `async_fd`.
    pub fn new(ep: Endpoint, async_fd: Arc<EventFd>) -> Core {
        Core {
            ep,
            driver: None,
            armed: Vec::new(),
            io_errors: 0,
            work: Work::default(),
            asyncs: AsyncEvents {
                queue: VecDeque::new(),
                fd: async_fd,
                dropped: 0,
            },
            last_app_batch: 0,
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
        self.take_events();
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

    /// Turn the endpoint's events into the program's asynchronous ones: a responder's error
    /// that no completion reports (an invalid request, an access violation), the last WQE
    /// of a QP on a shared receive queue, an SRQ below its limit. The rest (UC messages
    /// damaged, …) have no verbs event and are dropped.
    fn take_events(&mut self) {
        while let Some(e) = self.ep.poll_event() {
            match e {
                Event::QpError { qpn, why } => {
                    let kind = match why {
                        ErrorCause::InvalidRequest => Some(IBV_EVENT_QP_REQ_ERR),
                        ErrorCause::AccessError => Some(IBV_EVENT_QP_ACCESS_ERR),
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        self.asyncs.push(AsyncEvent { kind, id: qpn });
                    }
                    if self.ep.qp_srq(qpn).is_some() {
                        let kind = IBV_EVENT_QP_LAST_WQE_REACHED;
                        self.asyncs.push(AsyncEvent { kind, id: qpn });
                    }
                }
                Event::SrqLimit { srq, .. } => {
                    let kind = IBV_EVENT_SRQ_LIMIT_REACHED;
                    self.asyncs.push(AsyncEvent { kind, id: srq });
                }
                _ => {}
            }
        }
    }

    /// A program's round received `n` datagrams (some): whether they are one after a
    /// round of two or more — an answer that came apart from the ACK it usually comes
    /// with ([`crate::nic::Nic::app_progress`]).
    pub fn answer_apart(&mut self, n: usize) -> bool {
        let apart = n == 1 && self.last_app_batch >= 2;
        self.last_app_batch = n;
        apart
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

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> Core {
        let cfg = rocelink_transport::EndpointConfig::new("127.0.0.1:4791".parse().unwrap());
        let fd = Arc::new(EventFd::new(true, false).unwrap());
        Core::new(Endpoint::new(cfg), fd)
    }

    #[test]
    fn an_answer_apart_is_one_datagram_after_a_round_of_two() {
        let mut c = core();
        // a ping-pong: each round brings an answer and the ACK of the program's request
        let pingpong: Vec<bool> = [2, 2, 2, 1, 1, 2, 3, 1].map(|n| c.answer_apart(n)).into();
        assert_eq!(
            pingpong,
            [false, false, false, true, false, false, false, true]
        );
        // a stream's ACKs, one a round, never
        let mut c = core();
        assert!(!(0..100).any(|_| c.answer_apart(1)));
    }

    #[test]
    fn asynchronous_events_are_bounded_and_counted_on_their_descriptor() {
        let fd = Arc::new(EventFd::new(true, true).unwrap());
        let mut q = AsyncEvents {
            queue: VecDeque::new(),
            fd: fd.clone(),
            dropped: 0,
        };
        for id in 0..(MAX_ASYNC_EVENTS + 6) as u32 {
            q.push(AsyncEvent {
                kind: IBV_EVENT_QP_REQ_ERR,
                id,
            });
        }
        assert_eq!(q.dropped, 6);
        // one count per event kept, in the order they came
        for id in 0..MAX_ASYNC_EVENTS as u32 {
            assert_eq!(fd.take().unwrap(), 1);
            assert_eq!(q.pop().map(|e| e.id), Some(id));
        }
        assert!(fd.take().is_err(), "no count left");
        assert_eq!(q.pop(), None);
    }
}
