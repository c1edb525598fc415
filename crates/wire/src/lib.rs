//! Zero-copy packet views and emitters for everything rocelink puts on the wire.
//!
//! The crate follows the smoltcp `wire` pattern:
//!
//! * a **view** (`Packet<T: AsRef<[u8]>>`) wraps a byte buffer. `new_checked` validates the
//!   length once; after that no accessor can panic, whatever the bytes are.
//!   `new_unchecked` is for emitting into a buffer you sized yourself.
//! * a **`Repr`** is a small `Copy` struct with the meaning of the header. `Repr::parse`
//!   reads it from a checked view; `Repr::emit` writes it into a buffer of exactly
//!   `Repr::buffer_len()` bytes (or more) and never panics on such a buffer.
//!
//! Layers:
//!
//! | module | what |
//! |---|---|
//! | [`ethernet`], [`arp`], [`ipv4`], [`ipv6`], [`udp`], [`icmpv4`], [`pfc`] | link, network and transport headers |
//! | [`ib`] | InfiniBand transport: opcodes, BTH, RETH/AETH/DETH/ImmDt/IETH/AtomicETH/AtomicAckETH, CNP, pad, GRH slot |
//! | [`icrc`] | RoCE v2 invariant CRC over IPv4 and IPv6, one-shot and incremental |
//! | [`roce`] | a whole RoCE v2 datagram (IP + UDP + IB) as one `Repr` |
//! | [`hsb`] | Holoscan Sensor Bridge: metadata record, immediate layouts, frame CRC, ECB, BOOTP, async events |
//! | [`ims`] | IMS streaming protocol: status packet, ACK/NACK, 4-/6-bit image mapping with CRC32C |
//! | [`oob`] | connection data RDMA tools exchange over TCP (rdma-core pingpong) |
//! | [`pixel`] | CSI-2 RAW10/RAW12 and CoE packed RAW10/RAW12 unpacking |
//! | [`dissect`] | a layer-by-layer decoder of a captured frame (used by `rocelink decode` and the fuzzers) |
//!
//! No I/O happens here and the crate forbids `unsafe`.
//!
//! ```
//! use rocelink_wire::ib::{Opcode, BthRepr};
//! let bth = BthRepr { opcode: Opcode::UC_RDMA_WRITE_ONLY, dest_qp: 0xCAF0, psn: 7, ..BthRepr::default() };
//! let mut buf = [0u8; 12];
//! bth.emit(&mut rocelink_wire::ib::Bth::new_unchecked(&mut buf[..]));
//! let back = BthRepr::parse(&rocelink_wire::ib::Bth::new_checked(&buf[..]).unwrap());
//! assert_eq!(back, bth);
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod arp;
pub mod bytes;
pub mod dissect;
pub mod ethernet;
pub mod hsb;
pub mod ib;
pub mod icmpv4;
pub mod icrc;
pub mod ims;
pub mod ipv4;
pub mod ipv6;
pub mod oob;
pub mod perftest;
pub mod pfc;
pub mod pixel;
pub mod roce;
pub mod udp;
pub mod ultrasound;

use core::fmt;

/// Why a buffer could not be read as the requested header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it says).
    Truncated,
    /// A field holds a value the format does not allow (bad version, impossible length, …).
    Malformed,
    /// Well-formed, but a variant this crate does not handle (e.g. IPv4 options on a RoCE packet).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated",
            Error::Malformed => "malformed",
            Error::Unsupported => "unsupported",
        })
    }
}

impl core::error::Error for Error {}

/// Result with the wire [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// A byte range inside a header.
pub(crate) type Field = core::ops::Range<usize>;

/// UDP destination port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;
