//! Completion channels: a descriptor the application sleeps on (`read` in
//! `ibv_get_cq_event`, or its own `poll`/`epoll`) and the queue of CQs that have an event.
//! The descriptor is an eventfd counting the events queued, one per read.

use rocelink_io::event::EventFd;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;

/// One CQ's event: the `ibv_cq` pointer and its `cq_context`, as `ibv_get_cq_event`
/// returns them (addresses: only handed back to the application).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEvent {
    /// The `struct ibv_cq *`.
    pub cq: usize,
    /// Its `cq_context`.
    pub context: usize,
}

/// A completion channel.
#[derive(Debug)]
pub struct Channel {
    fd: EventFd,
    events: Mutex<VecDeque<CqEvent>>,
}

impl Channel {
    /// A channel whose reads block until an event comes (as a real one's do; the
    /// application may make its descriptor non-blocking).
    pub fn new() -> io::Result<Channel> {
        Ok(Channel {
            fd: EventFd::new(true, false)?,
            events: Mutex::new(VecDeque::new()),
        })
    }

    /// The descriptor the application waits on.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Queue `e` and wake a waiter.
    pub fn push(&self, e: CqEvent) {
        if let Ok(mut q) = self.events.lock() {
            q.push_back(e);
        }
        // a full counter (2^64 - 2 events) cannot happen: each is read once
        let _ = self.fd.signal();
    }

    /// The next event: waits for one unless the descriptor is non-blocking (then
    /// `WouldBlock`).
    pub fn next(&self) -> io::Result<CqEvent> {
        self.fd.take()?;
        self.events
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
            .ok_or_else(|| io::Error::from(io::ErrorKind::WouldBlock))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_order_and_the_fd_counts_them() {
        let c = Channel::new().unwrap();
        c.push(CqEvent { cq: 1, context: 10 });
        c.push(CqEvent { cq: 2, context: 20 });
        let fd = c.fd();
        assert!(
            rocelink_io::udp::wait_readable_any(&[fd], Some(std::time::Duration::ZERO)).unwrap()
        );
        assert_eq!(c.next().unwrap(), CqEvent { cq: 1, context: 10 });
        assert_eq!(c.next().unwrap(), CqEvent { cq: 2, context: 20 });
        assert!(
            !rocelink_io::udp::wait_readable_any(&[fd], Some(std::time::Duration::ZERO)).unwrap()
        );
    }
}
