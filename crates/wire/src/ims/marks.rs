//! How an IMS sender marks a bad frame or a bad packet on RoCE.
//!
//! The specification's EBF ("end of bad frame") and EBP ("end of bad packet") are
//! side-band signals of the sender's data path; RoCE has no field for them. rocelink
//! carries them in the BTH's 7 reserved bits after AckReq (byte 8, [`crate::ib::BthRepr`]'s
//! `resv7`): bit 0 is EBP, bit 1 is EBF. The ICRC covers those bits (only byte 4 of the BTH
//! is masked), so a mark cannot appear or vanish by corruption unnoticed, and InfiniBand
//! receivers that do not know IMS ignore them as reserved bits.
//!
//! A sender sets the mark on the last packet it sends of the bad frame (EBF), or on the
//! bad packet itself (EBP). The buffer unit refuses the frame at the first marked packet
//! and answers a NACK with [`super::Events::END_OF_BAD_FRAME`] or
//! [`super::Events::END_OF_BAD_PACKET`]; the worker then retransmits the frame.
//!
//! ```
//! use rocelink_wire::ib::{Bth, BthRepr, Opcode};
//! use rocelink_wire::ims::marks;
//!
//! let mut bth = [0u8; 12];
//! let repr = BthRepr {
//!     opcode: Opcode::UC_RDMA_WRITE_LAST,
//!     resv7: marks::EBF,
//!     ..BthRepr::default()
//! };
//! repr.emit(&mut Bth::new_unchecked(&mut bth[..]));
//! assert_eq!(bth[8], 0x02);
//! assert_eq!(marks::events(bth[8] & 0x7F), rocelink_wire::ims::Events::END_OF_BAD_FRAME);
//! ```

use super::Events;

/// End of bad packet: this packet's payload is not valid (the frame is bad too).
pub const EBP: u8 = 0x01;
/// End of bad frame: the frame this packet belongs to is not valid.
pub const EBF: u8 = 0x02;
/// Both marks: the reserved bits a buffer unit honours.
pub const ALL: u8 = EBP | EBF;

/// The NACK event bits (Table 3.7) for a packet carrying `resv7`; 0 for none.
pub const fn events(resv7: u8) -> u32 {
    let mut e = 0;
    if resv7 & EBP != 0 {
        e |= Events::END_OF_BAD_PACKET;
    }
    if resv7 & EBF != 0 {
        e |= Events::END_OF_BAD_FRAME;
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mark_maps_to_its_table_3_7_bit() {
        assert_eq!(events(0), 0);
        assert_eq!(events(EBP), 1 << 7);
        assert_eq!(events(EBF), 1 << 6);
        assert_eq!(events(ALL | 0x40), (1 << 6) | (1 << 7));
    }
}
