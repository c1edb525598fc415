//! Test fixtures shared by rocelink's crates (a dev-dependency only).
//!
//! * [`emulator`] — an HSB emulator that is ready when started: in this process
//!   ([`emulator::Running`]: bound before the call returns) or as a `rocelink emulate`
//!   process ([`emulator::Process`]: returned once its banner says it has bound its ports).
//!   Tests never sleep to wait for a device.
//! * [`netns`] — two network namespaces joined by a veth pair, nftables rules in them, and
//!   the checks that skip (or, in CI, fail) when root or a tool is missing.
//! * [`browser`] — headless Chromium driven over the DevTools protocol (the live view's
//!   page checked as a user's browser shows it).
//! * [`faults`] — losses, duplicates, swaps and corruption applied to a packet list, and
//!   the list sent in segmented runs (the fast receive paths against the copying ones).
//! * [`camera`] — an HSB virtual port's stream of pattern frames as packets, for a test to
//!   deliver whole, with faults or replayed.
//! * [`callgrind`] — a test's own child test run under callgrind, its instructions counted.
//! * [`Rng`] — the seeded generator of the transport's simulator, for every randomised test.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![allow(clippy::unwrap_used)]

pub mod browser;
pub mod callgrind;
pub mod camera;
pub mod emulator;
pub mod faults;
pub mod netns;
pub mod ports;

pub use rocelink_transport::sim::Rng;
