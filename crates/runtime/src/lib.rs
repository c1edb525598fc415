//! One driver for every role: runs a sans-IO [`rocelink_transport::Endpoint`] over an I/O
//! backend from `rocelink-io` (`rocelink_io::backend::Backend`: a UDP socket today, the
//! same trait for a raw-Ethernet/AF_XDP backend), batching receives and sends (GSO runs,
//! gather of payloads left in their regions), with an optional pcap tap.
//!
//! `rocelink-io` stays free of the transport; this crate is where the two meet.
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
