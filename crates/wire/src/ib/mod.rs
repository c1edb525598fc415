//! InfiniBand transport headers as carried by RoCE v2.
//!
//! * [`Opcode`] — every RC/UC/RD/UD opcode and CNP, with the extended-header set of each.
//! * [`Bth`] — base transport header.
//! * [`ext`] — RETH, AETH, DETH, ImmDt, IETH, AtomicETH, AtomicAckETH, RDETH.
//! * [`IbPacket`] — a whole IB transport packet (BTH … payload, pad, ICRC trailer).
//! * [`grh`] — the 40-byte GRH slot at the front of UD receive buffers.

mod bth;
pub mod ext;
pub mod grh;
mod opcode;
mod packet;

pub use bth::{Bth, BthRepr, HEADER_LEN as BTH_LEN};
pub use ext::{AethKind, AethRepr, AtomicEthRepr, DethRepr, NakCode, RethRepr};
pub use opcode::{HeaderSet, Opcode, Transport};
pub use packet::{ICRC_LEN, IbPacket, IbRepr, pad_for};

/// Q_Key used by QP1 (GSI).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// The multicast destination QPN.
pub const MULTICAST_QPN: u32 = 0x00FF_FFFF;

/// 24-bit PSN arithmetic (all comparisons modulo 2^24, window ±2^23, as Linux rxe).
pub mod psn {
    /// Mask of the 24 PSN bits.
    pub const MASK: u32 = 0x00FF_FFFF;

    /// `a + n` modulo 2^24.
    #[inline]
    pub fn add(a: u32, n: u32) -> u32 {
        a.wrapping_add(n) & MASK
    }

    /// `a - 1` modulo 2^24.
    #[inline]
    pub fn sub1(a: u32) -> u32 {
        a.wrapping_sub(1) & MASK
    }

    /// Signed distance `a - b` in the ±2^23 window (negative: a is before b).
    #[inline]
    pub fn diff(a: u32, b: u32) -> i32 {
        (a.wrapping_sub(b) << 8) as i32 >> 8
    }

    /// Compare `a` with `b` in PSN space.
    #[inline]
    pub fn cmp(a: u32, b: u32) -> core::cmp::Ordering {
        diff(a, b).cmp(&0)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use core::cmp::Ordering;

        #[test]
        fn wraparound() {
            assert_eq!(add(MASK, 1), 0);
            assert_eq!(add(MASK - 1, 5), 3);
            assert_eq!(diff(0, MASK), 1);
            assert_eq!(diff(MASK, 0), -1);
            assert_eq!(cmp(2, 0xFFFFF0), Ordering::Greater);
            assert_eq!(cmp(0xFFFFF0, 2), Ordering::Less);
            assert_eq!(cmp(7, 7), Ordering::Equal);
            assert_eq!(diff(0x800000, 0), -0x800000);
        }
    }
}
