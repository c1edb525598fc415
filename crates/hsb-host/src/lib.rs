//! The frame pipeline above the transport: receive → verdict → sinks.
//!
//! [`run`] takes frames from an HSB [`Receiver`] until a frame count, a duration, or a stop
//! request, and hands each — its verdict and its bytes, borrowed from the ring — to every
//! [`FrameSink`]: the recorder ([`RecordSink`]), a PNG of the latest good frame
//! ([`SnapshotSink`]), JSON lines or text lines on any writer ([`JsonLines`], [`Lines`]),
//! or the application's own code (any `FnMut(&Delivered) -> Result<(), SessionError>`).
//! [`finish`] then finishes every sink (the recording is made durable). Errors are typed
//! ([`SessionError`]) and the loop says why it stopped ([`StopReason`]).
//!
//! ```no_run
//! use rocelink_hsb_host::{Delivered, FrameSink, Limits, SessionError, finish, run};
//! # fn f(rx: &mut rocelink_hsb::host::receiver::Receiver) -> Result<(), SessionError> {
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! let mut good = 0u64;
//! let mut count = |d: &Delivered<'_>| -> Result<(), SessionError> {
//!     good += u64::from(d.report.good());
//!     Ok(())
//! };
//! let mut lines = rocelink_hsb_host::Lines::new(std::io::stdout());
//! let mut sinks: [&mut dyn FrameSink; 2] = [&mut count, &mut lines];
//! let out = run(rx, &Limits::frames(100), &stop, &mut sinks)?;
//! finish(&mut sinks)?;
//! println!("{} frames, stopped by {:?}", out.frames, out.stopped);
//! # Ok(()) }
//! ```
#![cfg_attr(not(fuzzing), warn(missing_docs))]
#![forbid(unsafe_code)]

mod handoff;
mod meta;
mod pipeline;
mod port;
pub mod session;
mod sink;
#[cfg(feature = "view")]
pub mod view;

pub use handoff::{Handed, HandedData, Handoff, TakeError, Taker};
pub use meta::{frame_json, frame_line, frame_meta, record_header};
pub use pipeline::{Limits, Outcome, StopReason, finish, refusals, run};
pub use rocelink_hsb::host::receiver::Receiver;
pub use sink::{Delivered, FrameSink, JsonLines, Lines, RecordSink, SnapshotSink};
#[cfg(feature = "view")]
pub use view::ViewSink;

/// What can go wrong above the transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The receiver's socket or a sink's file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Nothing arrived for `timeout`.
    #[error("no frame within {timeout:?} (after {after} frames); {why}")]
    NoFrame {
        /// How long the loop waited.
        timeout: std::time::Duration,
        /// Frames before the silence.
        after: u64,
        /// What the transport refused meanwhile, by reason.
        why: String,
    },
    /// A sink could not take a frame.
    #[error("{sink}: {message}")]
    Sink {
        /// Which sink.
        sink: String,
        /// What went wrong.
        message: String,
    },
}
