//! IPv6 fixed header (RFC 8200). Extension headers are not parsed: RoCE v2 puts UDP
//! directly after the fixed header.

use crate::bytes::{be_u16, be_u32, set_be_u16, set_be_u32};
use crate::{Error, Result};
use core::net::Ipv6Addr;

mod field {
    use crate::Field;
    pub(super) const VER_TC_FL: Field = 0..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const NXT_HDR: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Field = 8..24;
    pub(super) const DST: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap and check: version 6, header and payload length fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if p.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < HEADER_LEN + usize::from(p.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    fn word0(&self) -> u32 {
        be_u32(&self.buffer.as_ref()[field::VER_TC_FL])
    }
    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0xF_FFFF
    }
    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::LENGTH])
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC])
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST])
    }
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The 40 header bytes.
    pub fn header(&self) -> &'a [u8] {
        &self.buffer.as_ref()[..HEADER_LEN]
    }
    /// Payload (`payload_len` bytes).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

/// The meaning of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source.
    pub src: Ipv6Addr,
    /// Destination.
    pub dst: Ipv6Addr,
    /// Next header (17 = UDP).
    pub next_header: u8,
    /// Payload length.
    pub payload_len: usize,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Repr {
    /// Read from a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
        }
    }

    /// Always 40.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the 40-byte header.
    pub fn emit(&self, buf: &mut [u8]) {
        let w0 =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xF_FFFF);
        set_be_u32(&mut buf[field::VER_TC_FL], w0);
        set_be_u16(&mut buf[field::LENGTH], self.payload_len as u16);
        buf[field::NXT_HDR] = self.next_header;
        buf[field::HOP_LIMIT] = self.hop_limit;
        buf[field::SRC].copy_from_slice(&self.src.octets());
        buf[field::DST].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 40] = [
        0x6b, 0x81, 0x23, 0x45, // v6, tc 0xb8, flow 0x12345
        0x00, 0x08, 0x11, 0x40, // plen 8, UDP, hop 64
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // fe80::1
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, // fe80::2
    ];

    #[test]
    fn parse_emit() {
        let mut b = HDR.to_vec();
        b.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = Packet::new_checked(&b[..]).unwrap();
        let r = Repr::parse(&p);
        assert_eq!(r.traffic_class, 0xb8);
        assert_eq!(r.flow_label, 0x12345);
        assert_eq!(r.hop_limit, 64);
        assert_eq!(r.src, "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut out = [0xA5u8; 40];
        r.emit(&mut out);
        assert_eq!(out, HDR);
    }

    #[test]
    fn truncated_payload() {
        assert_eq!(Packet::new_checked(&HDR[..]).unwrap_err(), Error::Truncated);
        let mut v4 = HDR;
        v4[0] = 0x4b;
        assert_eq!(
            Packet::new_checked(&v4[..39]).unwrap_err(),
            Error::Truncated
        );
    }
}
