//! Extended transport headers (all big-endian, fixed size).

use crate::bytes::{be_u24, be_u32, be_u64, set_be_u24, set_be_u32, set_be_u64};
use crate::{Error, Result};

macro_rules! fixed_view {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Header length.
            pub const LEN: usize = $len;
            /// Wrap without checking.
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }
            /// Wrap and check the header fits.
            pub fn new_checked(buffer: T) -> Result<Self> {
                if buffer.as_ref().len() < $len {
                    return Err(Error::Truncated);
                }
                Ok($name { buffer })
            }
            /// Give the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
            #[allow(dead_code)]
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}

fixed_view!(
    /// RDMA extended transport header: VA, R_Key, DMA length.
    Reth, 16
);
fixed_view!(
    /// ACK extended transport header: syndrome and MSN.
    Aeth, 4
);
fixed_view!(
    /// Datagram extended transport header: Q_Key and source QP.
    Deth, 8
);
fixed_view!(
    /// Atomic extended transport header: VA, R_Key, swap/add, compare.
    AtomicEth, 28
);

impl<T: AsRef<[u8]>> Reth<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        be_u64(&self.b()[0..8])
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be_u32(&self.b()[8..12])
    }
    /// DMA length (whole message for WRITE FIRST; HSB: this packet's payload).
    pub fn dma_len(&self) -> u32 {
        be_u32(&self.b()[12..16])
    }
}

impl<T: AsRef<[u8]>> Aeth<T> {
    /// Syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.b()[0]
    }
    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        be_u24(&self.b()[1..4])
    }
}

impl<T: AsRef<[u8]>> Deth<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        be_u32(&self.b()[0..4])
    }
    /// Source QP (24 bits).
    pub fn src_qp(&self) -> u32 {
        be_u24(&self.b()[5..8])
    }
}

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        be_u64(&self.b()[0..8])
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be_u32(&self.b()[8..12])
    }
    /// Swap (compare-swap) or add (fetch-add) operand.
    pub fn swap_add(&self) -> u64 {
        be_u64(&self.b()[12..20])
    }
    /// Compare operand.
    pub fn compare(&self) -> u64 {
        be_u64(&self.b()[20..28])
    }
}

/// RETH meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl RethRepr {
    /// Header length.
    pub const LEN: usize = 16;
    /// Read from a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Reth<T>) -> RethRepr {
        RethRepr {
            va: v.va(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        }
    }
    /// Write 16 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        set_be_u64(&mut b[0..8], self.va);
        set_be_u32(&mut b[8..12], self.rkey);
        set_be_u32(&mut b[12..16], self.dma_len);
    }
}

/// DETH meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Header length.
    pub const LEN: usize = 8;
    /// Read from a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Deth<T>) -> DethRepr {
        DethRepr {
            qkey: v.qkey(),
            src_qp: v.src_qp(),
        }
    }
    /// Write 8 bytes (reserved byte zero).
    pub fn emit(&self, b: &mut [u8]) {
        set_be_u32(&mut b[0..4], self.qkey);
        b[4] = 0;
        set_be_u24(&mut b[5..8], self.src_qp);
    }
}

/// AtomicETH meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEthRepr {
    /// Virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add operand.
    pub swap_add: u64,
    /// Compare operand.
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Header length.
    pub const LEN: usize = 28;
    /// Read from a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &AtomicEth<T>) -> AtomicEthRepr {
        AtomicEthRepr {
            va: v.va(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        }
    }
    /// Write 28 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        set_be_u64(&mut b[0..8], self.va);
        set_be_u32(&mut b[8..12], self.rkey);
        set_be_u64(&mut b[12..20], self.swap_add);
        set_be_u64(&mut b[20..28], self.compare);
    }
}

/// NAK codes (AETH syndrome 0x60 | code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error (carries the expected PSN).
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5..31: reserved.
    Reserved(u8),
}

impl NakCode {
    /// Code bits (0..31).
    pub fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1F,
        }
    }
    fn from_code(c: u8) -> NakCode {
        match c & 0x1F {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            x => NakCode::Reserved(x),
        }
    }
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "psn_sequence_error",
            NakCode::InvalidRequest => "invalid_request",
            NakCode::RemoteAccessError => "remote_access_error",
            NakCode::RemoteOperationalError => "remote_operational_error",
            NakCode::InvalidRdRequest => "invalid_rd_request",
            NakCode::Reserved(_) => "reserved",
        }
    }
}

/// Credit count of each ACK credit code 0..=30 (code 31: no end-to-end flow control).
pub const CREDIT_TABLE: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR NAK timer in microseconds per timer code 0..=31 (code 0 = 655.36 ms).
pub const RNR_TIMER_USEC: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// Decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethKind {
    /// ACK with credit code (31 = unlimited/invalid); `credits` is `None` for code 31.
    Ack {
        /// Credit code (0..=31).
        code: u8,
        /// Credits granted.
        credits: Option<u32>,
    },
    /// Receiver not ready; retry after the timer.
    RnrNak {
        /// Timer code (0..=31).
        timer: u8,
        /// Back-off in microseconds.
        usec: u32,
    },
    /// Negative acknowledge.
    Nak(NakCode),
    /// Syndrome type 0b10 (reserved).
    Reserved(u8),
}

/// AETH meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AethRepr {
    /// Syndrome byte (bit 7 reserved, 6..5 type, 4..0 value).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Header length.
    pub const LEN: usize = 4;
    /// Syndrome of an ACK without end-to-end credits.
    pub const ACK_UNLIMITED: u8 = 0x1F;

    /// An ACK (unlimited credits) with `msn`.
    pub fn ack(msn: u32) -> AethRepr {
        AethRepr {
            syndrome: Self::ACK_UNLIMITED,
            msn,
        }
    }
    /// A NAK with `code`.
    pub fn nak(code: NakCode, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: 0x60 | code.code(),
            msn,
        }
    }
    /// An RNR NAK with timer code `timer`.
    pub fn rnr_nak(timer: u8, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: 0x20 | (timer & 0x1F),
            msn,
        }
    }
    /// Read from a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Aeth<T>) -> AethRepr {
        AethRepr {
            syndrome: v.syndrome(),
            msn: v.msn(),
        }
    }
    /// Write 4 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.syndrome;
        set_be_u24(&mut b[1..4], self.msn);
    }
    /// Decode the syndrome.
    pub fn kind(&self) -> AethKind {
        let v = self.syndrome & 0x1F;
        match (self.syndrome >> 5) & 3 {
            0 => AethKind::Ack {
                code: v,
                credits: CREDIT_TABLE.get(usize::from(v)).copied(),
            },
            1 => AethKind::RnrNak {
                timer: v,
                usec: RNR_TIMER_USEC[usize::from(v)],
            },
            3 => AethKind::Nak(NakCode::from_code(v)),
            _ => AethKind::Reserved(self.syndrome),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reth_bytes() {
        // VA 0x0000_0001_0000_0080, rkey 0xBEEF, len 1408
        let b = [
            0, 0, 0, 1, 0, 0, 0, 0x80, 0, 0, 0xBE, 0xEF, 0, 0, 0x05, 0x80,
        ];
        let r = RethRepr::parse(&Reth::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            RethRepr {
                va: 0x1_0000_0080,
                rkey: 0xBEEF,
                dma_len: 1408
            }
        );
        let mut out = [0xA5; 16];
        r.emit(&mut out);
        assert_eq!(out, b);
        assert!(Reth::new_checked(&b[..15]).is_err());
    }

    #[test]
    fn deth_bytes() {
        // perftest Q_Key 0x11111111, source QP 0x000123, reserved byte ignored on parse
        let b = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x01, 0x23];
        let r = DethRepr::parse(&Deth::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            DethRepr {
                qkey: 0x1111_1111,
                src_qp: 0x123
            }
        );
        let mut out = [0xA5; 8];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn atomic_bytes() {
        let mut b = [0u8; 28];
        b[7] = 8;
        b[11] = 5;
        b[19] = 1;
        b[27] = 2;
        let r = AtomicEthRepr::parse(&AtomicEth::new_checked(&b[..]).unwrap());
        assert_eq!(
            r,
            AtomicEthRepr {
                va: 8,
                rkey: 5,
                swap_add: 1,
                compare: 2
            }
        );
        let mut out = [0xA5; 28];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn aeth_syndromes() {
        let b = [0x1F, 0x00, 0x00, 0x2A];
        let a = AethRepr::parse(&Aeth::new_checked(&b[..]).unwrap());
        assert_eq!(a, AethRepr::ack(42));
        assert_eq!(
            a.kind(),
            AethKind::Ack {
                code: 31,
                credits: None
            }
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x0A,
                msn: 0
            }
            .kind(),
            AethKind::Ack {
                code: 10,
                credits: Some(32)
            }
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x2C,
                msn: 0
            }
            .kind(),
            AethKind::RnrNak {
                timer: 12,
                usec: 640
            }
        );
        assert_eq!(
            AethRepr::rnr_nak(0, 0).kind(),
            AethKind::RnrNak {
                timer: 0,
                usec: 655_360
            }
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x60,
                msn: 0
            }
            .kind(),
            AethKind::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(AethRepr::nak(NakCode::RemoteAccessError, 1).syndrome, 0x62);
        assert_eq!(
            AethRepr {
                syndrome: 0x63,
                msn: 0
            }
            .kind(),
            AethKind::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x67,
                msn: 0
            }
            .kind(),
            AethKind::Nak(NakCode::Reserved(7))
        );
        assert_eq!(
            AethRepr {
                syndrome: 0x41,
                msn: 0
            }
            .kind(),
            AethKind::Reserved(0x41)
        );
        let mut out = [0u8; 4];
        AethRepr::nak(NakCode::InvalidRequest, 0xABCDEF).emit(&mut out);
        assert_eq!(out, [0x61, 0xAB, 0xCD, 0xEF]);
    }
}
