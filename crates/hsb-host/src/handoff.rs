//! [`Handoff`]: a sink that passes frames to another thread (a Python loop, a web view)
//! without a copy where the receiver can lend them, and without ever stalling the receiver.

use crate::SessionError;
use crate::sink::{Delivered, FrameSink};
use rocelink_hsb::host::LentFrame;
use rocelink_hsb::host::receiver::{FrameReport, ReceiverStats};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// A frame passed on by a [`Handoff`].
#[derive(Debug)]
pub struct Handed {
    /// The virtual port it came from.
    pub vp: u32,
    /// The verdict and what the device said about the frame.
    pub report: FrameReport,
    /// The receiver's counters when it was delivered.
    pub stats: ReceiverStats,
    /// Time since the receive loop started.
    pub elapsed: Duration,
    /// Its bytes.
    pub data: HandedData,
}

/// Where a handed frame's bytes are.
#[derive(Debug)]
pub enum HandedData {
    /// In the receiver's ring, the page held until this is dropped.
    Lent(LentFrame),
    /// A copy (a receiver that cannot lend).
    Copied(Vec<u8>),
}

impl Handed {
    /// The frame's bytes.
    pub fn data(&self) -> &[u8] {
        match &self.data {
            HandedData::Lent(l) => l.data(),
            HandedData::Copied(v) => v,
        }
    }
}

/// Passes every frame to the [`Taker`] as a [`Handed`]; when the taker is `depth` frames
/// behind, the frame is dropped (and counted) rather than the receiver waiting.
#[derive(Debug)]
pub struct Handoff {
    tx: SyncSender<Handed>,
    dropped: Arc<AtomicU64>,
    vp: u32,
}

/// The other end of a [`Handoff`].
#[derive(Debug)]
pub struct Taker {
    rx: Receiver<Handed>,
    dropped: Arc<AtomicU64>,
}

impl Handoff {
    /// A hand-off at most `depth` frames deep (at least 1), and its taker.
    pub fn new(depth: usize) -> (Handoff, Taker) {
        let (tx, rx) = sync_channel(depth.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let taker = Taker {
            rx,
            dropped: dropped.clone(),
        };
        (Handoff { tx, dropped, vp: 0 }, taker)
    }

    /// Another sink into the same taker, for virtual port `vp` (one per port).
    pub fn for_vp(&self, vp: u32) -> Handoff {
        Handoff {
            tx: self.tx.clone(),
            dropped: self.dropped.clone(),
            vp,
        }
    }
}

impl FrameSink for Handoff {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        let data = match d.lend() {
            Some(l) => HandedData::Lent(l),
            None => HandedData::Copied(d.data.to_vec()),
        };
        let h = Handed {
            vp: self.vp,
            report: d.report.clone(),
            stats: *d.stats,
            elapsed: d.elapsed,
            data,
        };
        match self.tx.try_send(h) {
            Ok(()) => {}
            // the taker is behind: the frame (and its page) goes back at once
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // the taker is gone: nobody wants frames any more
            Err(TrySendError::Disconnected(_)) => {}
        }
        Ok(())
    }
}

/// Why [`Taker::take`] returned no frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeError {
    /// None within the time given.
    Timeout,
    /// The receive loop ended.
    Ended,
}

impl Taker {
    /// The next frame, waiting up to `timeout`.
    pub fn take(&self, timeout: Duration) -> Result<Handed, TakeError> {
        self.rx.recv_timeout(timeout).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => TakeError::Timeout,
            std::sync::mpsc::RecvTimeoutError::Disconnected => TakeError::Ended,
        })
    }

    /// Frames dropped because the taker was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_hsb::host::FrameReceiver;
    use std::io;

    /// A receiver that cannot lend: frames are handed as copies.
    struct NoLend;
    impl FrameReceiver for NoLend {
        fn next_frame(&mut self, _: Duration) -> io::Result<Option<FrameReport>> {
            Ok(None)
        }
        fn frame_data(&self, _: &FrameReport) -> &[u8] {
            &[]
        }
        fn stats(&self) -> ReceiverStats {
            ReceiverStats::default()
        }
        fn refusals(&self) -> String {
            String::new()
        }
    }

    fn report(n: u64) -> FrameReport {
        FrameReport {
            frame_number: n,
            page: 0,
            bytes: 3,
            bytes_expected: 3,
            crc: 0,
            crc_expected: None,
            crc_ok: None,
            psn: 0,
            packets: 1,
            dropped_packets: 0,
            flags: 0,
            sof: (0, 0),
            meta: (0, 0),
            complete: true,
        }
    }

    #[test]
    fn a_taker_behind_costs_dropped_frames_never_a_wait() {
        let (h, taker) = Handoff::new(1);
        let mut vp3 = h.for_vp(3);
        drop(h);
        let (src, stats) = (NoLend, ReceiverStats::default());
        for n in 0..3 {
            let r = report(n);
            let d = Delivered {
                report: &r,
                data: &[1, 2, n as u8],
                stats: &stats,
                elapsed: Duration::ZERO,
                last: false,
                source: &src,
            };
            vp3.frame(&d).unwrap();
        }
        let first = taker.take(Duration::from_millis(10)).unwrap();
        assert_eq!((first.vp, first.report.frame_number), (3, 0));
        assert_eq!(first.data(), &[1, 2, 0]);
        assert_eq!(taker.dropped(), 2);
        assert_eq!(
            taker.take(Duration::from_millis(1)).unwrap_err(),
            TakeError::Timeout
        );
        drop(vp3);
        assert_eq!(
            taker.take(Duration::from_millis(1)).unwrap_err(),
            TakeError::Ended
        );
    }
}
