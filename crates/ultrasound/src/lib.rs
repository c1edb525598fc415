//! Ultrafast ultrasound shots over RoCE v2 UD SEND (seed `004`), sans-IO over the rocelink
//! transport.
//!
//! * [`Probe`] — the emulated probe: a trigger command (a 64-byte UDP packet,
//!   [`rocelink_wire::ultrasound::TriggerRepr`]) or its own periodic trigger makes it take a
//!   shot of 12-bit samples ([`shot::Echoes`], deterministic from a seed and the shot number)
//!   and send it as UD SEND messages of up to 4096 bytes, numbered in the immediate.
//! * [`Host`] — the receiver: the shots land contiguous in shot buffers, the GRH slot of
//!   every receive discarded by a scatter list, and are handed on in order, complete or with
//!   what was missing. Loss, duplication and reordering cost copies of the messages they
//!   displace, never a wrong byte.
//!
//! ```
//! use rocelink_transport::{sim, Endpoint, EndpointConfig};
//! use rocelink_ultrasound::{Geometry, Host, HostConfig, Probe, ProbeConfig, shot::Echoes};
//! use rocelink_wire::ultrasound::{Command, TriggerRepr};
//! use std::time::{Duration, Instant};
//!
//! let g = Geometry::new(500, 96); // 72 000 bytes: 18 messages
//! let (pa, ha) = ("10.0.0.1:4791".parse().unwrap(), "10.0.0.2:4791".parse().unwrap());
//! let mut link = sim::Pair::new(
//!     Endpoint::new(EndpointConfig::new(pa)),
//!     Endpoint::new(EndpointConfig::new(ha)),
//!     sim::LinkConfig::default(), 1, Instant::now());
//! let mut probe = Probe::new(&mut link.a, ProbeConfig::new(g)).unwrap();
//! let mut host = Host::new(&mut link.b, HostConfig::new(g)).unwrap();
//! let start = TriggerRepr {
//!     command: Command::Start { millihertz: 1_000_000, count: 3 }, // 1 kHz, 3 shots
//!     number: 0, host_ns: 0, qpn: host.qpn(), qkey: HostConfig::new(g).qkey,
//!     port: 4791, samples: 0, channels: 0, cookie: 0,
//! };
//! probe.handle_trigger(link.now, &start, ha.ip());
//! let mut good = 0;
//! let echoes = Echoes::new(1);
//! for _ in 0..100_000 {
//!     let now = link.now;
//!     probe.poll(&mut link.a, now).unwrap();
//!     host.poll(&mut link.b, now, &mut |r, bytes| {
//!         good += usize::from(bytes.is_some_and(|b| echoes.first_difference(&g, r.shot, b).is_none()));
//!     }).unwrap();
//!     if good == 3 || !link.step_until(probe.poll_timeout()) { break; }
//! }
//! assert_eq!(good, 3);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod gate;
pub mod host;
pub mod probe;
pub mod run;
pub mod shot;
pub mod sink;

pub use gate::{Gate, GateConfig, GateStats, Prefix, Verdict};
pub use host::{Host, HostConfig, HostStats, ShotReport};
pub use probe::{Probe, ProbeConfig, ProbeStats};
pub use shot::Geometry;
pub use sink::{Outcome, ShotSink, SinkStats};

use rocelink_transport::{Endpoint, Mtu, QpError};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting that cannot work.
    #[error("{0}")]
    Config(String),
    /// The transport refused a QP operation.
    #[error("transport: {0}")]
    Transport(#[from] QpError),
}

/// Bring UD QP `qpn` to RTS with Q_Key `qkey` (4096-byte messages).
fn ud_ready(ep: &mut Endpoint, qpn: u32, qkey: u32) -> Result<(), QpError> {
    ep.ready_qp(qpn, qkey, None, 0, Mtu::M4096)
}
