//! Why an IMS role could not start or go on.

use crate::worker::MAX_SEND_BUFFER;
use crate::{MAX_PACKET, VERSION};
use rocelink_transport::{AccessError, QpError, WcStatus};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a role could not go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A ring that is not a multiple of 64 bytes, or smaller than a packet.
    #[error("ring size {0} must be a multiple of 64 of at least {MAX_PACKET} bytes")]
    RingSize(usize),
    /// No worker, no data channel, or no idle timeout.
    #[error("at least one worker and one data channel, and an idle timeout above 0")]
    Capacity,
    /// A DSCP that is not 6 bits.
    #[error("{channel} channel DSCP {dscp}: a DSCP is 0 to 63")]
    Dscp {
        /// Which channel.
        channel: &'static str,
        /// What was asked for.
        dscp: u8,
    },
    /// A first VA off the 64-byte grid.
    #[error("VA offset {0:#x} is not 64-byte aligned")]
    VaOffset(u64),
    /// The memory of a ring could not be mapped.
    #[error("a ring of {0} bytes: the memory cannot be mapped")]
    RingMemory(usize),
    /// The transport refused the ring window.
    #[error("the transport refused a ring window of {0} bytes")]
    RingWindow(usize),
    /// A packet size off 64..=4096 in steps of 64.
    #[error("packet size {0}: must be 64 to 4096 bytes in steps of 64")]
    PacketSize(usize),
    /// A frame size the packets cannot carry.
    #[error(
        "frame size {frame}: must be 64 bytes to 2 GiB, and its last {packet}-byte packet at least 64 bytes (it would be {last})"
    )]
    FrameSize {
        /// The frame size.
        frame: usize,
        /// The packet size.
        packet: usize,
        /// The last packet's size.
        last: usize,
    },
    /// No frame in flight.
    #[error("frames in flight: at least 1")]
    InFlight,
    /// More send buffer than a worker takes.
    #[error(
        "{frames} frames in flight of {frame} bytes need {bytes} bytes of send buffer; at most {} GiB (fewer frames in flight, or smaller frames)",
        MAX_SEND_BUFFER >> 30
    )]
    SendBuffer {
        /// Frames in flight.
        frames: usize,
        /// Their size.
        frame: usize,
        /// Their product.
        bytes: u64,
    },
    /// An answer window outside 1..=2²².
    #[error("answer window {0}: 1 to 4194304 PSNs")]
    AnswerWindow(u32),
    /// Frames marked bad with no mark, an unknown mark, or never.
    #[error(
        "marking every {every} frame(s) with {marks:#x}: at least every frame, and EBF (0x2) and/or EBP (0x1)"
    )]
    MarkBad {
        /// Every how many frames.
        every: u64,
        /// The marks.
        marks: u8,
    },
    /// The transport refused a verb.
    #[error("transport")]
    Transport(#[from] QpError),
    /// The worker's own send buffer refused a frame (a fault in the worker).
    #[error("send buffer")]
    SendRegion(#[from] AccessError),
    /// The worker could not tell the unit it is closing.
    #[error("the worker could not close its channels")]
    Closing,
    /// A frame was not sent whole.
    #[error("frame send failed: {0:?}")]
    SendFailed(WcStatus),
    /// The buffer unit speaks a protocol version this worker does not.
    #[error(
        "the buffer unit speaks IMS protocol {major}.{minor}; this worker speaks {}.{} and does not know major version {major}",
        VERSION.0, VERSION.1
    )]
    Version {
        /// Its major version.
        major: u8,
        /// Its minor version.
        minor: u8,
    },
    /// No answer on the status channel.
    #[error(
        "no {what} from the buffer unit at {server} within {secs:.1} s (is `rocelink ims serve` running there?)"
    )]
    NoAnswer {
        /// The answer awaited (STAT_RES, DATA_RES, …).
        what: &'static str,
        /// Where the request went.
        server: SocketAddr,
        /// How long it waited.
        secs: f64,
    },
    /// The buffer unit NACKed a frame with a cause that ends the stream (Table 3.4:
    /// invalid R_Key or VA).
    #[error("the buffer unit refused the frame at VA {va:#x}: {causes}")]
    Refused {
        /// The frame's VA.
        va: u64,
        /// The NACK's causes, comma-separated.
        causes: String,
    },
    /// The frame source failed.
    #[error("frame source")]
    Source(#[source] Shared<std::io::Error>),
    /// A frame file could not be opened.
    #[error("{}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Shared<std::io::Error>,
    },
    /// The role's RoCE address could not be bound.
    #[error("cannot serve RoCE at {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: Shared<std::io::Error>,
    },
    /// No route to the buffer unit (give the worker a local address).
    #[error("no route to the buffer unit at {0} (give the worker a local address)")]
    Route(SocketAddr, #[source] Shared<std::io::Error>),
    /// Packets too large for the path to the buffer unit.
    #[error(
        "packets of {packet} payload bytes do not fit the path MTU to {unit} (with 1500-byte Ethernet frames send packets of 1408)"
    )]
    PathMtu {
        /// The payload bytes per packet.
        packet: usize,
        /// The buffer unit.
        unit: SocketAddr,
    },
    /// Sending or receiving on the role's socket failed.
    #[error("RoCE socket")]
    Io(#[source] Shared<std::io::Error>),
    /// Rings for every data channel need more memory than the machine has.
    #[error(
        "{channels} rings of {ring} bytes = {need} bytes, more than this machine's {have} bytes of memory (a smaller ring or fewer workers)"
    )]
    Memory {
        /// Bytes per ring.
        ring: u64,
        /// Data channels at once.
        channels: usize,
        /// Their product.
        need: u64,
        /// The machine's memory.
        have: u64,
    },
    /// A consumption rate that is not a positive number.
    #[error("a consumption rate of {0} Gbit/s: above 0")]
    Rate(f64),
    /// The recording directory cannot take a recording.
    #[error("{}", dir.display())]
    RecordDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Shared<rocelink_record::DirError>,
    },
    /// The recording failed.
    #[error("recording to {}", dir.display())]
    Record {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Shared<std::io::Error>,
    },
    /// The buffer unit refused this worker: it holds as many as it takes.
    #[error(
        "the buffer unit at {server} refused another {what}: it is full (try again later, or raise its worker limit)"
    )]
    Full {
        /// The buffer unit.
        server: SocketAddr,
        /// What it had no room for ("worker", "data channel").
        what: &'static str,
    },
    /// The buffer unit stopped answering while frames were unanswered.
    #[error(
        "the buffer unit at {server} answered nothing for {secs:.1} s with {frames} frame(s) unanswered (is it still running?)"
    )]
    Silent {
        /// The buffer unit.
        server: SocketAddr,
        /// How long it was silent.
        secs: f64,
        /// Frames sent and never answered.
        frames: usize,
    },
}

/// An error shared, so that a failed role's state can be cloned and compared (two are
/// equal when they are the same error).
#[derive(Debug)]
pub struct Shared<E>(pub Arc<E>);

impl<E> Clone for Shared<E> {
    fn clone(&self) -> Shared<E> {
        Shared(self.0.clone())
    }
}

impl<E> Shared<E> {
    /// Share `e`.
    pub fn new(e: E) -> Shared<E> {
        Shared(Arc::new(e))
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error> std::error::Error for Shared<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<E> PartialEq for Shared<E> {
    fn eq(&self, other: &Shared<E>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Error {
    /// A frame source's failure.
    pub fn from_source(e: std::io::Error) -> Error {
        Error::Source(Shared::new(e))
    }
}

/// `e` as its text with its sources: how a summary serialises an error.
pub(crate) fn serialize_text<S: serde::Serializer>(e: &Error, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rocelink_runtime::session::error_text(e))
}
