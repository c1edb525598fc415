//! Ethernet II frames with an optional 802.1Q VLAN tag.

use crate::bytes::{Mac, be_u16, set_be_u16};
use crate::{Error, Result};

/// EtherType values used by rocelink.
pub mod ethertype {
    /// IPv4
    pub const IPV4: u16 = 0x0800;
    /// ARP
    pub const ARP: u16 = 0x0806;
    /// IPv6
    pub const IPV6: u16 = 0x86DD;
    /// 802.1Q VLAN tag protocol identifier
    pub const VLAN: u16 = 0x8100;
    /// MAC control (802.3x pause, 802.1Qbb PFC)
    pub const MAC_CONTROL: u16 = 0x8808;
    /// RoCE v1 (GRH directly over Ethernet)
    pub const ROCE_V1: u16 = 0x8915;
    /// IEEE 1722 (HSB camera-over-Ethernet)
    pub const IEEE1722: u16 = 0x22F0;
}

mod field {
    use crate::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const TYPE: Field = 12..14;
    pub(super) const TCI: Field = 14..16;
    pub(super) const INNER_TYPE: Field = 16..18;
}

/// Length of an untagged header.
pub const HEADER_LEN: usize = 14;
/// Length of a header with one VLAN tag.
pub const VLAN_HEADER_LEN: usize = 18;

/// A view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap without checking; for emitting.
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wrap and check that the (possibly tagged) header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check the header fits in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.outer_type() == ethertype::VLAN && len < VLAN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn outer_type(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::TYPE])
    }

    /// Destination MAC.
    pub fn dst(&self) -> Mac {
        Mac::from_bytes(&self.buffer.as_ref()[field::DST])
    }

    /// Source MAC.
    pub fn src(&self) -> Mac {
        Mac::from_bytes(&self.buffer.as_ref()[field::SRC])
    }

    /// The 802.1Q tag control information, if the frame is tagged.
    pub fn vlan(&self) -> Option<VlanTag> {
        (self.outer_type() == ethertype::VLAN)
            .then(|| VlanTag::from_tci(be_u16(&self.buffer.as_ref()[field::TCI])))
    }

    /// EtherType of the payload (after the VLAN tag, if any).
    pub fn ethertype(&self) -> u16 {
        if self.outer_type() == ethertype::VLAN {
            be_u16(&self.buffer.as_ref()[field::INNER_TYPE])
        } else {
            self.outer_type()
        }
    }

    /// Header length: 14, or 18 with a VLAN tag.
    pub fn header_len(&self) -> usize {
        if self.outer_type() == ethertype::VLAN {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// The payload, borrowed for the buffer's lifetime.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// 802.1Q tag control information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id (0..=4095).
    pub vid: u16,
}

impl VlanTag {
    /// Decode a 16-bit TCI.
    pub fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }

    /// Encode as a 16-bit TCI.
    pub fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0FFF)
    }
}

/// The meaning of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// EtherType of the payload.
    pub ethertype: u16,
}

impl Repr {
    /// Read from a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Repr {
        Repr {
            dst: f.dst(),
            src: f.src(),
            vlan: f.vlan(),
            ethertype: f.ethertype(),
        }
    }

    /// Header length this repr emits.
    pub fn buffer_len(&self) -> usize {
        if self.vlan.is_some() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Write the header into the first `buffer_len()` bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::DST].copy_from_slice(&self.dst.0);
        buf[field::SRC].copy_from_slice(&self.src.0);
        match self.vlan {
            Some(tag) => {
                set_be_u16(&mut buf[field::TYPE], ethertype::VLAN);
                set_be_u16(&mut buf[field::TCI], tag.tci());
                set_be_u16(&mut buf[field::INNER_TYPE], self.ethertype);
            }
            None => set_be_u16(&mut buf[field::TYPE], self.ethertype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // dst 02:00:00:00:00:01, src 02:00:00:00:00:02, VLAN pcp 3 dei 0 vid 100, IPv4
    static TAGGED: [u8; 20] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // src
        0x81, 0x00, // TPID
        0x60, 0x64, // TCI: pcp 3, vid 100
        0x08, 0x00, // IPv4
        0xAA, 0xBB, // payload
    ];

    #[test]
    fn deconstruct_tagged() {
        let f = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(f.dst(), Mac([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.src(), Mac([2, 0, 0, 0, 0, 2]));
        assert_eq!(
            f.vlan(),
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.payload(), &[0xAA, 0xBB]);
    }

    #[test]
    fn emit_tagged() {
        let repr = Repr::parse(&Frame::new_checked(&TAGGED[..]).unwrap());
        let mut buf = vec![0xA5; 20];
        repr.emit(&mut buf);
        buf[18..].copy_from_slice(&[0xAA, 0xBB]);
        assert_eq!(buf, TAGGED);
    }

    #[test]
    fn untagged_and_truncation() {
        let mut b = TAGGED;
        b[12] = 0x86;
        b[13] = 0xDD;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.vlan(), None);
        assert_eq!(f.ethertype(), ethertype::IPV6);
        assert_eq!(f.header_len(), 14);
        assert_eq!(
            Frame::new_checked(&TAGGED[..13]).unwrap_err(),
            Error::Truncated
        );
        // a VLAN TPID with no room for the tag
        assert_eq!(
            Frame::new_checked(&TAGGED[..16]).unwrap_err(),
            Error::Truncated
        );
    }
}
