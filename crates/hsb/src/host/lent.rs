//! A frame lent to the application: its bytes stay in the ring page, and the receiver
//! writes nothing into that page until the frame is dropped.

use super::tracker::FrameReport;
use rocelink_io::shared::SharedView;
use rocelink_transport::Holds;
use std::sync::Arc;

/// A received frame whose page the application holds ([`super::receiver::Receiver::lend`]):
/// its bytes cannot change while it lives — a frame the device sends into the page
/// meanwhile is refused (counted in `held_packets`) — and the page returns to the ring when
/// it is dropped, from any thread. It keeps the ring memory allocated, even past the
/// receiver.
#[derive(Debug)]
pub struct LentFrame {
    /// The verdict and what the device said about the frame.
    pub report: FrameReport,
    view: SharedView,
    holds: Arc<Holds>,
}

impl LentFrame {
    pub(super) fn new(report: FrameReport, view: SharedView, holds: Arc<Holds>) -> LentFrame {
        LentFrame {
            report,
            view,
            holds,
        }
    }

    /// The frame's bytes in the ring.
    pub fn data(&self) -> &[u8] {
        self.view.as_slice()
    }

    /// Its first byte, for a foreign view (a numpy array): valid for `data().len()` bytes
    /// while this frame lives.
    pub fn as_ptr(&self) -> *const u8 {
        self.view.as_ptr()
    }
}

impl Drop for LentFrame {
    fn drop(&mut self) {
        self.holds.release(self.report.page as usize);
    }
}
