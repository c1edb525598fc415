//! One driver for every role: runs a sans-IO [`rocelink_transport::Endpoint`] over an I/O
//! backend from `rocelink-io` (`rocelink_io::backend::Backend`: a UDP socket today, the
//! same trait for a raw-Ethernet/AF_XDP backend), batching receives and sends (GSO runs,
//! gather of payloads left in their regions), with an optional pcap tap.
//!
//! `rocelink-io` stays free of the transport; this crate is where the two meet.
//!
//! * [`driver`] — [`Driver`]: a sans-IO endpoint over any backend: batched receive,
//!   segmented runs, payloads sent from their regions, the pcap tap.
//! * [`landing`] — receiving straight into a role's memory, the checks left to the
//!   transport.
//! * [`run`] — a sans-IO role's loop over the driver (`Role`, `drive`).
//! * [`session`] — the contract every role's session follows (config, start, progress,
//!   events, a [`Stopper`], summary), [`follow`], and the shared pieces of their
//!   summaries.
//! * [`stop`] — [`Stopper`], how any thread ends a session.
//! * [`counters`] — Coyote's counter table per link and QP (JSON, Prometheus text), and a
//!   `Board` drivers publish to about every 100 ms; [`control`] the socket `rocelink stats`
//!   reads it from.
//! * [`bind`] — a role's RoCE socket (`bind_roce`, with the loopback fallback) and
//!   `BackendChoice::open` (a socket or an AF_XDP port, one call for every role).
//! * [`xdp`] — `XdpPort`: an AF_XDP socket joined to the netstack, its UDP ports backends
//!   with each datagram's real IPv4 header.
//! * [`notes`] — what a role tells its front end on the way, without printing.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bind;
pub mod control;
pub mod counters;
pub mod driver;
pub mod landing;
pub mod notes;
pub mod run;
pub mod session;
pub mod stop;
pub mod xdp;

pub use bind::{BackendChoice, RoceBackend, bind_roce, roce_config};
pub use driver::{Driver, DriverStats, Predictor};
pub use landing::{Handled, LandingRx, LandingStats, Plan};
pub use notes::Notes;
pub use run::{Role, RunOpts, drive};
pub use session::{NoEvent, Session, follow};
pub use stop::{SessionThread, Stopper};
