//! A user-space RoCE v2 "NIC", sans-IO.
//!
//! [`Endpoint`] holds memory regions, queue pairs and the completion queue. It never reads a
//! clock or touches a socket: time is an argument, datagrams go in through
//! [`Endpoint::handle_datagram`] and come out of [`Endpoint::poll_transmit`], timers are
//! [`Endpoint::poll_timeout`] / [`Endpoint::handle_timeout`], and results are
//! [`Endpoint::poll_completion`] and [`Endpoint::poll_event`]. After any `handle_*` or
//! application call, drain `poll_transmit`, then ask `poll_timeout` again (the quinn-proto
//! discipline). `rocelink-io` drives it with UDP sockets; [`sim`] drives two endpoints over a
//! lossy virtual link for tests.
//!
//! What it implements (rules from Linux rxe, see `docs/reference/roce.md`):
//! RC (SEND/RECV, WRITE, WRITE with immediate, READ; AckReq, cumulative ACKs, go-back-N on
//! timeout and on NAK-PSN-sequence, RNR NAK back-off, retry counters with 7 = forever,
//! duplicate detection with re-ACK and READ replay, MSN), UC (drop to the next FIRST/ONLY
//! after a gap, damaged messages reported as [`Event::MessageDamaged`]; with
//! [`QpInit::report_messages`] every WRITE message's outcome as [`Event::WriteMessage`] —
//! delivered, or sequence, no start, length, R_Key, bounds or ring window), UD (DETH, Q_Key and
//! its bit-31 rule, 40-byte GRH slot). Every remote access is checked against R_Key, access
//! flags and bounds before a byte moves.
//!
//! ```
//! use rocelink_transport::*;
//! use std::time::{Duration, Instant};
//!
//! let now = Instant::now();
//! let (a_addr, b_addr) = ("127.0.0.1:4791".parse().unwrap(), "127.0.0.2:4791".parse().unwrap());
//! let mut a = Endpoint::new(EndpointConfig::new(a_addr));
//! let mut b = Endpoint::new(EndpointConfig::new(b_addr));
//! // B exposes 4 KiB for remote writes; A has a 4 KiB source buffer.
//! let dst = b.register_mr(vec![0; 4096].into_boxed_slice(), 0, Access::REMOTE_WRITE | Access::LOCAL_WRITE);
//! let src = a.register_mr(vec![7; 4096].into_boxed_slice(), 0x1000, Access::NONE);
//! let recv = b.register_mr(vec![0; 64].into_boxed_slice(), 0, Access::LOCAL_WRITE);
//! let (qa, qb) = (a.create_qp(QpInit::new(QpType::Rc)).unwrap(), b.create_qp(QpInit::new(QpType::Rc)).unwrap());
//! sim::connect(&mut a, qa, &mut b, qb, Mtu::M1024, 100, 500, 0).unwrap();
//! // WRITE WITH IMMEDIATE consumes a RECV on B and completes there with the immediate.
//! b.post_recv(qb, RecvWr::new(1, Sge { lkey: recv.lkey, va: 0, len: 64 })).unwrap();
//! let wr = SendWr {
//!     wr_id: 9,
//!     op: SendOp::WriteImm { va: 0, rkey: dst.rkey, imm: 0xC0FFEE },
//!     sg_list: Sge { lkey: src.lkey, va: 0x1000, len: 4096 }.into(),
//!     signaled: true,
//!     solicited: false,
//!     marks: 0,
//! };
//! a.post_send(qa, wr).unwrap();
//! let mut pair = sim::Pair::new(a, b, sim::LinkConfig::default(), 1, now);
//! pair.run_until(Duration::from_secs(1), |p| p.b.peek_completion().is_some());
//! let wc = pair.b.poll_completion().unwrap();
//! assert_eq!((wc.opcode, wc.imm, wc.byte_len), (WcOpcode::RecvRdmaWithImm, Some(0xC0FFEE), 4096));
//! assert_eq!(pair.b.mr(dst.lkey).unwrap().bytes()[4095], 7);
//! ```
//!
//! # Behaviour on the wire
//!
//! - Sans-IO like quinn-proto: `Endpoint::handle_datagram(now, Datagram)`,
//!   `handle_timeout(now)`, `poll_transmit(now, &mut buf)`, `poll_timeout()`,
//!   `poll_completion()`, `poll_event()`. QPs are served round-robin in `poll_transmit`;
//!   responses (ACK/NAK/READ responses) go before new requests and are kept in PSN order in one
//!   queue (an ACK overtaking READ responses would look like lost responses).
//! - PSNs are assigned when a WR is posted. RC retransmission is go-back-N from the oldest
//!   unacknowledged PSN; READ re-requests resume from the first missing response (the responder
//!   restarts such a replay with READ RESPONSE FIRST/ONLY, so the requester checks lengths, not
//!   FIRST/MIDDLE positions: the bytes at a PSN are the same either way).
//! - `retry_cnt`/`rnr_retry` 7 mean "forever", as Linux rxe does. Progress (a cumulative ACK that
//!   moves) resets the counters.
//! - A class-C error (invalid request, remote access) sends the NAK and then moves the QP to
//!   ERROR; the NAK survives the flush.
//! - UC: a new FIRST/ONLY while a message is open discards the open one and accepts the new one
//!   (rxe drops both); every discarded message is an `Event::MessageDamaged`.
//! - ICRC policy on receive: exact when the IP header is known or can be rebuilt (IPv6; IPv4
//!   with ID 0, which HSB devices and rocelink send). Linux rxe numbers IPv4 IDs, which a UDP
//!   socket never shows: `IcrcPolicy::RecoverIpv4Id` solves for the ID (the CRC is linear in it:
//!   16 unknowns over GF(2), using zlib-style `x^(8n) mod P` shifts). It is 2⁻¹⁶-weak and
//!   counted separately (`icrc_unverified`).
//! - `Event::Placed` (per QP, opt-in) reports every WRITE payload placed, so a receiver can
//!   check data as it lands (the HSB frame CRC) without a second pass over the frame.
#![cfg_attr(not(fuzzing), warn(missing_docs))]
#![forbid(unsafe_code)]

mod cq;
mod endpoint;
mod events;
mod holds;
mod keymap;
mod mr;
mod prefix;
mod qp;
pub mod sim;
mod srq;
mod stats;
mod wr;

pub use cq::{CqCounts, CqId};
pub use endpoint::{
    Datagram, Endpoint, EndpointConfig, Gather, IcrcPolicy, IcrcStatus, Landed, LandedFlow,
    LandedPart, Landing, Placement, RecvUnderWay, SrcPort, Transmit, WriteUnderWay,
};
pub use holds::Holds;
pub use mr::{
    Access, AccessError, AddressMap, Memory, MemoryRegion, MrKeys, MrTable, RegionMemory,
    SharedMemory,
};
pub use qp::{Faults, MessageOutcome, Modify, Mtu, QpInit, QpState, QpType, WriteRules};
pub use srq::{MAX_SRQS, SrqInfo, SrqInit};
pub use stats::{EndpointStats, QpStats};
pub use wr::{
    ATOMIC_LEN, DISCARD_LKEY, MAX_INLINE, MAX_RECV_SGE, MAX_SGE, RecvWr, SendOp, SendWr, SgList,
    Sge, UdDest, WcOpcode, WcStatus, WorkCompletion,
};

/// Something that happened that is not a work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// The QP entered the error state.
    QpError {
        /// Which QP.
        qpn: u32,
        /// What moved it there.
        why: ErrorCause,
    },
    /// A shared receive queue ran below its armed limit (the limit is now disarmed): a
    /// receive for QP `qpn` took it there.
    SrqLimit {
        /// The QP whose message took the receive.
        qpn: u32,
        /// Which shared receive queue.
        srq: u32,
    },
    /// A WRITE packet's payload was placed from a datagram (only for QPs created with
    /// [`QpInit::report_writes`]; [`Endpoint::handle_landed`] returns its [`Placement`]
    /// instead): `len` bytes at `va` of the region with `rkey`.
    Placed {
        /// Which QP.
        qpn: u32,
        /// The packet's PSN.
        psn: u32,
        /// Region key.
        rkey: u32,
        /// Where.
        va: u64,
        /// How many bytes.
        len: u32,
        /// CRC-32 (IEEE) of those bytes, from the same pass that checked the ICRC.
        crc: u32,
    },
    /// A WRITE message ended at this responder (only for QPs created with
    /// [`QpInit::report_messages`]): delivered whole, or not, and why. A protocol that
    /// acknowledges messages itself over UC (IMS) answers each of these.
    WriteMessage {
        /// Which QP.
        qpn: u32,
        /// PSN of its first packet (of the packet that showed it had no first one, for
        /// [`MessageOutcome::NoStart`]).
        first_psn: u32,
        /// The VA of its RETH (0 when no first packet was seen).
        va: u64,
        /// The R_Key of its RETH (0 when no first packet was seen).
        rkey: u32,
        /// The DMA length of its RETH (0 when no first packet was seen; a longer one than
        /// 2³¹ is refused as [`MessageOutcome::Length`] and reported as 0).
        len: u32,
        /// How it ended (the first check it failed).
        outcome: MessageOutcome,
        /// Every check it failed (empty when delivered).
        faults: Faults,
    },
    /// A UC message was cut short by a lost packet (or its LAST never came) and discarded.
    /// For a WRITE, `bytes_placed` bytes of it were already written to the region.
    MessageDamaged {
        /// Which QP.
        qpn: u32,
        /// PSN of the message's first packet.
        first_psn: u32,
        /// Bytes of it already placed.
        bytes_placed: u64,
        /// An RDMA WRITE (else a SEND).
        write: bool,
    },
}

/// What moved a QP to the error state ([`Event::QpError`]) — how verbs tells an
/// asynchronous error from one a completion already reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCause {
    /// Its owner asked ([`Modify::Error`]).
    Modified,
    /// A send WR completed in error (retries spent, a NAK, a region gone); its completion
    /// says why.
    Completion,
    /// As responder, it refused an invalid request from its peer (and NAKed it).
    InvalidRequest,
    /// As responder, it refused a request its access rights or the region's did not allow
    /// (and NAKed it).
    AccessError,
}

impl Event {
    /// QP `qpn` placed `p`.
    pub(crate) fn placed(qpn: u32, p: Placement) -> Event {
        Event::Placed {
            qpn,
            psn: p.psn,
            rkey: p.rkey,
            va: p.va,
            len: p.len,
            crc: p.crc,
        }
    }

    /// The QP the event is about.
    pub fn qpn(&self) -> u32 {
        match *self {
            Event::QpError { qpn, .. }
            | Event::SrqLimit { qpn, .. }
            | Event::Placed { qpn, .. }
            | Event::WriteMessage { qpn, .. }
            | Event::MessageDamaged { qpn, .. } => qpn,
        }
    }
}

/// Why a verb was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QpError {
    /// No such QP.
    #[error("no QP {0:#x}")]
    NoQp(u32),
    /// The transition is not allowed from this state.
    #[error("transition not allowed from {0:?}")]
    BadTransition(QpState),
    /// The QP is not in a state that allows this.
    #[error("QP is in state {0:?}")]
    BadState(QpState),
    /// An attribute is invalid.
    #[error("invalid attribute: {0}")]
    InvalidAttr(&'static str),
    /// The work queue is full.
    #[error("work queue full")]
    QueueFull,
    /// The object is still in use (a CQ a QP completes into).
    #[error("in use")]
    Busy,
    /// The operation does not exist on this QP type.
    #[error("operation not supported on this QP type")]
    UnsupportedOp,
    /// The message is too long (UD: larger than the MTU).
    #[error("message too long")]
    TooLong,
    /// The local buffer is not registered or out of bounds.
    #[error("local buffer: {0}")]
    LocalAccess(AccessError),
}
