//! The RC congestion window: how many packets may be in flight beyond the oldest
//! unacknowledged one, below the QP's configured window.
//!
//! Go-back-N resends everything from a lost packet on. A peer that drops because it cannot
//! keep up (Linux rxe on a slow CPU, a switch queue) answers such a burst with another
//! sequence NAK, and a fixed 1024-packet window then resends ~1000 packets per NAK, for
//! ever. So the window reacts as TCP's does (RFC 5681 in packets, one cut per loss event as
//! NewReno's recovery point): it starts at [`INITIAL`], doubles each round trip while ACKs
//! come back clean (slow start, up to the threshold), then grows by one packet per window;
//! a sequence NAK halves it, a retransmit timeout sets it to [`MIN`]. Packet loss alone
//! thus costs throughput, never progress; on a clean link the window reaches the configured
//! one within a few round trips.

use rocelink_wire::ib::psn;

/// Packets in flight at the start.
pub(crate) const INITIAL: u32 = 32;
/// Packets in flight at the least.
pub(crate) const MIN: u32 = 2;

/// Congestion state of one requester.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cwnd {
    /// Packets that may be in flight.
    pub(crate) cwnd: u32,
    /// Slow start below this.
    ssthresh: u32,
    /// Packets acknowledged towards the next additive increase.
    acked: u32,
    /// A loss event is being recovered until this PSN is acknowledged: later NAKs and
    /// timeouts of the same event do not cut again.
    recover: Option<u32>,
    /// Times the window was cut.
    pub(crate) cuts: u64,
}

impl Default for Cwnd {
    fn default() -> Self {
        Cwnd {
            cwnd: INITIAL,
            ssthresh: u32::MAX,
            acked: 0,
            recover: None,
            cuts: 0,
        }
    }
}

impl Cwnd {
    /// `n` more packets were acknowledged, the oldest unacknowledged now `una`; `cap` is
    /// the configured window.
    pub(crate) fn on_ack(&mut self, n: u32, una: u32, cap: u32) {
        if self.recover.is_some_and(|r| psn::diff(una, r) >= 0) {
            self.recover = None;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(n);
        } else {
            self.acked += n;
            while self.acked >= self.cwnd {
                self.acked -= self.cwnd;
                self.cwnd += 1;
            }
        }
        self.cwnd = self.cwnd.min(cap.max(MIN));
    }

    /// A sequence NAK (`timeout` false) or a retransmit timeout; `sent_end` is one past the
    /// last PSN sent. Returns whether the window was cut (once per loss event).
    pub(crate) fn on_loss(&mut self, timeout: bool, sent_end: u32) -> bool {
        if self.recover.is_some() && !timeout {
            return false;
        }
        self.ssthresh = (self.cwnd / 2).max(MIN);
        self.cwnd = if timeout { MIN } else { self.ssthresh };
        self.acked = 0;
        self.recover = Some(psn::sub1(sent_end));
        self.cuts += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_then_grows_by_one_per_window() {
        let mut c = Cwnd::default();
        let mut una = 0;
        // one window acknowledged per round trip: 32 → 64 → 128
        for want in [64, 128] {
            una += c.cwnd;
            c.on_ack(c.cwnd, una, 1024);
            assert_eq!(c.cwnd, want);
        }
        assert!(c.on_loss(false, una + 128));
        assert_eq!(c.cwnd, 64);
        // congestion avoidance: a whole window of ACKs adds one packet
        una += 129;
        c.on_ack(64, una, 1024);
        assert_eq!(c.cwnd, 65);
        c.on_ack(64, una + 64, 1024);
        assert_eq!(c.cwnd, 65);
        c.on_ack(1, una + 65, 1024);
        assert_eq!(c.cwnd, 66);
    }

    #[test]
    fn one_cut_per_loss_event_and_a_timeout_falls_to_the_minimum() {
        let mut c = Cwnd::default();
        assert!(c.on_loss(false, 100));
        assert_eq!(c.cwnd, 16);
        // more NAKs for the same burst: no further cut
        assert!(!c.on_loss(false, 100));
        assert_eq!(c.cwnd, 16);
        // the burst is acknowledged: the next loss is a new event
        c.on_ack(16, 100, 1024);
        assert!(c.on_loss(false, 200));
        assert_eq!(c.cuts, 2);
        // a timeout always cuts, to the minimum
        assert!(c.on_loss(true, 200));
        assert_eq!(c.cwnd, MIN);
    }

    #[test]
    fn never_above_the_configured_window_nor_below_the_minimum() {
        let mut c = Cwnd::default();
        c.on_ack(10_000, 10_000, 100);
        assert_eq!(c.cwnd, 100);
        for i in 0..40 {
            c.on_loss(true, 20_000 + i);
        }
        assert_eq!(c.cwnd, MIN);
        // wraps around the 24-bit PSN space
        c.on_ack(5, 3, 100);
        assert!(c.cwnd >= MIN);
    }
}
