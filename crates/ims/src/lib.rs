//! The IMS streaming protocol (seed `001`): rasterizer *workers* stream frames into the
//! ring buffer of a *buffer unit* (WCU.BUF) over RoCE.
//!
//! * **Status channel** — status packets (Table 3.1) over UD SEND to the buffer unit's
//!   fixed QPN and Q_Key: STAT_REQ/RES introduce a worker, DATA_REQ/RES set up its data
//!   channel, DATA_TERM/DOWN and STAT_TERM/DOWN take them down.
//! * **Data channel** — frames as UC RDMA WRITE messages into a ring buffer that spans the
//!   whole 64-bit VA space, each answered with an ACK or a NACK (Table 3.5) over UC SEND;
//!   the worker retransmits as Table 3.4 says.
//!
//! Both roles are sans-IO over a [`rocelink_transport::Endpoint`]: [`Unit`] and [`Worker`]
//! take the time as an argument, are driven by `poll`, and say when they next need to run
//! (`poll_timeout`). [`run`] drives them over UDP with `rocelink-runtime`; the transport's
//! simulator drives them in tests.
//!
//! Names follow the two roles, one scheme: the sans-IO [`Unit`] and [`Worker`] with their
//! [`UnitConfig`], [`WorkerConfig`] and counters ([`UnitStats`], [`WorkerStats`]); the
//! sessions that run them on threads of their own, [`session::unit::UnitSession`] and
//! [`session::worker::WorkerSession`], with a `…SessionConfig`, a `…Progress` and a
//! `…Summary` each. The CLI's `ims serve` and `ims send`, and Python's `ims.BufferUnit`
//! and `ims.Worker`, are those sessions.
//!
//! # Example
//!
//! A worker streams ten frames to a buffer unit over the transport's simulated link; the
//! application's consumer sees each frame once, in order, checked:
//!
//! ```
//! use rocelink_ims::{Frame, PatternSource, Unit, UnitConfig, Worker, WorkerConfig};
//! use rocelink_transport::sim::{LinkConfig, Pair};
//! use rocelink_transport::{Endpoint, EndpointConfig};
//! use std::time::{Duration, Instant};
//!
//! let server_addr = "10.0.0.2:4791".parse().unwrap();
//! let mut a = Endpoint::new(EndpointConfig::new("10.0.0.1:4791".parse().unwrap()));
//! let mut b = Endpoint::new(EndpointConfig::new(server_addr));
//! let cfg = UnitConfig { ring_bytes: 1 << 20, ..UnitConfig::default() };
//! let mut server = Unit::new(&mut b, cfg).unwrap();
//! let wcfg = WorkerConfig { timeout: Duration::from_millis(50), ..WorkerConfig::new(server_addr) };
//! let mut worker = Worker::new(&mut a, wcfg, 64 * 1024).unwrap();
//! let mut source = PatternSource::new(64 * 1024, Some(10)).unwrap();
//! let mut link = Pair::new(a, b, LinkConfig::default(), 1, Instant::now());
//! let mut seen = Vec::new();
//! for _ in 0..100_000 {
//!     let now = link.now;
//!     server.poll(&mut link.b, now, &mut |f: &Frame<'_>| seen.push((f.va, f.intact)));
//!     worker.poll(&mut link.a, now, &mut source);
//!     if worker.finished() || !link.step_until(worker.poll_timeout()) {
//!         break;
//!     }
//! }
//! assert_eq!(worker.stats().frames, 10);
//! assert_eq!(seen.len(), 10);
//! assert!(seen.iter().all(|&(_, intact)| intact));
//! ```
//!
//! # RoCE mapping
//! * RoCE v2 has no LIDs. The LID field of a status packet carries the sender's IPv4 address
//!   (big-endian); the buffer unit keys its worker table by (LID, QPN) as the specification
//!   says and answers to the address the request came from.
//! * Both directions of a data channel start at PSN 0 (status packets carry no PSN).
//! * Service levels: the status and data channels keep the separate service levels the
//!   specification's fabric configuration gives them (SL0 and SL1), carried as the DSCP
//!   ([`ServiceLevels`]: SL n is the class selector CSn).
//! * DATA_RES carries the buffer unit's data QPN in its QPND field (the worker addresses its
//!   WRITEs to it), with the ring's R_Key and the first VA to write (VA_OFFS).
//! * The write window is `[read pointer, read pointer + ring size)`: the transport checks a
//!   frame's whole range against it when its first packet arrives, so a frame that wraps
//!   past the ring's end is accepted and continues at the ring's start.
//! * EBF/EBP: a sender marks a bad frame or packet in the BTH's reserved bits after AckReq
//!   (bit 0 EBP, bit 1 EBF; [`rocelink_wire::ims::marks`]), which the ICRC covers. The buffer
//!   unit honours those bits ([`rocelink_transport::WriteRules::marks`]) and NACKs the frame
//!   with the matching cause. rocelink's worker sends only frames it holds whole, so it marks
//!   one only when asked to ([`WorkerConfig::mark_bad`], to test a buffer unit).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod consumer;
mod error;
pub mod levels;
mod mailbox;
pub mod nack;
pub mod ring;
pub mod run;
pub mod session;
pub mod source;
pub mod unit;
pub mod worker;

pub use consumer::{Consumer, RateConsumer, RecordConsumer};
pub use error::{Error, Shared};
pub use levels::ServiceLevels;
pub use nack::{NackCounts, events_for, events_for_faults};
pub use source::{
    Fill, FrameQueue, FrameSource, ImageSource, PatternSource, QueueSource, Queued, Verify,
};
pub use unit::{Frame, Unit, UnitConfig, UnitStats};
pub use worker::{MarkBad, Worker, WorkerConfig, WorkerState, WorkerStats};

use std::net::{IpAddr, SocketAddr};

/// The protocol version this implementation speaks (1.1: NACK events as a bit mask, out of
/// sequence NACKs, packets of at least 64 bytes).
pub const VERSION: (u8, u8) = (1, 1);
/// Default QPN of the buffer unit's status QP (the specification fixes one but not its value).
pub const STATUS_QPN: u32 = 0x10;
/// Default Q_Key of the status channel.
pub const STATUS_QKEY: u32 = 0x494D_5300;
/// Frames start at multiples of this, and packets carry at least this many bytes.
pub const ALIGN: u64 = 64;
/// Largest packet payload.
pub const MAX_PACKET: usize = 4096;

/// What rocelink carries in a status packet's LID field for `addr`: its IPv4 address (the
/// low 32 bits of an IPv6 one).
pub fn lid_of(addr: SocketAddr) -> u32 {
    match addr.ip() {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => (u128::from(v6) & 0xFFFF_FFFF) as u32,
    }
}

/// `x` rounded up to a multiple of [`ALIGN`] (modulo 2⁶⁴).
pub fn align_up(x: u64) -> u64 {
    x.wrapping_add(ALIGN - 1) & !(ALIGN - 1)
}
