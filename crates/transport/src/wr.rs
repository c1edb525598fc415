//! Work requests (what the application posts) and completions (what it polls), after
//! `ibv_send_wr` / `ibv_recv_wr` / `ibv_wc`.

use std::net::SocketAddr;

/// A scatter/gather element: `len` bytes at `va` of the region with `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Local key of the region.
    pub lkey: u32,
    /// Virtual address of the first byte.
    pub va: u64,
    /// Length.
    pub len: u32,
}

/// Where a UD send goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Peer address (IP + UDP port, normally 4791).
    pub addr: SocketAddr,
    /// Destination QPN.
    pub qpn: u32,
    /// Q_Key; with bit 31 set the sending QP's own Q_Key is used instead.
    pub qkey: u32,
}

/// The operation of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate.
    SendImm(u32),
    /// RDMA WRITE to `va` of the peer region `rkey`.
    Write {
        /// Remote VA.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate.
    WriteImm {
        /// Remote VA.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data (big-endian number on the wire).
        imm: u32,
    },
    /// RDMA READ of `sge.len` bytes at `va` of `rkey` into the local `sge` (RC only).
    Read {
        /// Remote VA.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// UD SEND (optionally with immediate) to `dest`.
    UdSend {
        /// Destination.
        dest: UdDest,
        /// Optional immediate.
        imm: Option<u32>,
    },
}

/// A send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Local data (source of SEND/WRITE, destination of READ).
    pub sge: Sge,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Set the solicited-event bit on the last packet.
    pub solicited: bool,
}

/// A receive work request: where an incoming SEND lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffer (UD: the first 40 bytes receive the GRH slot).
    pub sge: Sge,
}

/// Completion status (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Success.
    Success,
    /// The local buffer was too small / message too long for the QP.
    LocalLengthError,
    /// A local QP operation error (e.g. a UD send larger than the MTU).
    LocalQpError,
    /// The local key/range was invalid.
    LocalProtectionError,
    /// Flushed because the QP went to the error state.
    WrFlushError,
    /// The peer NAKed the request as invalid.
    RemoteInvalidRequest,
    /// The peer NAKed the R_Key/range/access.
    RemoteAccessError,
    /// The peer NAKed with an operational error.
    RemoteOperationalError,
    /// Transport retries exhausted.
    RetryExceeded,
    /// RNR retries exhausted.
    RnrRetryExceeded,
    /// Bad response from the peer (e.g. a READ response of the wrong length).
    BadResponse,
}

/// Completion opcode (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A SEND (or UD send) finished.
    Send,
    /// An RDMA WRITE finished.
    RdmaWrite,
    /// An RDMA READ finished.
    RdmaRead,
    /// A SEND was received.
    Recv,
    /// An RDMA WRITE with immediate was received.
    RecvRdmaWithImm,
}

/// A completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// QP it belongs to.
    pub qpn: u32,
    /// Bytes received (UD: including the 40-byte GRH slot; WRITE with immediate: the RETH
    /// DMA length).
    pub byte_len: u32,
    /// Immediate data, if any.
    pub imm: Option<u32>,
    /// Source QP (UD receives).
    pub src_qp: u32,
    /// Sender address (receives).
    pub src: Option<SocketAddr>,
}
