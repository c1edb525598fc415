//! 802.1Qbb priority flow control (PFC) pause frames: the MAC-control payload that follows
//! an Ethernet header with EtherType 0x8808, sent to 01:80:c2:00:00:01.

use crate::bytes::{Mac, be_u16, set_be_u16};
use crate::{Error, Result};

/// The reserved multicast address PFC frames are sent to.
pub const DST_MAC: Mac = Mac([0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
/// MAC-control opcode of a PFC frame.
pub const OPCODE_PFC: u16 = 0x0101;
/// MAC-control opcode of a classic 802.3x pause frame.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// opcode (2) + class-enable vector (2) + 8 × quanta (2).
pub const PAYLOAD_LEN: usize = 20;

mod field {
    use crate::Field;
    pub(super) const OPCODE: Field = 0..2;
    pub(super) const CEV: Field = 2..4;
    pub(super) const QUANTA: usize = 4;
}

/// A view of a MAC-control payload.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wrap and check the 20 bytes fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < PAYLOAD_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }
    /// MAC-control opcode.
    pub fn opcode(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::OPCODE])
    }
    /// Class-enable vector (bit n = priority n; upper byte reserved).
    pub fn class_enable(&self) -> u16 {
        be_u16(&self.buffer.as_ref()[field::CEV])
    }
    /// Pause quanta for priority `prio` (0..8), in units of 512 bit times.
    pub fn quanta(&self, prio: usize) -> u16 {
        let at = field::QUANTA + 2 * (prio & 7);
        be_u16(&self.buffer.as_ref()[at..at + 2])
    }
}

/// The meaning of a PFC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Priorities whose quanta apply (bit n = priority n).
    pub class_enable: u8,
    /// Pause time per priority, 512-bit-time units; 0 resumes.
    pub quanta: [u16; 8],
}

impl Repr {
    /// Parse; other MAC-control opcodes are [`Error::Unsupported`], a set reserved byte of
    /// the class-enable vector is [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if p.opcode() != OPCODE_PFC {
            return Err(Error::Unsupported);
        }
        let cev = p.class_enable();
        if cev > 0xFF {
            return Err(Error::Malformed);
        }
        let mut quanta = [0u16; 8];
        for (i, q) in quanta.iter_mut().enumerate() {
            *q = p.quanta(i);
        }
        Ok(Repr {
            class_enable: cev as u8,
            quanta,
        })
    }

    /// Always 20.
    pub const fn buffer_len(&self) -> usize {
        PAYLOAD_LEN
    }

    /// Pause (or resume with 0) one priority.
    pub fn pause(prio: u8, quanta: u16) -> Repr {
        let mut r = Repr {
            class_enable: 1 << (prio & 7),
            quanta: [0; 8],
        };
        r.quanta[usize::from(prio & 7)] = quanta;
        r
    }

    /// Write the 20-byte payload.
    pub fn emit(&self, buf: &mut [u8]) {
        set_be_u16(&mut buf[field::OPCODE], OPCODE_PFC);
        set_be_u16(&mut buf[field::CEV], u16::from(self.class_enable));
        for (i, q) in self.quanta.iter().enumerate() {
            let at = field::QUANTA + 2 * i;
            set_be_u16(&mut buf[at..at + 2], *q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PFC: [u8; 20] = [
        0x01, 0x01, // PFC opcode
        0x00, 0x09, // priorities 0 and 3
        0xff, 0xff, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn parse_emit() {
        let r = Repr::parse(&Packet::new_checked(&PFC[..]).unwrap()).unwrap();
        assert_eq!(r.class_enable, 0x09);
        assert_eq!(r.quanta[0], 0xffff);
        assert_eq!(r.quanta[3], 0x1234);
        let mut out = [0xA5u8; 20];
        r.emit(&mut out);
        assert_eq!(out, PFC);
        assert_eq!(Repr::pause(3, 7).quanta[3], 7);
        assert_eq!(Repr::pause(3, 7).class_enable, 8);
    }

    #[test]
    fn rejects() {
        let mut p = PFC;
        p[1] = 0x01;
        p[0] = 0x00;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&p[..]).unwrap()),
            Err(Error::Unsupported)
        );
        let mut r = PFC;
        r[2] = 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&r[..]).unwrap()),
            Err(Error::Malformed)
        );
        assert_eq!(
            Packet::new_checked(&PFC[..19]).unwrap_err(),
            Error::Truncated
        );
    }
}
