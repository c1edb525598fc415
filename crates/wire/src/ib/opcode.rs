use core::fmt;

/// Transport service of an opcode (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection (0x00..0x1F)
    Rc,
    /// Unreliable connection (0x20..0x3F)
    Uc,
    /// Reliable datagram (0x40..0x5F) — not used by RoCE
    Rd,
    /// Unreliable datagram (0x60..0x7F)
    Ud,
    /// Congestion notification (0x80..0x9F)
    Cnp,
    /// Reserved (0xA0..0xDF)
    Reserved,
    /// Manufacturer specific (0xE0..0xFF)
    Manufacturer,
}

/// Which extended headers follow the BTH, and whether a payload does.
///
/// Headers always appear in this order: RDETH, DETH, RETH, AtomicETH, AETH,
/// AtomicAckETH, ImmDt, IETH (Linux rxe `rxe_opcode[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HeaderSet(u16);

impl HeaderSet {
    /// Reliable datagram extended transport header (4).
    pub const RDETH: HeaderSet = HeaderSet(1 << 0);
    /// Datagram extended transport header (8).
    pub const DETH: HeaderSet = HeaderSet(1 << 1);
    /// RDMA extended transport header (16).
    pub const RETH: HeaderSet = HeaderSet(1 << 2);
    /// Atomic extended transport header (28).
    pub const ATOMIC_ETH: HeaderSet = HeaderSet(1 << 3);
    /// ACK extended transport header (4).
    pub const AETH: HeaderSet = HeaderSet(1 << 4);
    /// Atomic ACK extended transport header (8).
    pub const ATOMIC_ACK_ETH: HeaderSet = HeaderSet(1 << 5);
    /// Immediate data (4).
    pub const IMMDT: HeaderSet = HeaderSet(1 << 6);
    /// Invalidate extended transport header (4).
    pub const IETH: HeaderSet = HeaderSet(1 << 7);
    /// 16 reserved bytes of a RoCE v2 CNP.
    pub const CNP_RSVD: HeaderSet = HeaderSet(1 << 8);
    /// The packet carries a payload (and so PadCnt applies).
    pub const PAYLOAD: HeaderSet = HeaderSet(1 << 9);
    /// No headers, no payload.
    pub const NONE: HeaderSet = HeaderSet(0);

    /// Union.
    pub const fn with(self, o: HeaderSet) -> HeaderSet {
        HeaderSet(self.0 | o.0)
    }
    /// True when every bit of `o` is set.
    pub const fn has(self, o: HeaderSet) -> bool {
        self.0 & o.0 == o.0
    }

    /// Bytes of extended headers (between the BTH and the payload).
    pub const fn ext_len(self) -> usize {
        let mut n = 0;
        if self.has(Self::RDETH) {
            n += 4;
        }
        if self.has(Self::DETH) {
            n += 8;
        }
        if self.has(Self::RETH) {
            n += 16;
        }
        if self.has(Self::ATOMIC_ETH) {
            n += 28;
        }
        if self.has(Self::AETH) {
            n += 4;
        }
        if self.has(Self::ATOMIC_ACK_ETH) {
            n += 8;
        }
        if self.has(Self::IMMDT) {
            n += 4;
        }
        if self.has(Self::IETH) {
            n += 4;
        }
        if self.has(Self::CNP_RSVD) {
            n += 16;
        }
        n
    }
}

/// A BTH opcode. Every byte value is representable; [`Opcode::name`] says whether it is
/// a defined one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Opcode(pub u8);

macro_rules! ops {
    ($( $name:ident = $val:expr ),* $(,)?) => {
        impl Opcode {
            $( #[doc = concat!("`", stringify!($name), "`")] pub const $name: Opcode = Opcode($val); )*
        }
        const NAMED: &[(u8, &str)] = &[ $( ($val, stringify!($name)) ),* ];
    };
}

ops! {
    RC_SEND_FIRST = 0x00, RC_SEND_MIDDLE = 0x01, RC_SEND_LAST = 0x02,
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, RC_SEND_ONLY = 0x04, RC_SEND_ONLY_WITH_IMMEDIATE = 0x05,
    RC_RDMA_WRITE_FIRST = 0x06, RC_RDMA_WRITE_MIDDLE = 0x07, RC_RDMA_WRITE_LAST = 0x08,
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, RC_RDMA_WRITE_ONLY = 0x0A,
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B, RC_RDMA_READ_REQUEST = 0x0C,
    RC_RDMA_READ_RESPONSE_FIRST = 0x0D, RC_RDMA_READ_RESPONSE_MIDDLE = 0x0E,
    RC_RDMA_READ_RESPONSE_LAST = 0x0F, RC_RDMA_READ_RESPONSE_ONLY = 0x10,
    RC_ACKNOWLEDGE = 0x11, RC_ATOMIC_ACKNOWLEDGE = 0x12, RC_COMPARE_SWAP = 0x13,
    RC_FETCH_ADD = 0x14, RC_SEND_LAST_WITH_INVALIDATE = 0x16, RC_SEND_ONLY_WITH_INVALIDATE = 0x17,
    UC_SEND_FIRST = 0x20, UC_SEND_MIDDLE = 0x21, UC_SEND_LAST = 0x22,
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, UC_SEND_ONLY = 0x24, UC_SEND_ONLY_WITH_IMMEDIATE = 0x25,
    UC_RDMA_WRITE_FIRST = 0x26, UC_RDMA_WRITE_MIDDLE = 0x27, UC_RDMA_WRITE_LAST = 0x28,
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, UC_RDMA_WRITE_ONLY = 0x2A,
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2B,
    RD_SEND_FIRST = 0x40, RD_SEND_MIDDLE = 0x41, RD_SEND_LAST = 0x42,
    RD_SEND_LAST_WITH_IMMEDIATE = 0x43, RD_SEND_ONLY = 0x44, RD_SEND_ONLY_WITH_IMMEDIATE = 0x45,
    RD_RDMA_WRITE_FIRST = 0x46, RD_RDMA_WRITE_MIDDLE = 0x47, RD_RDMA_WRITE_LAST = 0x48,
    RD_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x49, RD_RDMA_WRITE_ONLY = 0x4A,
    RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x4B, RD_RDMA_READ_REQUEST = 0x4C,
    RD_RDMA_READ_RESPONSE_FIRST = 0x4D, RD_RDMA_READ_RESPONSE_MIDDLE = 0x4E,
    RD_RDMA_READ_RESPONSE_LAST = 0x4F, RD_RDMA_READ_RESPONSE_ONLY = 0x50,
    RD_ACKNOWLEDGE = 0x51, RD_ATOMIC_ACKNOWLEDGE = 0x52, RD_COMPARE_SWAP = 0x53, RD_FETCH_ADD = 0x54,
    UD_SEND_ONLY = 0x64, UD_SEND_ONLY_WITH_IMMEDIATE = 0x65,
    CNP = 0x81,
}

impl Opcode {
    /// Name as used by scapy and this project (`RC_SEND_FIRST`, …, `CNP`), or `None`.
    pub fn name(self) -> Option<&'static str> {
        NAMED.iter().find(|(v, _)| *v == self.0).map(|(_, n)| *n)
    }

    /// `transport()` for const contexts.
    const fn transport_bits(self) -> u8 {
        self.0 >> 5
    }

    /// The transport service.
    pub fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            7 => Transport::Manufacturer,
            _ => Transport::Reserved,
        }
    }

    /// The operation bits (low five).
    pub fn op(self) -> u8 {
        self.0 & 0x1F
    }

    /// The opcode of operation `op` (low five bits) on `transport`.
    pub fn with_transport(transport: Transport, op: u8) -> Opcode {
        let prefix = match transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Rd => 0x40,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
            Transport::Reserved => 0xA0,
            Transport::Manufacturer => 0xE0,
        };
        Opcode(prefix | (op & 0x1F))
    }

    /// Extended headers and payload flag for a defined opcode; `None` for an undefined one.
    /// (A table lookup: this is asked several times per received packet.)
    pub fn headers(self) -> Option<HeaderSet> {
        HEADERS[usize::from(self.0)]
    }

    /// The length of the extension headers after the BTH (see [`Opcode::headers`]):
    /// `None` for an undefined opcode. One table load.
    #[inline]
    pub fn ext_len(self) -> Option<usize> {
        HEADERS[usize::from(self.0)].map(|_| usize::from(EXT_LENS[usize::from(self.0)]))
    }

    /// First packet of a multi-packet message (SEND/WRITE/READ-response FIRST).
    pub fn is_first(self) -> bool {
        matches!(self.op(), 0x00 | 0x06 | 0x0D)
    }
    /// Middle packet of a message.
    pub fn is_middle(self) -> bool {
        matches!(self.op(), 0x01 | 0x07 | 0x0E)
    }
    /// Last packet of a multi-packet message.
    pub fn is_last(self) -> bool {
        matches!(self.op(), 0x02 | 0x03 | 0x08 | 0x09 | 0x0F | 0x16)
    }
    /// A single-packet message.
    pub fn is_only(self) -> bool {
        matches!(self.op(), 0x04 | 0x05 | 0x0A | 0x0B | 0x10 | 0x17)
    }
    /// SEND family.
    pub fn is_send(self) -> bool {
        matches!(self.op(), 0x00..=0x05 | 0x16 | 0x17)
    }
    /// RDMA WRITE family.
    pub fn is_write(self) -> bool {
        matches!(self.op(), 0x06..=0x0B)
    }
    /// RDMA READ response family.
    pub fn is_read_response(self) -> bool {
        matches!(self.op(), 0x0D..=0x10)
    }
    /// Carries immediate data.
    pub fn has_immediate(self) -> bool {
        self.headers().is_some_and(|h| h.has(HeaderSet::IMMDT))
    }
}

/// [`Opcode::headers`] of every byte value, built at compile time from [`NAMED`] and the
/// rules of Linux rxe's `rxe_opcode[]`.
static HEADERS: [Option<HeaderSet>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < NAMED.len() {
        let v = NAMED[i].0;
        t[v as usize] = headers_of(Opcode(v));
        i += 1;
    }
    t
};

/// The extension headers' length of every byte value's [`HEADERS`] (0 where undefined),
/// so that a packet's layout costs one load.
static EXT_LENS: [u8; 256] = {
    let mut t = [0; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(h) = HEADERS[i] {
            t[i] = h.ext_len() as u8;
        }
        i += 1;
    }
    t
};

/// The headers of a defined opcode (see [`HEADERS`]).
const fn headers_of(o: Opcode) -> Option<HeaderSet> {
    if o.0 == Opcode::CNP.0 {
        return Some(HeaderSet::CNP_RSVD);
    }
    let p = HeaderSet::PAYLOAD;
    let base = match o.0 & 0x1F {
        0x00..=0x02 => p,
        0x03 => p.with(HeaderSet::IMMDT),
        0x04 => p,
        0x05 => p.with(HeaderSet::IMMDT),
        0x06 => p.with(HeaderSet::RETH),
        0x07 | 0x08 => p,
        0x09 => p.with(HeaderSet::IMMDT),
        0x0A => p.with(HeaderSet::RETH),
        0x0B => p.with(HeaderSet::RETH).with(HeaderSet::IMMDT),
        0x0C => HeaderSet::RETH,
        0x0D | 0x0F | 0x10 => p.with(HeaderSet::AETH),
        0x0E => p,
        0x11 => HeaderSet::AETH,
        0x12 => HeaderSet::AETH.with(HeaderSet::ATOMIC_ACK_ETH),
        0x13 | 0x14 => HeaderSet::ATOMIC_ETH,
        0x16 | 0x17 => p.with(HeaderSet::IETH),
        _ => return None,
    };
    Some(match o.transport_bits() {
        3 => base.with(HeaderSet::DETH), // UD
        // RD requests and responses carry RDETH; requests (not ACK/responses) also DETH.
        2 if matches!(o.0 & 0x1F, 0x0D..=0x12) => base.with(HeaderSet::RDETH),
        2 => base.with(HeaderSet::RDETH).with(HeaderSet::DETH),
        _ => base,
    })
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}(0x{:02x})", self.0),
            None => write!(f, "Opcode(0x{:02x})", self.0),
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:02x}", self.0),
        }
    }
}

impl From<u8> for Opcode {
    fn from(v: u8) -> Self {
        Opcode(v)
    }
}

impl From<Opcode> for u8 {
    fn from(v: Opcode) -> u8 {
        v.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_table_says_what_the_header_sets_say() {
        for b in 0..=255u8 {
            let o = Opcode(b);
            assert_eq!(o.ext_len(), o.headers().map(HeaderSet::ext_len), "{o:?}");
        }
        assert_eq!(Opcode::UC_RDMA_WRITE_ONLY.ext_len(), Some(16));
        assert_eq!(Opcode(0x1F).ext_len(), None);
    }

    #[test]
    fn table_matches_roce_reference() {
        // (opcode, ext header bytes, payload) — docs/reference/roce.md, the header table
        let rows: &[(u8, usize, bool)] = &[
            (0x00, 0, true),
            (0x03, 4, true),
            (0x04, 0, true),
            (0x06, 16, true),
            (0x0A, 16, true),
            (0x0B, 20, true),
            (0x0C, 16, false),
            (0x0D, 4, true),
            (0x0E, 0, true),
            (0x11, 4, false),
            (0x12, 12, false),
            (0x13, 28, false),
            (0x14, 28, false),
            (0x16, 4, true),
            (0x17, 4, true),
            (0x2A, 16, true),
            (0x2B, 20, true),
            (0x64, 8, true),
            (0x65, 12, true),
            (0x81, 16, false),
            (0x44, 12, true),
        ];
        for &(op, ext, pay) in rows {
            let h = Opcode(op).headers().unwrap();
            assert_eq!(h.ext_len(), ext, "opcode {op:#x}");
            assert_eq!(h.has(HeaderSet::PAYLOAD), pay, "opcode {op:#x}");
        }
    }

    #[test]
    fn undefined_opcodes() {
        for op in [0x15u8, 0x18, 0x2C, 0x30, 0x60, 0x66, 0x80, 0xA0, 0xE0, 0xFF] {
            assert_eq!(Opcode(op).headers(), None, "{op:#x}");
            assert_eq!(Opcode(op).name(), None);
        }
        assert_eq!(Opcode(0x2A).name(), Some("UC_RDMA_WRITE_ONLY"));
        assert_eq!(Opcode(0x65).to_string(), "UD_SEND_ONLY_WITH_IMMEDIATE");
        assert_eq!(Opcode(0xF0).to_string(), "0xf0");
        assert_eq!(
            Opcode::with_transport(Transport::Uc, 0x0A),
            Opcode::UC_RDMA_WRITE_ONLY
        );
    }

    #[test]
    fn message_position() {
        assert!(Opcode::RC_SEND_FIRST.is_first());
        assert!(Opcode::UC_RDMA_WRITE_MIDDLE.is_middle());
        assert!(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE.is_last());
        assert!(Opcode::UD_SEND_ONLY.is_only());
        assert!(Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.has_immediate());
        assert!(!Opcode::RC_ACKNOWLEDGE.has_immediate());
    }
}
