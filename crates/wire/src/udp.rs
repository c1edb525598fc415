//! UDP header (RFC 768).

use crate::bytes::{be_u16, set_be_u16};
use crate::{Error, Result};

mod field {
    use crate::Field;
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const CHECKSUM: Field = 6..8;
}

/// Header length.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap and check: header fits, 8 ≤ length ≤ buffer.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(p.len());
        if l < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if l > len {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::DST_PORT])
    }
    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::LENGTH])
    }
    /// Never true for a checked packet (length ≥ 8); here for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Checksum as on the wire (RoCE senders put 0).
    pub fn checksum(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (`len - 8` bytes).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

/// The meaning of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length.
    pub payload_len: usize,
    /// Checksum to emit (RoCE: 0).
    pub checksum: u16,
}

impl Repr {
    /// Read from a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
            checksum: p.checksum(),
        }
    }

    /// Always 8.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the 8-byte header.
    pub fn emit(&self, buf: &mut [u8]) {
        set_be_u16(&mut buf[field::SRC_PORT], self.src_port);
        set_be_u16(&mut buf[field::DST_PORT], self.dst_port);
        set_be_u16(
            &mut buf[field::LENGTH],
            (HEADER_LEN + self.payload_len) as u16,
        );
        set_be_u16(&mut buf[field::CHECKSUM], self.checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DGRAM: [u8; 12] = [
        0x30, 0x00, 0x12, 0xb7, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&DGRAM[..]).unwrap();
        let r = Repr::parse(&p);
        assert_eq!(
            r,
            Repr {
                src_port: 12288,
                dst_port: 4791,
                payload_len: 4,
                checksum: 0
            }
        );
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let mut out = [0xA5u8; 8];
        r.emit(&mut out);
        assert_eq!(out, DGRAM[..8]);
    }

    #[test]
    fn bad_lengths() {
        let mut b = DGRAM;
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[5] = 13;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        assert_eq!(Packet::new_checked(&b[..7]).unwrap_err(), Error::Truncated);
    }
}
