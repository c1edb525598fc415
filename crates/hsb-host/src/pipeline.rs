//! The frame loop: frames from the receiver to the sinks until a limit or a stop request.

use crate::SessionError;
use crate::sink::{Delivered, FrameSink};
use rocelink_hsb::host::FrameReceiver;
use rocelink_hsb::host::receiver::Receiver;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When [`run`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Limits {
    /// After this many frames (good or damaged).
    pub frames: Option<u64>,
    /// After this long.
    pub seconds: Option<Duration>,
    /// Without a frame for this long: [`SessionError::NoFrame`], naming what was refused.
    pub timeout: Duration,
}

impl Limits {
    /// Until a stop request; an error after 5 s without a frame.
    pub fn unlimited() -> Limits {
        Limits {
            frames: None,
            seconds: None,
            timeout: Duration::from_secs(5),
        }
    }
    /// `n` frames.
    pub fn frames(n: u64) -> Limits {
        Limits {
            frames: Some(n),
            ..Limits::unlimited()
        }
    }
    /// With a duration too.
    pub fn with_seconds(mut self, s: Option<Duration>) -> Limits {
        self.seconds = s;
        self
    }
    /// With another silence timeout.
    pub fn with_timeout(mut self, t: Duration) -> Limits {
        self.timeout = t;
        self
    }
}

/// Why [`run`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum StopReason {
    /// The frame limit.
    Frames,
    /// The duration.
    Seconds,
    /// The stop flag (Ctrl-C, SIGTERM, the application).
    Stopped,
}

/// What [`run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Outcome {
    /// Frames delivered.
    pub frames: u64,
    /// Why it stopped.
    pub stopped: StopReason,
}

/// How long one wait may last: a stop request is seen within this.
const SLICE: Duration = Duration::from_millis(50);

/// Deliver frames from `rx` (the RoCE [`Receiver`], the CoE receiver, any
/// [`FrameReceiver`]) to every sink, in order, until `lim` or `stop`. A sink's error
/// ends the loop. The sinks are not finished (see [`finish`]): the caller may first stop the
/// device.
pub fn run(
    rx: &mut dyn FrameReceiver,
    lim: &Limits,
    stop: &AtomicBool,
    sinks: &mut [&mut dyn FrameSink],
) -> Result<Outcome, SessionError> {
    let start = Instant::now();
    let end = lim.seconds.map(|s| start + s);
    let mut last = start;
    let mut n = 0u64;
    let stopped = loop {
        if lim.frames.is_some_and(|m| n >= m) {
            break StopReason::Frames;
        }
        if stop.load(Ordering::Relaxed) {
            break StopReason::Stopped;
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break StopReason::Seconds;
        }
        if now.duration_since(last) >= lim.timeout {
            return Err(SessionError::NoFrame {
                timeout: lim.timeout,
                after: n,
                why: rx.refusals(),
            });
        }
        let Some(f) = rx.next_frame(SLICE)? else {
            continue;
        };
        last = Instant::now();
        n += 1;
        let stats = rx.stats();
        let d = Delivered {
            report: &f,
            data: rx.frame_data(&f),
            stats: &stats,
            elapsed: start.elapsed(),
            last: lim.frames.is_some_and(|m| n == m),
            source: &*rx,
        };
        for s in sinks.iter_mut() {
            s.frame(&d)?;
        }
    };
    Ok(Outcome { frames: n, stopped })
}

/// Finish every sink (all of them, even after an error; the first error is returned).
pub fn finish(sinks: &mut [&mut dyn FrameSink]) -> Result<(), SessionError> {
    let mut first = None;
    for s in sinks.iter_mut() {
        if let Err(e) = s.finish() {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Why nothing arrived: the datagrams the transport refused, by reason.
pub fn refusals(rx: &Receiver) -> String {
    FrameReceiver::refusals(rx)
}
