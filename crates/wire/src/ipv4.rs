//! IPv4 header (RFC 791) with header-checksum build and verify.

use crate::bytes::{be_u16, ones_complement_sum, set_be_u16};
use crate::{Error, Result};
use core::net::Ipv4Addr;

mod field {
    use crate::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const TOS: usize = 1;
    pub(super) const LENGTH: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const FLG_OFF: Field = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Field = 10..12;
    pub(super) const SRC: Field = 12..16;
    pub(super) const DST: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol numbers used here.
pub mod protocol {
    /// ICMP
    pub const ICMP: u8 = 1;
    /// UDP
    pub const UDP: u8 = 17;
}

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap and check: version 4, IHL ≥ 5, header and total length fit the buffer.
    ///
    /// Bytes after `total_len` (Ethernet padding) are allowed and ignored by [`Packet::payload`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if p.version() != 4 {
            return Err(Error::Malformed);
        }
        let hl = p.header_len();
        if hl < HEADER_LEN || usize::from(p.total_len()) < hl {
            return Err(Error::Malformed);
        }
        if len < usize::from(p.total_len()) {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0F) * 4
    }
    /// DSCP (upper six bits of the ToS byte).
    pub fn dscp(&self) -> u8 {
        self.b()[field::TOS] >> 2
    }
    /// ECN (lower two bits of the ToS byte).
    pub fn ecn(&self) -> u8 {
        self.b()[field::TOS] & 3
    }
    /// Total length.
    pub fn total_len(&self) -> u16 {
        be_u16(&self.b()[field::LENGTH])
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be_u16(&self.b()[field::IDENT])
    }
    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.b()[field::FLG_OFF.start] & 0x40 != 0
    }
    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.b()[field::FLG_OFF.start] & 0x20 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be_u16(&self.b()[field::FLG_OFF]) & 0x1FFF) * 8
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    /// Protocol number.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }
    /// Header checksum as on the wire.
    pub fn checksum(&self) -> u16 {
        be_u16(&self.b()[field::CHECKSUM])
    }
    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        ones_complement_sum(&self.b()[..self.header_len()]) == 0xFFFF
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The header bytes (including options).
    pub fn header(&self) -> &'a [u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }
    /// Payload up to `total_len` (Ethernet padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

/// Compute the header checksum of `header` (its checksum field is treated as zero).
pub fn header_checksum(header: &[u8]) -> u16 {
    let mut sum = u32::from(ones_complement_sum(header));
    // remove the stored checksum from the sum
    sum += u32::from(!be_u16(&header[field::CHECKSUM]));
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// The meaning of an option-less IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number of the payload.
    pub protocol: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// Time to live.
    pub ttl: u8,
}

impl Repr {
    /// A header as Linux rxe and the HSB FPGA build it: ToS 0, ID 0, DF, TTL 64.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, payload_len: usize) -> Repr {
        Repr {
            src,
            dst,
            protocol,
            payload_len,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
        }
    }

    /// Parse a checked packet. Fragments and options are [`Error::Unsupported`]; a bad
    /// header checksum is [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if p.header_len() != HEADER_LEN || p.more_frags() || p.frag_offset() != 0 {
            return Err(Error::Unsupported);
        }
        if !p.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - HEADER_LEN,
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            ttl: p.ttl(),
        })
    }

    /// Always 20.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the 20-byte header (with a correct checksum) into `buf`.
    ///
    /// `payload_len` is truncated to what a 16-bit total length can hold; callers that
    /// build datagrams check the size first (see [`crate::roce`]).
    pub fn emit(&self, buf: &mut [u8]) {
        let buf = &mut buf[..HEADER_LEN];
        buf[field::VER_IHL] = 0x45;
        buf[field::TOS] = (self.dscp << 2) | (self.ecn & 3);
        set_be_u16(
            &mut buf[field::LENGTH],
            (HEADER_LEN + self.payload_len) as u16,
        );
        set_be_u16(&mut buf[field::IDENT], self.ident);
        set_be_u16(
            &mut buf[field::FLG_OFF],
            if self.dont_frag { 0x4000 } else { 0 },
        );
        buf[field::TTL] = self.ttl;
        buf[field::PROTOCOL] = self.protocol;
        set_be_u16(&mut buf[field::CHECKSUM], 0);
        buf[field::SRC].copy_from_slice(&self.src.octets());
        buf[field::DST].copy_from_slice(&self.dst.octets());
        let c = header_checksum(buf);
        set_be_u16(&mut buf[field::CHECKSUM], c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The HSB FPGA's header for a 1408-byte RoCE payload: ToS 0, ID 0, DF, TTL 64, UDP,
    // 192.168.0.2 -> 192.168.0.101. Checksum computed independently with Python (RFC 1071).
    static HSB: [u8; 20] = [
        0x45, 0x00, 0x05, 0xc8, // ver/ihl, tos, total length 1480
        0x00, 0x00, 0x40, 0x00, // id 0, DF
        0x40, 0x11, 0xb3, 0x6d, // ttl 64, udp, checksum
        192, 168, 0, 2, // src
        192, 168, 0, 101, // dst
    ];

    #[test]
    fn deconstruct() {
        let mut b = HSB.to_vec();
        b.resize(1480, 0);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.total_len(), 1480);
        assert!(p.dont_frag());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::UDP);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 1460);
    }

    #[test]
    fn emit_matches() {
        let r = Repr::new(
            Ipv4Addr::new(192, 168, 0, 2),
            Ipv4Addr::new(192, 168, 0, 101),
            17,
            1460,
        );
        let mut buf = [0xA5u8; 20];
        r.emit(&mut buf);
        assert_eq!(buf, HSB);
    }

    #[test]
    fn bad_checksum_and_lengths() {
        let mut b = HSB.to_vec();
        b.resize(1480, 0);
        b[10] ^= 1;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
        assert_eq!(Packet::new_checked(&HSB[..]).unwrap_err(), Error::Truncated);
        let mut v = HSB;
        v[0] = 0x65;
        assert_eq!(Packet::new_checked(&v[..]).unwrap_err(), Error::Malformed);
        let mut ihl = HSB;
        ihl[0] = 0x44;
        assert_eq!(Packet::new_checked(&ihl[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn ecn_dscp_split() {
        let mut r = Repr::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 17, 0);
        r.dscp = 26;
        r.ecn = 2;
        let mut buf = [0u8; 20];
        r.emit(&mut buf);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.dscp(), p.ecn()), (26, 2));
        assert_eq!(Repr::parse(&p).unwrap(), r);
    }
}
