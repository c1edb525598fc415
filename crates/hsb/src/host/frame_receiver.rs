//! [`FrameReceiver`]: what a frame pipeline needs of a receiver (the RoCE receiver and the
//! CoE receiver are one), as distinct from the frames a role sends (`ims::FrameSource`).

use super::receiver::{FrameReport, Receiver, ReceiverStats};
use std::io;
use std::time::Duration;

/// Where verified frames come from: the RoCE [`Receiver`] or the
/// [`CoeReceiver`](super::coe_receiver::CoeReceiver).
pub trait FrameReceiver {
    /// Wait up to `timeout` for the next frame (good or damaged).
    fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>>;
    /// The bytes of a frame just reported (valid until the next `next_frame`).
    fn frame_data(&self, f: &FrameReport) -> &[u8];
    /// Counters so far.
    fn stats(&self) -> ReceiverStats;
    /// Why nothing arrived: what was received and refused, in words.
    fn refusals(&self) -> String;
    /// Lend a frame just reported without a copy, if this receiver can
    /// ([`Receiver::lend`]).
    fn lend(&self, _f: &FrameReport) -> Option<super::LentFrame> {
        None
    }
}

impl FrameReceiver for Receiver {
    fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>> {
        Receiver::next_frame(self, timeout)
    }
    fn frame_data(&self, f: &FrameReport) -> &[u8] {
        Receiver::frame_data(self, f)
    }
    fn stats(&self) -> ReceiverStats {
        self.stats
    }
    fn lend(&self, f: &FrameReport) -> Option<super::LentFrame> {
        Receiver::lend(self, f)
    }
    /// The datagrams the transport refused, by reason.
    fn refusals(&self) -> String {
        let rx = self;
        let (e, q) = rx.transport_stats();
        if e.rx_datagrams == 0 {
            return "no RoCE datagram arrived".into();
        }
        let mut why = Vec::new();
        for (n, what) in [
            (e.unknown_qp, "for another QP"),
            (q.access_violations, "refused by R_Key or bounds"),
            (e.icrc_errors, "with a bad ICRC"),
            (e.malformed, "malformed"),
            (e.pkey_errors, "with a wrong P_Key"),
            (q.drops, "dropped by the QP (wrong sender or opcode)"),
        ] {
            if n > 0 {
                why.push(format!("{n} {what}"));
            }
        }
        format!(
            "{} datagrams arrived{}",
            e.rx_datagrams,
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.join(", "))
            }
        )
    }
}
