use super::bth::{Bth, BthRepr, HEADER_LEN as BTH_LEN};
use super::ext::{AethRepr, AtomicEthRepr, DethRepr, RethRepr};
use super::opcode::HeaderSet;
use crate::bytes::{be_u32, be_u64, le_u32, set_be_u32, set_be_u64};
use crate::{Error, Result};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// Pad bytes needed after a payload of `len` bytes: `(-len) & 3`.
#[inline]
pub const fn pad_for(len: usize) -> u8 {
    (len.wrapping_neg() & 3) as u8
}

/// Header kinds in wire order with their lengths.
const ORDER: [(HeaderSet, usize); 9] = [
    (HeaderSet::RDETH, 4),
    (HeaderSet::DETH, 8),
    (HeaderSet::RETH, 16),
    (HeaderSet::ATOMIC_ETH, 28),
    (HeaderSet::AETH, 4),
    (HeaderSet::ATOMIC_ACK_ETH, 8),
    (HeaderSet::IMMDT, 4),
    (HeaderSet::IETH, 4),
    (HeaderSet::CNP_RSVD, 16),
];

/// Offset (from the start of the BTH) of extended header `which`, if `set` has it.
fn offset_of(set: HeaderSet, which: HeaderSet) -> Option<usize> {
    if !set.has(which) {
        return None;
    }
    let mut off = BTH_LEN;
    for &(h, len) in ORDER.iter() {
        if h == which {
            return Some(off);
        }
        if set.has(h) {
            off += len;
        }
    }
    None
}

/// A whole InfiniBand transport packet as carried in a RoCE v2 UDP payload:
/// BTH, extended headers, payload, pad, ICRC.
///
/// An opcode this crate does not define is read as BTH + payload.
#[derive(Debug, Clone)]
pub struct IbPacket<T: AsRef<[u8]>> {
    buffer: T,
    headers: HeaderSet,
}

impl<T: AsRef<[u8]>> IbPacket<T> {
    /// Wrap and check: BTH, the opcode's extended headers and the ICRC fit; PadCnt does not
    /// exceed the payload area; payload-less opcodes carry no payload.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < BTH_LEN + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let bth = Bth::new_unchecked(b);
        let known = bth.opcode().headers();
        let headers = known.unwrap_or(HeaderSet::PAYLOAD);
        let fixed = BTH_LEN + headers.ext_len() + ICRC_LEN;
        if b.len() < fixed {
            return Err(Error::Truncated);
        }
        let rest = b.len() - fixed;
        if headers.has(HeaderSet::PAYLOAD) {
            if usize::from(bth.pad_count()) > rest {
                return Err(Error::Malformed);
            }
        } else if rest != 0 || bth.pad_count() != 0 {
            return Err(Error::Malformed);
        }
        Ok(IbPacket { buffer, headers })
    }

    /// The extended headers (and payload flag) of this packet's opcode.
    pub fn header_set(&self) -> HeaderSet {
        self.headers
    }

    /// The BTH view.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(&self.buffer.as_ref()[..BTH_LEN])
    }

    fn at(&self, which: HeaderSet, len: usize) -> Option<&[u8]> {
        offset_of(self.headers, which).map(|o| &self.buffer.as_ref()[o..o + len])
    }

    /// RETH, if the opcode has one.
    pub fn reth(&self) -> Option<RethRepr> {
        self.at(HeaderSet::RETH, 16)
            .map(|b| RethRepr::parse(&super::ext::Reth::new_unchecked(b)))
    }
    /// AETH, if the opcode has one.
    pub fn aeth(&self) -> Option<AethRepr> {
        self.at(HeaderSet::AETH, 4)
            .map(|b| AethRepr::parse(&super::ext::Aeth::new_unchecked(b)))
    }
    /// DETH, if the opcode has one.
    pub fn deth(&self) -> Option<DethRepr> {
        self.at(HeaderSet::DETH, 8)
            .map(|b| DethRepr::parse(&super::ext::Deth::new_unchecked(b)))
    }
    /// AtomicETH, if the opcode has one.
    pub fn atomic_eth(&self) -> Option<AtomicEthRepr> {
        self.at(HeaderSet::ATOMIC_ETH, 28)
            .map(|b| AtomicEthRepr::parse(&super::ext::AtomicEth::new_unchecked(b)))
    }
    /// AtomicAckETH (original remote data), if the opcode has one.
    pub fn atomic_ack(&self) -> Option<u64> {
        self.at(HeaderSet::ATOMIC_ACK_ETH, 8).map(be_u64)
    }
    /// Immediate data as a big-endian number, if the opcode has one.
    pub fn immdt(&self) -> Option<u32> {
        self.at(HeaderSet::IMMDT, 4).map(be_u32)
    }
    /// The R_Key to invalidate (IETH), if the opcode has one.
    pub fn ieth(&self) -> Option<u32> {
        self.at(HeaderSet::IETH, 4).map(be_u32)
    }
    /// RDETH EE-context (24 bits), if the opcode has one.
    pub fn rdeth(&self) -> Option<u32> {
        self.at(HeaderSet::RDETH, 4)
            .map(|b| be_u32(b) & 0x00FF_FFFF)
    }

    /// Bytes from the start of the BTH to the payload.
    pub fn header_len(&self) -> usize {
        BTH_LEN + self.headers.ext_len()
    }

    /// Payload length (without pad).
    pub fn payload_len(&self) -> usize {
        self.buffer.as_ref().len()
            - self.header_len()
            - ICRC_LEN
            - usize::from(self.bth().pad_count())
    }

    /// The ICRC value (trailer read least-significant byte first).
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        le_u32(&b[b.len() - ICRC_LEN..])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> IbPacket<&'a T> {
    /// The payload.
    pub fn payload(&self) -> &'a [u8] {
        let h = self.header_len();
        &self.buffer.as_ref()[h..h + self.payload_len()]
    }
    /// The pad bytes (should be zero).
    pub fn pad(&self) -> &'a [u8] {
        let b = self.buffer.as_ref();
        let end = b.len() - ICRC_LEN;
        &b[end - usize::from(self.bth().pad_count())..end]
    }
    /// The whole packet: BTH … pad, ICRC.
    pub fn bytes(&self) -> &'a [u8] {
        self.buffer.as_ref()
    }
    /// Everything the ICRC covers after the UDP header: BTH … pad.
    pub fn icrc_covered(&self) -> &'a [u8] {
        let b = self.buffer.as_ref();
        &b[..b.len() - ICRC_LEN]
    }
}

/// The meaning of an IB transport packet (without payload bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IbRepr {
    /// Base transport header.
    pub bth: BthRepr,
    /// RDETH EE-context (RD only).
    pub rdeth: Option<u32>,
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH (WRITE FIRST/ONLY, READ request).
    pub reth: Option<RethRepr>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (ACK, READ response FIRST/LAST/ONLY).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH.
    pub atomic_ack: Option<u64>,
    /// Immediate data (big-endian number as on the wire).
    pub immdt: Option<u32>,
    /// IETH R_Key.
    pub ieth: Option<u32>,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl IbRepr {
    /// Read from a checked packet (one pass over the opcode's extended headers).
    pub fn parse<T: AsRef<[u8]>>(p: &IbPacket<T>) -> IbRepr {
        let b = p.buffer.as_ref();
        let mut r = IbRepr {
            bth: BthRepr::parse(&p.bth()),
            payload_len: p.payload_len(),
            ..IbRepr::default()
        };
        r.parse_ext(p.headers, &b[BTH_LEN..]);
        r
    }

    /// Read the BTH and extended headers of a packet whose payload (`payload_len` bytes)
    /// and tail are elsewhere — received into separate buffers, say. `headers` must be
    /// exactly the BTH and the extended headers its opcode has (an opcode this crate does
    /// not define has none).
    #[inline(always)]
    pub fn parse_headers(headers: &[u8], payload_len: usize) -> Result<IbRepr> {
        if headers.len() < BTH_LEN {
            return Err(Error::Truncated);
        }
        let bth = Bth::new_unchecked(&headers[..BTH_LEN]);
        let set = bth.opcode().headers().unwrap_or(HeaderSet::PAYLOAD);
        if headers.len() != BTH_LEN + set.ext_len() {
            return Err(Error::Malformed);
        }
        if !set.has(HeaderSet::PAYLOAD) && (payload_len != 0 || bth.pad_count() != 0) {
            return Err(Error::Malformed);
        }
        let mut r = IbRepr {
            bth: BthRepr::parse(&bth),
            payload_len,
            ..IbRepr::default()
        };
        r.parse_ext(set, &headers[BTH_LEN..]);
        Ok(r)
    }

    /// Fill the extended headers of `set` from `b` (the bytes after the BTH; long enough).
    #[inline(always)]
    fn parse_ext(&mut self, set: HeaderSet, b: &[u8]) {
        use super::ext::{Aeth, AtomicEth, Deth, Reth};
        let mut off = 0;
        for &(h, len) in ORDER.iter() {
            if !set.has(h) {
                continue;
            }
            let x = &b[off..off + len];
            if h == HeaderSet::RDETH {
                self.rdeth = Some(be_u32(x) & 0x00FF_FFFF);
            } else if h == HeaderSet::DETH {
                self.deth = Some(DethRepr::parse(&Deth::new_unchecked(x)));
            } else if h == HeaderSet::RETH {
                self.reth = Some(RethRepr::parse(&Reth::new_unchecked(x)));
            } else if h == HeaderSet::ATOMIC_ETH {
                self.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEth::new_unchecked(x)));
            } else if h == HeaderSet::AETH {
                self.aeth = Some(AethRepr::parse(&Aeth::new_unchecked(x)));
            } else if h == HeaderSet::ATOMIC_ACK_ETH {
                self.atomic_ack = Some(be_u64(x));
            } else if h == HeaderSet::IMMDT {
                self.immdt = Some(be_u32(x));
            } else if h == HeaderSet::IETH {
                self.ieth = Some(be_u32(x));
            }
            off += len;
        }
    }

    fn headers(&self) -> HeaderSet {
        self.bth.opcode.headers().unwrap_or(HeaderSet::PAYLOAD)
    }

    /// BTH + extended headers.
    pub fn header_len(&self) -> usize {
        BTH_LEN + self.headers().ext_len()
    }

    /// Whole packet: headers, payload, pad (`bth.pad_count`), ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len + usize::from(self.bth.pad_count & 3) + ICRC_LEN
    }

    /// Write BTH and extended headers into `buf[..header_len()]`. Headers the opcode has
    /// but this repr leaves `None` are written as zeros.
    pub fn emit_headers(&self, buf: &mut [u8]) {
        let set = self.headers();
        self.bth.emit(&mut Bth::new_unchecked(&mut buf[..BTH_LEN]));
        let mut off = BTH_LEN;
        for &(h, len) in ORDER.iter() {
            if !set.has(h) {
                continue;
            }
            let b = &mut buf[off..off + len];
            match h {
                HeaderSet::RDETH => set_be_u32(b, self.rdeth.unwrap_or(0) & 0x00FF_FFFF),
                HeaderSet::DETH => self.deth.unwrap_or_default().emit(b),
                HeaderSet::RETH => self.reth.unwrap_or_default().emit(b),
                HeaderSet::ATOMIC_ETH => self.atomic_eth.unwrap_or_default().emit(b),
                HeaderSet::AETH => self.aeth.unwrap_or_default().emit(b),
                HeaderSet::ATOMIC_ACK_ETH => set_be_u64(b, self.atomic_ack.unwrap_or(0)),
                HeaderSet::IMMDT => set_be_u32(b, self.immdt.unwrap_or(0)),
                HeaderSet::IETH => set_be_u32(b, self.ieth.unwrap_or(0)),
                _ => b.fill(0),
            }
            off += len;
        }
    }

    /// Write headers, `payload` (must be `payload_len` bytes), zero pad, and a zero ICRC
    /// placeholder into `buf[..buffer_len()]`. Fill the ICRC with [`crate::icrc`].
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) {
        let h = self.header_len();
        self.emit_headers(buf);
        buf[h..h + payload.len()].copy_from_slice(payload);
        let end = self.buffer_len();
        buf[h + payload.len()..end].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Opcode;
    use super::*;

    #[test]
    fn headers_alone_parse_as_the_whole_packet() {
        // WRITE ONLY with immediate: BTH, RETH, ImmDt, 5 payload bytes, 3 pad, ICRC
        let ib = IbRepr {
            bth: BthRepr {
                opcode: crate::ib::Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                dest_qp: 0x42,
                psn: 7,
                pad_count: 3,
                ..Default::default()
            },
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: 9,
                dma_len: 5,
            }),
            immdt: Some(0xC0FFEE),
            payload_len: 5,
            ..Default::default()
        };
        let mut buf = vec![0u8; ib.buffer_len()];
        ib.emit(&mut buf, &[1, 2, 3, 4, 5]);
        let whole = IbRepr::parse(&IbPacket::new_checked(&buf[..]).unwrap());
        let h = ib.header_len();
        assert_eq!(IbRepr::parse_headers(&buf[..h], 5).unwrap(), whole);
        assert_eq!(whole, ib);
        assert_eq!(
            IbRepr::parse_headers(&buf[..h - 1], 5).unwrap_err(),
            Error::Malformed
        );
        assert_eq!(
            IbRepr::parse_headers(&buf[..8], 5).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn pad_rule() {
        assert_eq!(pad_for(0), 0);
        assert_eq!(pad_for(1), 3);
        assert_eq!(pad_for(2), 2);
        assert_eq!(pad_for(3), 1);
        assert_eq!(pad_for(4096), 0);
    }

    // UD SEND ONLY WITH IMMEDIATE, QP 0x11, PSN 5, Q_Key 0x11111111, src QP 0x22, imm 0xdeadbeef,
    // payload "abc" + 1 pad byte, ICRC bytes 01 02 03 04.
    static UD: [u8; 36] = [
        0x65, 0x10, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x05, // BTH pad 1
        0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x22, // DETH
        0xDE, 0xAD, 0xBE, 0xEF, // ImmDt
        b'a', b'b', b'c', 0x00, // payload + pad
        0x01, 0x02, 0x03, 0x04, // ICRC
        0, 0, 0, 0,
    ];

    #[test]
    fn ud_send_imm() {
        let p = IbPacket::new_checked(&UD[..32]).unwrap();
        let r = IbRepr::parse(&p);
        assert_eq!(r.bth.opcode, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            r.deth,
            Some(DethRepr {
                qkey: 0x1111_1111,
                src_qp: 0x22
            })
        );
        assert_eq!(r.immdt, Some(0xDEAD_BEEF));
        assert_eq!(r.reth, None);
        assert_eq!(p.payload(), b"abc");
        assert_eq!(p.pad(), &[0]);
        assert_eq!(p.icrc(), 0x0403_0201);
        assert_eq!(r.buffer_len(), 32);
        let mut out = [0xA5u8; 32];
        r.emit(&mut out, b"abc");
        assert_eq!(out[..28], UD[..28]);
        assert_eq!(out[28..], [0, 0, 0, 0]);
    }

    #[test]
    fn length_rules() {
        // pad count larger than the payload area
        let mut b = UD;
        b[1] = 0x30;
        assert_eq!(
            IbPacket::new_checked(&b[..28]).unwrap_err(),
            Error::Malformed
        );
        // DETH does not fit
        assert_eq!(
            IbPacket::new_checked(&UD[..18]).unwrap_err(),
            Error::Truncated
        );
        // ACK with trailing payload is malformed
        let mut ack = [0u8; 24];
        ack[0] = 0x11;
        assert_eq!(
            IbPacket::new_checked(&ack[..20]).unwrap().aeth(),
            Some(AethRepr::default())
        );
        assert_eq!(
            IbPacket::new_checked(&ack[..]).unwrap_err(),
            Error::Malformed
        );
        // unknown opcode: all payload
        let mut unk = [0u8; 20];
        unk[0] = 0xE3;
        assert_eq!(IbPacket::new_checked(&unk[..]).unwrap().payload().len(), 4);
    }

    #[test]
    fn atomic_ack_layout() {
        let r = IbRepr {
            bth: BthRepr {
                opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
                ..BthRepr::default()
            },
            aeth: Some(AethRepr::ack(9)),
            atomic_ack: Some(0x0102_0304_0506_0708),
            ..IbRepr::default()
        };
        let mut buf = vec![0xA5; r.buffer_len()];
        r.emit(&mut buf, &[]);
        assert_eq!(buf.len(), 12 + 4 + 8 + 4);
        assert_eq!(&buf[12..16], &[0x1F, 0, 0, 9]);
        assert_eq!(&buf[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(IbRepr::parse(&IbPacket::new_checked(&buf[..]).unwrap()), r);
    }
}
