//! ICMPv4 echo request and reply (RFC 792).

use crate::bytes::{be_u16, ones_complement_sum, set_be_u16};
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const SEQ: Field = 6..8;
}

/// Header length of an echo message.
pub const HEADER_LEN: usize = 8;

/// A view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wrap and check the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }
    /// Message type (8 = echo request, 0 = echo reply).
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    /// Checksum as on the wire.
    pub fn checksum(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    /// Echo identifier.
    pub fn ident(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::IDENT])
    }
    /// Echo sequence number.
    pub fn seq(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::SEQ])
    }
    /// True when the checksum over the whole message is right.
    pub fn verify_checksum(&self) -> bool {
        cfg!(fuzzing) || ones_complement_sum(self.buffer.as_ref()) == 0xFFFF
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Echo data.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

/// An echo request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EchoRepr {
    /// true: echo request (type 8), false: echo reply (type 0).
    pub request: bool,
    /// Identifier.
    pub ident: u16,
    /// Sequence number.
    pub seq: u16,
    /// Length of the echo data that follows the header.
    pub data_len: usize,
}

impl EchoRepr {
    /// Parse an echo message; other types are [`Error::Unsupported`], a bad checksum
    /// [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<EchoRepr> {
        let request = match (p.msg_type(), p.code()) {
            (8, 0) => true,
            (0, 0) => false,
            _ => return Err(Error::Unsupported),
        };
        if !p.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(EchoRepr {
            request,
            ident: p.ident(),
            seq: p.seq(),
            data_len: p.buffer.as_ref().len() - HEADER_LEN,
        })
    }

    /// Header plus data length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data_len
    }

    /// Write header and `data` into `buf` (`buffer_len()` bytes) with the checksum.
    pub fn emit(&self, buf: &mut [u8], data: &[u8]) {
        let buf = &mut buf[..HEADER_LEN + data.len()];
        buf[field::TYPE] = if self.request { 8 } else { 0 };
        buf[field::CODE] = 0;
        set_be_u16(&mut buf[field::CHECKSUM], 0);
        set_be_u16(&mut buf[field::IDENT], self.ident);
        set_be_u16(&mut buf[field::SEQ], self.seq);
        buf[HEADER_LEN..].copy_from_slice(data);
        let c = !ones_complement_sum(buf);
        set_be_u16(&mut buf[field::CHECKSUM], c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ping -p 61 style request: id 0x1234 seq 1, data "abcd"; checksum from Python (RFC 1071)
    static ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum());
        let r = EchoRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            EchoRepr {
                request: true,
                ident: 0x1234,
                seq: 1,
                data_len: 4
            }
        );
        assert_eq!(p.data(), b"abcd");
        let mut out = [0xA5u8; 12];
        r.emit(&mut out, b"abcd");
        assert_eq!(out, ECHO);
    }

    #[test]
    fn corrupt_and_other_types() {
        let mut b = ECHO;
        b[9] ^= 0x10;
        assert_eq!(
            EchoRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        let mut u = ECHO;
        u[0] = 3;
        assert_eq!(
            EchoRepr::parse(&Packet::new_checked(&u[..]).unwrap()),
            Err(Error::Unsupported)
        );
    }
}
