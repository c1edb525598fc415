//! Data-channel ACK/NACK packet (Tables 3.5–3.7): 16 bytes in a UC SEND from the receiver.
//!
//! Words: ACK type, event bits, VA\[31:0\], VA\[63:32\]. The VA is 0 for "no start of frame".

use crate::bytes::{be_u32, set_be_u32};
use crate::{Error, Result};

/// Packet length.
pub const PACKET_LEN: usize = 16;

/// ACK or NACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckType {
    /// 0: the frame was received.
    Ack,
    /// 1: an error; see the events.
    Nack,
}

/// NACK event bits (Table 3.7); several may be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Events(pub u32);

impl Events {
    /// Unexpected sequence number.
    pub const OUT_OF_SEQUENCE: u32 = 1 << 0;
    /// Parity error at the core/DMA interface.
    pub const PARITY: u32 = 1 << 1;
    /// VA outside the write window.
    pub const OUTSIDE_WINDOW: u32 = 1 << 2;
    /// R_Key mismatch.
    pub const INVALID_RKEY: u32 = 1 << 3;
    /// Received bytes differ from the frame header.
    pub const FRAME_LENGTH: u32 = 1 << 4;
    /// Packet length mismatch or < 64 bytes of payload.
    pub const PACKET_LENGTH: u32 = 1 << 5;
    /// End of bad frame.
    pub const END_OF_BAD_FRAME: u32 = 1 << 6;
    /// End of bad packet.
    pub const END_OF_BAD_PACKET: u32 = 1 << 7;
    /// VA not 64-byte aligned.
    pub const INVALID_VA: u32 = 1 << 8;
    /// No start of frame seen.
    pub const NO_START_OF_FRAME: u32 = 1 << 9;
    /// Correctable ECC error.
    pub const CORRECTABLE_ECC: u32 = 1 << 10;
    /// Uncorrectable ECC error.
    pub const UNCORRECTABLE_ECC: u32 = 1 << 11;

    const NAMES: [&'static str; 12] = [
        "out_of_sequence",
        "parity",
        "outside_window",
        "invalid_rkey",
        "frame_length",
        "packet_length",
        "end_of_bad_frame",
        "end_of_bad_packet",
        "invalid_va",
        "no_start_of_frame",
        "correctable_ecc",
        "uncorrectable_ecc",
    ];

    /// Names of the set bits.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        (0..12)
            .filter(move |i| self.0 & (1 << i) != 0)
            .map(|i| Self::NAMES[i])
    }

    /// What the sender must do (Table 3.4).
    pub fn action(self) -> SenderAction {
        if self.0 & (Self::INVALID_RKEY | Self::INVALID_VA) != 0 {
            SenderAction::Terminate
        } else if self.0 & Self::OUTSIDE_WINDOW != 0 {
            SenderAction::RetransmitAfterWait
        } else {
            SenderAction::Retransmit
        }
    }
}

/// Sender behaviour for a NACK (Table 3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SenderAction {
    /// Resend the frame now.
    Retransmit,
    /// Resend after the wait period (window full).
    RetransmitAfterWait,
    /// Report the error and close the channel.
    Terminate,
}

/// An ACK/NACK packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    /// ACK or NACK.
    pub kind: AckType,
    /// Event bits (zero for an ACK).
    pub events: Events,
    /// VA of the frame acknowledged.
    pub va: u64,
}

impl AckRepr {
    /// Parse 16 bytes; event bits 12..31 set or a type other than 0/1 is [`Error::Malformed`].
    pub fn parse(b: &[u8]) -> Result<AckRepr> {
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        let kind = match be_u32(&b[0..4]) {
            0 => AckType::Ack,
            1 => AckType::Nack,
            _ => return Err(Error::Malformed),
        };
        let events = be_u32(&b[4..8]);
        if events >> 12 != 0 {
            return Err(Error::Malformed);
        }
        let va = u64::from(be_u32(&b[8..12])) | (u64::from(be_u32(&b[12..16])) << 32);
        Ok(AckRepr {
            kind,
            events: Events(events),
            va,
        })
    }

    /// Write 16 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        set_be_u32(&mut b[0..4], matches!(self.kind, AckType::Nack).into());
        set_be_u32(&mut b[4..8], self.events.0);
        set_be_u32(&mut b[8..12], self.va as u32);
        set_be_u32(&mut b[12..16], (self.va >> 32) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nack_with_events() {
        let r = AckRepr {
            kind: AckType::Nack,
            events: Events(Events::OUT_OF_SEQUENCE | Events::OUTSIDE_WINDOW),
            va: 0x0000_0040_0200_0000,
        };
        let mut b = [0xA5u8; 16];
        r.emit(&mut b);
        assert_eq!(b, [0, 0, 0, 1, 0, 0, 0, 5, 0x02, 0, 0, 0, 0, 0, 0, 0x40]);
        assert_eq!(AckRepr::parse(&b).unwrap(), r);
        assert_eq!(
            r.events.names().collect::<Vec<_>>(),
            ["out_of_sequence", "outside_window"]
        );
        assert_eq!(r.events.action(), SenderAction::RetransmitAfterWait);
        assert_eq!(
            Events(Events::INVALID_RKEY).action(),
            SenderAction::Terminate
        );
        assert_eq!(Events(Events::PARITY).action(), SenderAction::Retransmit);
        b[4] = 0x10;
        assert_eq!(AckRepr::parse(&b), Err(Error::Malformed));
        b[4] = 0;
        b[3] = 2;
        assert_eq!(AckRepr::parse(&b), Err(Error::Malformed));
    }
}
