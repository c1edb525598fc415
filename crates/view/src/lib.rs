//! The live view: what a running command shows in a browser, and the browser for a
//! finished recording.
//!
//! A command publishes into a [`Live`] — each frame's verdict ([`Live::frame`], a few
//! counters under a lock), and at the end its summary ([`Live::end`]) — and serves
//! [`live`]'s routes with `rocelink_web::Server`:
//! * `GET /` one self-contained page (its script and style inline);
//! * `GET /frame.png` the latest good frame as a picture ([`picture`]): made at most every
//!   250 ms (and so that making them costs at most 2% of a core), only while a page looks,
//!   from a copy, on a thread of its own, and skipped while that thread is busy — the
//!   stream never waits for it;
//! * `GET /status.json` the numbers; `GET /events` the same as Server-Sent Events, every
//!   250 ms, then an `end` event with the command's summary.
//!
//! [`recording`] serves a recording the same way, with each frame as a picture or `.npy`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod history;
mod live;
pub mod picture;
mod pictures;
mod recording;
mod routes;
mod served;

pub use live::{Kind, Live, Seen};
pub use pictures::Png;
pub use served::Served;

/// How often a live view makes a picture at most: sessions that copy bytes out for it
/// need hand on no more.
pub const PICTURE_EVERY: std::time::Duration = pictures::Pictures::INTERVAL;
pub use recording::recording;
pub use routes::live;
