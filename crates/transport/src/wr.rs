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
#[non_exhaustive]
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
    /// Atomic compare-and-swap of the 8-byte word at `va` of `rkey` (RC only, `va` 8-byte
    /// aligned): when it equals `compare` it becomes `swap`. The word as it was before
    /// lands in the local 8-byte `sge`.
    CompareSwap {
        /// Remote VA.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// The value expected.
        compare: u64,
        /// The value written when it is there.
        swap: u64,
    },
    /// Atomic fetch-and-add: `add` is added (modulo 2⁶⁴) to the 8-byte word at `va` of
    /// `rkey` (RC only, `va` 8-byte aligned); the word as it was lands in the local 8-byte
    /// `sge`.
    FetchAdd {
        /// Remote VA.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// What is added.
        add: u64,
    },
    /// UD SEND (optionally with immediate) to `dest`.
    UdSend {
        /// Destination.
        dest: UdDest,
        /// Optional immediate.
        imm: Option<u32>,
    },
}

impl SendOp {
    /// An atomic (compare-and-swap or fetch-and-add).
    pub const fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
}

/// Bytes an atomic reads and writes (and lands locally).
pub const ATOMIC_LEN: u32 = 8;

/// A send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Local data, in order: gathered for SEND/WRITE, scattered into for READ.
    pub sg_list: SgList,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Set the solicited-event bit on the last packet.
    pub solicited: bool,
    /// Reserved BTH bits (`resv7`, low 7 bits) set on the last packet: how a sender marks
    /// a message bad for a responder that honours marks ([`crate::WriteRules::marks`]),
    /// e.g. IMS's end of bad frame/packet ([`rocelink_wire::ims::marks`]). 0 for none.
    pub marks: u8,
}

/// Most scatter/gather entries in one work request (send or receive).
pub const MAX_SGE: usize = 8;

/// Most bytes of an inline send ([`crate::Endpoint::post_send_inline`]).
pub const MAX_INLINE: usize = 512;

/// Most scatter entries in one receive WR (the same as [`MAX_SGE`]).
pub const MAX_RECV_SGE: usize = MAX_SGE;

/// The local key of a discard segment: bytes scattered there are dropped (the "null
/// region" of the ultrasound seed, e.g. for a UD receive's 40-byte GRH slot). No region
/// ever has key 0.
pub const DISCARD_LKEY: u32 = 0;

impl SendWr {
    /// `op` on `sge`: unsignaled, not solicited, no marks.
    pub const fn new(wr_id: u64, op: SendOp, sge: Sge) -> SendWr {
        SendWr {
            wr_id,
            op,
            sg_list: SgList::one(sge),
            signaled: false,
            solicited: false,
            marks: 0,
        }
    }
}

impl Sge {
    /// A segment of `len` bytes that are received and dropped.
    pub const fn discard(len: u32) -> Sge {
        Sge {
            lkey: DISCARD_LKEY,
            va: 0,
            len,
        }
    }
    /// True for a discard segment.
    pub const fn is_discard(&self) -> bool {
        self.lkey == DISCARD_LKEY
    }
}

/// The scatter/gather list of a work request: up to [`MAX_SGE`] segments, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SgList {
    sges: [Sge; MAX_RECV_SGE],
    n: u8,
}

impl SgList {
    /// A list of `sges` (1 to [`MAX_RECV_SGE`] of them); `None` otherwise.
    pub fn new(sges: &[Sge]) -> Option<SgList> {
        if sges.is_empty() || sges.len() > MAX_RECV_SGE {
            return None;
        }
        let mut l = SgList {
            sges: [Sge::discard(0); MAX_RECV_SGE],
            n: sges.len() as u8,
        };
        l.sges[..sges.len()].copy_from_slice(sges);
        Some(l)
    }
    /// A list of one segment.
    pub const fn one(s: Sge) -> SgList {
        let mut sges = [Sge::discard(0); MAX_RECV_SGE];
        sges[0] = s;
        SgList { sges, n: 1 }
    }
    /// The first segment.
    pub fn first(&self) -> Sge {
        self.sges[0]
    }
    /// The segments.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..usize::from(self.n)]
    }
    /// Bytes the list holds (discard segments included).
    pub fn total_len(&self) -> u64 {
        // most lists have one element: no loop set up for the other seven
        if self.n == 1 {
            return u64::from(self.sges[0].len);
        }
        self.as_slice().iter().map(|s| u64::from(s.len)).sum()
    }
    /// The pieces of `[offset, offset + len)` of the message: (segment, offset inside it,
    /// length), in order. `None` if the range is past the list's end.
    pub(crate) fn pieces(
        &self,
        offset: u64,
        len: u64,
    ) -> Option<impl Iterator<Item = (Sge, u64, u64)> + '_> {
        if offset.checked_add(len)? > self.total_len() {
            return None;
        }
        let mut start = 0u64;
        Some(self.as_slice().iter().filter_map(move |s| {
            let (a, b) = (start, start + u64::from(s.len));
            start = b;
            let (lo, hi) = (offset.max(a), (offset + len).min(b));
            (lo < hi).then(|| (*s, lo - a, hi - lo))
        }))
    }
}

impl From<Sge> for SgList {
    fn from(s: Sge) -> SgList {
        SgList::one(s)
    }
}

/// A receive work request: where an incoming SEND lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message goes, in order (UD: the first 40 bytes are the GRH slot; a
    /// [`Sge::discard`] segment drops them).
    pub sg_list: SgList,
}

impl RecvWr {
    /// One buffer.
    pub fn new(wr_id: u64, sge: Sge) -> RecvWr {
        RecvWr {
            wr_id,
            sg_list: sge.into(),
        }
    }
    /// A scatter list of 1 to [`MAX_RECV_SGE`] segments; `None` otherwise.
    pub fn scatter(wr_id: u64, sges: &[Sge]) -> Option<RecvWr> {
        Some(RecvWr {
            wr_id,
            sg_list: SgList::new(sges)?,
        })
    }
}

/// Completion status (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum WcOpcode {
    /// A SEND (or UD send) finished.
    Send,
    /// An RDMA WRITE finished.
    RdmaWrite,
    /// An RDMA READ finished.
    RdmaRead,
    /// An atomic compare-and-swap finished.
    CompareSwap,
    /// An atomic fetch-and-add finished.
    FetchAdd,
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
    /// A received message whose sender asked for a solicited event (its last packet's
    /// BTH SE bit).
    pub solicited: bool,
}

#[cfg(test)]
mod sg_tests {
    use super::*;

    proptest::proptest! {
        /// The pieces of any range tile it exactly, in order, each inside its segment.
        #[test]
        fn pieces_tile_the_range(lens in proptest::collection::vec(0u32..3000, 1..=MAX_RECV_SGE),
                                 off in 0u64..12_000, len in 0u64..12_000) {
            let sges: Vec<Sge> = lens.iter().enumerate()
                .map(|(i, &l)| Sge { lkey: i as u32 + 1, va: 0, len: l }).collect();
            let sg = SgList::new(&sges).unwrap();
            match sg.pieces(off, len) {
                None => proptest::prop_assert!(off + len > sg.total_len()),
                Some(p) => {
                    let mut at = off;
                    for (s, o, n) in p {
                        proptest::prop_assert!(n > 0 && o + n <= u64::from(s.len));
                        let start: u64 = sges.iter().take_while(|x| x.lkey != s.lkey)
                            .map(|x| u64::from(x.len)).sum();
                        proptest::prop_assert_eq!(start + o, at);
                        at += n;
                    }
                    proptest::prop_assert_eq!(at, off + len);
                }
            }
        }
    }
}
