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
//! use rocelink_ultrasound::{Geometry, Host, ShotHostConfig, Probe, ProbeConfig, shot::Echoes};
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
//! let mut host = Host::new(&mut link.b, ShotHostConfig::new(g)).unwrap();
//! let start = TriggerRepr {
//!     command: Command::Start { millihertz: 1_000_000, count: 3 }, // 1 kHz, 3 shots
//!     number: 0, host_ns: 0, qpn: host.qpn(), qkey: ShotHostConfig::new(g).qkey,
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
pub mod session;
pub mod shot;
pub mod sink;

pub use gate::{Gate, GateConfig, GateStats, Prefix, Verdict};
pub use host::{Host, HostStats, ShotHostConfig, ShotReport};
pub use probe::{Probe, ProbeConfig, ProbeStats};
pub use shot::Geometry;
pub use sink::{Outcome, ShotSink, SinkStats};

use rocelink_transport::{Endpoint, Mtu, QpError};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A shot shape that cannot be packed.
    #[error(
        "shot of {samples} samples x {channels} channels: both must be at least 1 and channels even (two 12-bit samples pack into 3 bytes)"
    )]
    Shape {
        /// Samples per channel asked for.
        samples: u32,
        /// Channels asked for.
        channels: u16,
    },
    /// A message size UD cannot carry.
    #[error("message size {0}: must be 64 to 4096 bytes in steps of 64")]
    MessageSize(u32),
    /// More messages than the immediate's message number can count.
    #[error("a shot of {bytes} bytes needs {messages} messages of {message} bytes; at most {max}")]
    TooManyMessages {
        /// Shot bytes.
        bytes: usize,
        /// Messages it needs.
        messages: u64,
        /// Bytes per message.
        message: u32,
        /// The most a shot may have.
        max: u32,
    },
    /// A host with too few buffers to work.
    #[error(
        "host: at least 2 shot buffers, 1 posted receive, 1 bounce buffer and a reorder window of 1"
    )]
    HostBuffers,
    /// A window of shots accepted ahead outside what the host can hold.
    #[error("host: shots accepted ahead {ahead}: from the reorder window ({reorder}) to 16384")]
    Ahead {
        /// Asked for.
        ahead: u64,
        /// The reorder window, the least it may be.
        reorder: u64,
    },
    /// Shot buffers that do not fit the address space.
    #[error("host: {buffers} shot buffers of {stride} bytes are too large")]
    BuffersTooLarge {
        /// Buffers asked for.
        buffers: usize,
        /// Bytes each.
        stride: usize,
    },
    /// A receive's scatter list (GRH slot and shot bytes) the transport does not take.
    #[error("a receive's scatter list does not fit the transport's limit")]
    ScatterList,
    /// A pacing rate that is not a positive number.
    #[error("link rate {0} Gbit/s: must be more than 0")]
    Rate(f64),
    /// The transport refused a QP operation.
    #[error("transport")]
    Transport(#[from] QpError),
    /// A link's socket could not be opened (the source names the address and who holds it).
    #[error("link {link}")]
    Bind {
        /// The link.
        link: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A link's socket failed while running.
    #[error("link {link}")]
    Io {
        /// The link.
        link: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A UD message larger than the path MTU: the interfaces need jumbo frames.
    #[error(
        "link {link}: a {bytes}-byte message does not fit the path MTU: UD messages travel whole, so the interfaces need an MTU of at least {} (jumbo frames)",
        bytes + 100
    )]
    MessageTooBig {
        /// The link.
        link: usize,
        /// Message bytes.
        bytes: u32,
        /// The send error.
        #[source]
        source: std::io::Error,
    },
    /// The recorder could not start or finish.
    #[error("link {link}: recording")]
    Record {
        /// The link.
        link: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A host that triggers needs one probe address per link.
    #[error("{probes} probe trigger address(es) for {links} link(s): one per link")]
    Probes {
        /// Probe addresses given.
        probes: usize,
        /// Links.
        links: usize,
    },
    /// No shot came back from the probe at all.
    #[error(
        "no shot of {samples} samples came back from the probe at {probe} within {timeout:?}: is `rocelink probe` running there?"
    )]
    NoShot {
        /// Shot size.
        samples: u32,
        /// The probe's trigger address.
        probe: std::net::SocketAddr,
        /// How long each trigger waited.
        timeout: std::time::Duration,
    },
    /// A link's thread panicked (a bug).
    #[error("link {0}: its thread panicked")]
    Panicked(usize),
}

/// Bring UD QP `qpn` to RTS with Q_Key `qkey` (4096-byte messages).
fn ud_ready(ep: &mut Endpoint, qpn: u32, qkey: u32) -> Result<(), QpError> {
    ep.ready_qp(qpn, qkey, None, 0, Mtu::M4096)
}
