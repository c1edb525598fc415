//! The IMS roles as sessions a program starts, watches and stops — the shape every
//! rocelink role has (config → `start` → live counters and events → [`Stopper::stop`] from
//! any thread → a summary), driven alike by the CLI, Python and the web view:
//!
//! * [`unit::UnitSession`] — a buffer unit: a ring per worker, every frame ACKed or NACKed
//!   and handed on in order (as fast as it comes, at a rate, or to a recording), each
//!   frame consumed an event.
//! * [`worker::WorkerSession`] — a worker streaming frames (a pattern, §4 images, a file)
//!   to a buffer unit, sending again what it NACKs or never answers.
//!
//! Each runs on a thread of its own over a UDP socket, in `rocelink-runtime`'s loop.
//! [`view`] (feature `view`) serves a buffer unit's live view in the browser.

pub mod unit;
#[cfg(feature = "view")]
pub mod view;
pub mod worker;

pub use rocelink_runtime::{Session, Stopper};
use std::time::Duration;

/// How often a session publishes its live counters.
pub(crate) const EVERY: Duration = Duration::from_millis(50);
