//! ARP for IPv4 over Ethernet (RFC 826), request and reply.

use crate::bytes::{Mac, be_u16, set_be_u16};
use crate::{Error, Result};
use core::net::Ipv4Addr;

mod field {
    use crate::Field;
    pub(super) const HTYPE: Field = 0..2;
    pub(super) const PTYPE: Field = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Field = 6..8;
    pub(super) const SHA: Field = 8..14;
    pub(super) const SPA: Field = 14..18;
    pub(super) const THA: Field = 18..24;
    pub(super) const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// who-has (1)
    Request,
    /// is-at (2)
    Reply,
    /// any other value
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(v: u16) -> Self {
        match v {
            1 => Operation::Request,
            2 => Operation::Reply,
            x => Operation::Unknown(x),
        }
    }
}

impl From<Operation> for u16 {
    fn from(v: Operation) -> u16 {
        match v {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(x) => x,
        }
    }
}

/// A view of an ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap and check the Ethernet/IPv4 layout fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Hardware type (1 = Ethernet).
    pub fn htype(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::HTYPE])
    }
    /// Protocol type (0x0800 = IPv4).
    pub fn ptype(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::PTYPE])
    }
    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    /// Protocol address length.
    pub fn plen(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// Operation.
    pub fn operation(&self) -> Operation {
        be_u16(&self.buffer.as_ref()[field::OPER]).into()
    }
    /// Sender hardware address.
    pub fn sha(&self) -> Mac {
        Mac::from_bytes(&self.buffer.as_ref()[field::SHA])
    }
    /// Sender protocol address.
    pub fn spa(&self) -> Ipv4Addr {
        ip4(&self.buffer.as_ref()[field::SPA])
    }
    /// Target hardware address.
    pub fn tha(&self) -> Mac {
        Mac::from_bytes(&self.buffer.as_ref()[field::THA])
    }
    /// Target protocol address.
    pub fn tpa(&self) -> Ipv4Addr {
        ip4(&self.buffer.as_ref()[field::TPA])
    }
}

fn ip4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

/// The meaning of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// Sender MAC.
    pub sha: Mac,
    /// Sender IPv4.
    pub spa: Ipv4Addr,
    /// Target MAC (zero in a request).
    pub tha: Mac,
    /// Target IPv4.
    pub tpa: Ipv4Addr,
}

impl Repr {
    /// Parse; only Ethernet (1) / IPv4 (0x0800) with lengths 6/4 is accepted.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if p.htype() != 1 || p.ptype() != 0x0800 || p.hlen() != 6 || p.plen() != 4 {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            operation: p.operation(),
            sha: p.sha(),
            spa: p.spa(),
            tha: p.tha(),
            tpa: p.tpa(),
        })
    }

    /// Always [`PACKET_LEN`].
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Write into the first 28 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        set_be_u16(&mut buf[field::HTYPE], 1);
        set_be_u16(&mut buf[field::PTYPE], 0x0800);
        buf[field::HLEN] = 6;
        buf[field::PLEN] = 4;
        set_be_u16(&mut buf[field::OPER], self.operation.into());
        buf[field::SHA].copy_from_slice(&self.sha.0);
        buf[field::SPA].copy_from_slice(&self.spa.octets());
        buf[field::THA].copy_from_slice(&self.tha.0);
        buf[field::TPA].copy_from_slice(&self.tpa.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // who-has 192.168.0.2 tell 192.168.0.101 (from 48:b0:2d:ee:84:da)
    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // eth/ipv4, request
        0x48, 0xb0, 0x2d, 0xee, 0x84, 0xda, 192, 168, 0, 101, // sender
        0, 0, 0, 0, 0, 0, 192, 168, 0, 2, // target
    ];

    #[test]
    fn parse_and_emit() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.operation, Operation::Request);
        assert_eq!(r.spa, Ipv4Addr::new(192, 168, 0, 101));
        assert_eq!(r.tpa, Ipv4Addr::new(192, 168, 0, 2));
        assert_eq!(r.sha.to_string(), "48:b0:2d:ee:84:da");
        let mut buf = [0xA5u8; 28];
        r.emit(&mut buf);
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn rejects_other_hardware_and_short() {
        let mut b = REQUEST;
        b[1] = 6; // IEEE 802
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
    }
}
