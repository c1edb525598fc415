//! Why a perftest test could not be set up or run.

use super::MAX_QPS;
use rocelink_transport::{QpError, WcStatus, WorkCompletion};
use std::io;

/// A setting perftest refuses too (checked before anything is bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Setting {
    /// A message size of 0 or over 1 GiB.
    #[error("message size must be in 1..=1 GiB")]
    Size,
    /// UD with a WRITE or READ test.
    #[error("UD connection only possible in SEND tests (as perftest)")]
    UdNotSend,
    /// Too many QPs, or none.
    #[error("the number of QPs must be in 1..={MAX_QPS}")]
    Qps,
    /// Several QPs in a latency test.
    #[error("multiple QPs only available on bw tests (as perftest)")]
    QpsNotBw,
    /// A duration not above twice the margin.
    #[error("please check that DURATION > 2*MARGIN (-D and -f, as perftest)")]
    Duration,
    /// Running infinitely in a latency test.
    #[error("running indefinitely exists only in bw tests (as in perftest)")]
    InfiniteNotBw,
    /// READ over UC.
    #[error("READ needs RC (perftest refuses -c UC for read tests too)")]
    ReadNotRc,
    /// No iteration and no duration.
    #[error("iterations must be at least 1")]
    Iters,
    /// One-byte messages in write_lat.
    #[error("write_lat needs messages of at least 2 bytes")]
    WriteLatSize,
    /// A queue depth out of range.
    #[error("tx and rx depth must be in 1..=8192")]
    Depth,
}

/// Why a test failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// A setting perftest refuses.
    #[error(transparent)]
    Setting(#[from] Setting),
    /// The transport refused a verb.
    #[error("the transport refused a verb")]
    Transport(#[from] QpError),
    /// The TCP exchange or the RoCE socket failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The peer's key string named no GID.
    #[error("the peer's key string has no GID (an InfiniBand peer): RoCE needs one")]
    NoGid,
    /// The two sides run different tests.
    #[error(
        "the peer runs {peer} over {peer_conn}, this side {test} over {conn}: run the same test on both sides"
    )]
    Mismatch {
        /// The peer's test.
        peer: &'static str,
        /// The peer's connection type.
        peer_conn: &'static str,
        /// This side's test.
        test: &'static str,
        /// This side's connection type.
        conn: &'static str,
    },
    /// A work request completed in error.
    #[error(
        "{what} completed with {status:?} (QP {qpn:#x}): the peer refused it or stopped answering"
    )]
    Completion {
        /// What it was ("a send", "a receive", …).
        what: &'static str,
        /// Its status.
        status: WcStatus,
        /// Its QP.
        qpn: u32,
    },
    /// Stopped while a server waited for its client: nothing ran.
    #[error("stopped before a client connected")]
    NoPeer,
    /// Ctrl-C (the stop flag) before anything was measured.
    #[error("stopped (Ctrl-C)")]
    Stopped,
    /// The test did not finish in its time.
    #[error("{0}")]
    Unfinished(String),
    /// A thread of the loopback test panicked.
    #[error("the server thread panicked")]
    Panicked,
}

impl PerfError {
    /// A completion `wc` of `what` ("a send", …) in error.
    pub(super) fn completion(what: &'static str, wc: &WorkCompletion) -> PerfError {
        PerfError::Completion {
            what,
            status: wc.status,
            qpn: wc.qpn,
        }
    }

    /// Whether the peer closed the exchange's connection.
    pub fn peer_closed(&self) -> bool {
        matches!(self, PerfError::Io(e) if matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
        ))
    }
}
