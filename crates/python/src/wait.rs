//! The one wait every iterator of the package does: for the next item of a session, in
//! short slices with the GIL released, so Ctrl-C is seen between slices.

use crate::errors::TimeoutError;
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// How long one wait without the GIL lasts before signals are checked.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// What an iterator does besides taking items.
pub(crate) struct Waiting<'a> {
    /// Give up after this long without an item.
    pub(crate) timeout: Duration,
    /// Ctrl-C: stop the session cleanly (its error, if any, gives way to the interrupt).
    pub(crate) interrupted: &'a dyn Fn(Python<'_>),
    /// The session ended by itself: sum up (its error is raised).
    pub(crate) ended: &'a dyn Fn(Python<'_>) -> PyResult<()>,
    /// The message of the `rocelink.TimeoutError`.
    pub(crate) late: &'a dyn Fn() -> String,
}

/// The next item: `poll(slice)` waits at most `slice` (the GIL released) and says what
/// came and whether the session has ended. `None` once it ended.
pub(crate) fn next_item<T: Send>(
    py: Python<'_>,
    w: &Waiting<'_>,
    poll: impl Fn(Duration) -> (Option<T>, bool) + Sync,
) -> PyResult<Option<T>> {
    let end = Instant::now() + w.timeout;
    loop {
        let slice = SLICE.min(end.saturating_duration_since(Instant::now()));
        let (item, finished) = py.detach(|| poll(slice));
        if let Some(t) = item {
            return Ok(Some(t));
        }
        if let Err(e) = py.check_signals() {
            (w.interrupted)(py);
            return Err(e);
        }
        if finished {
            (w.ended)(py)?;
            return Ok(None);
        }
        if Instant::now() >= end {
            return Err(TimeoutError::new_err((w.late)()));
        }
    }
}
