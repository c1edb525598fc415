//! Camera over Ethernet (CoE, IEEE 1722B): HSB's raw-Ethernet packet format, EtherType
//! 0x22F0, selected per virtual port with bit 24 of `DP_QP`.
//!
//! After the 14-byte Ethernet header comes a 32-byte header (46 bytes in all, HSB's
//! `coe_overhead`), then sensor bytes:
//!
//! | bytes (from the Ethernet header) | field |
//! |---|---|
//! | 14 | AVTP subtype 0x82 (NTSCF) |
//! | 15–16 | SV (bit 15), version, NTSCF data length (11 bits; HSB sends 0) |
//! | 17 | NTSCF sequence (HSB sends 0) |
//! | 18–25 | stream ID 0x00000000AAAAAAAA |
//! | 26–27 | ACF message type (7 bits, 0x06: byte 26 reads 0x0C) and length |
//! | 28 | reserved (HSB's emulator: 0x20, "MTV") |
//! | 29 | sensor interface index |
//! | 30–37 | PTP time: seconds (u32), nanoseconds (u32) |
//! | 38 | packet sequence (HSB's emulator counts 7 bits, the IP document 8) |
//! | 39 | reserved |
//! | 40 | channel (6 bits, from `DP_QP`) |
//! | 41 | flags: [`FRAME_START`], [`FRAME_END`], [`LINE_END`] |
//! | 42–45 | frame number\[1:0\] in bits 29:28, byte offset in bits 27:0 |
//!
//! Layout from HSB's emulator (`coe_transmitter.cpp`, `net.hpp`) and Linux receiver
//! (`linux_coe_receiver.cpp`), which agree with the IP's `dataplane.mdx` table.
//!
//! The frame end comes in two forms ([`MetadataForm`]). HSB's emulator and Linux receiver:
//! the last data packet (or, if it has no room, a packet at the 128-aligned end of the
//! frame) carries zero pad up to the frame size rounded up to 128, then the 128-byte
//! metadata record, and has [`FRAME_END`] set — the receiver reads the record from the
//! payload's last 128 bytes. The IP document: a separate packet with [`FRAME_END`] whose
//! payload is the record's first 48 bytes.

use crate::bytes::{be_u16, be_u32, set_be_u16, set_be_u32};
use crate::{Error, Result};

/// Bytes from the Ethernet header's end to the sensor data.
pub const HEADER_LEN: usize = 32;
/// Ethernet plus CoE header: HSB's `coe_overhead`, subtracted from the MTU to size packets.
pub const OVERHEAD: usize = 14 + HEADER_LEN;
/// AVTP subtype of the NTSCF header.
pub const SUBTYPE_NTSCF: u8 = 0x82;
/// The stream ID HSB sends.
pub const STREAM_ID: u64 = 0x0000_0000_AAAA_AAAA;
/// The ACF message type HSB sends (byte 26 then reads 0x0C, what receivers check).
pub const ACF_MSG_TYPE: u8 = 0x06;
/// Flag: the first packet of a frame.
pub const FRAME_START: u8 = 0x01;
/// Flag: the packet that ends the frame (it carries the metadata record).
pub const FRAME_END: u8 = 0x02;
/// Flag: the packet crosses the line threshold.
pub const LINE_END: u8 = 0x10;
/// Largest byte offset (28 bits).
pub const MAX_OFFSET: u32 = 0x0FFF_FFFF;
/// Largest channel (6 bits).
pub const MAX_CHANNEL: u8 = 63;
/// Payload of the IP document's metadata packet.
pub const SHORT_METADATA_LEN: usize = 48;

/// How a frame's end and metadata are sent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum MetadataForm {
    /// HSB's emulator and Linux receiver: the 128-byte record closes the last packet,
    /// at the frame size rounded up to 128 (default).
    #[default]
    Trailing,
    /// The IP document: a separate packet with the record's first 48 bytes.
    Short,
}

mod field {
    use crate::Field;
    pub(super) const SUBTYPE: usize = 0;
    pub(super) const LENGTH: Field = 1..3;
    pub(super) const NTSCF_SEQ: usize = 3;
    pub(super) const STREAM_ID: Field = 4..12;
    pub(super) const ACF: Field = 12..14;
    pub(super) const RESERVED: usize = 14;
    pub(super) const SENSOR: usize = 15;
    pub(super) const PTP_S: Field = 16..20;
    pub(super) const PTP_NS: Field = 20..24;
    pub(super) const SEQUENCE: usize = 24;
    pub(super) const CHANNEL: usize = 26;
    pub(super) const FLAGS: usize = 27;
    pub(super) const ADDRESS: Field = 28..32;
}

/// A view of a CoE packet: the bytes after the Ethernet header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    /// Wrap and check the header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// AVTP subtype.
    pub fn subtype(&self) -> u8 {
        self.b()[field::SUBTYPE]
    }
    /// NTSCF data length (11 bits).
    pub fn ntscf_len(&self) -> u16 {
        be_u16(&self.b()[field::LENGTH]) & 0x7FF
    }
    /// Stream ID.
    pub fn stream_id(&self) -> u64 {
        u64::from_be_bytes(self.b()[field::STREAM_ID].try_into().unwrap_or([0; 8]))
    }
    /// ACF message type (7 bits).
    pub fn acf_type(&self) -> u8 {
        (be_u16(&self.b()[field::ACF]) >> 9) as u8
    }
    /// Sensor interface index.
    pub fn sensor(&self) -> u8 {
        self.b()[field::SENSOR]
    }
    /// PTP time of the packet: seconds, nanoseconds.
    pub fn ptp(&self) -> (u32, u32) {
        (
            be_u32(&self.b()[field::PTP_S]),
            be_u32(&self.b()[field::PTP_NS]),
        )
    }
    /// Packet sequence number.
    pub fn sequence(&self) -> u8 {
        self.b()[field::SEQUENCE]
    }
    /// Channel (6 bits).
    pub fn channel(&self) -> u8 {
        self.b()[field::CHANNEL] & 0x3F
    }
    /// Flags ([`FRAME_START`], [`FRAME_END`], [`LINE_END`]).
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }
    /// Frame number, low 2 bits.
    pub fn frame_number(&self) -> u8 {
        ((be_u32(&self.b()[field::ADDRESS]) >> 28) & 3) as u8
    }
    /// Byte offset of the payload in the frame (28 bits).
    pub fn offset(&self) -> u32 {
        be_u32(&self.b()[field::ADDRESS]) & MAX_OFFSET
    }
    /// The sensor bytes.
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
}

/// The meaning of a CoE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Sensor interface index.
    pub sensor: u8,
    /// PTP time: seconds, nanoseconds.
    pub ptp: (u32, u32),
    /// Packet sequence number.
    pub sequence: u8,
    /// Channel (0..=63).
    pub channel: u8,
    /// Flags.
    pub flags: u8,
    /// Frame number (low 2 bits are sent).
    pub frame_number: u8,
    /// Byte offset in the frame (28 bits).
    pub offset: u32,
}

impl Repr {
    /// Parse: a subtype other than NTSCF, another stream ID or ACF type is
    /// [`Error::Unsupported`] (the packet is not HSB's).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if p.subtype() != SUBTYPE_NTSCF || p.stream_id() != STREAM_ID {
            return Err(Error::Unsupported);
        }
        if p.acf_type() != ACF_MSG_TYPE {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            sensor: p.sensor(),
            ptp: p.ptp(),
            sequence: p.sequence(),
            channel: p.channel(),
            flags: p.flags(),
            frame_number: p.frame_number(),
            offset: p.offset(),
        })
    }

    /// Header bytes: always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the 32-byte header as HSB's IP and emulator do: SV set, the NTSCF length 0
    /// (receivers locate the data by the fixed header).
    pub fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b[field::SUBTYPE] = SUBTYPE_NTSCF;
        set_be_u16(&mut b[field::LENGTH], 0x8000);
        b[field::NTSCF_SEQ] = 0;
        b[field::STREAM_ID].copy_from_slice(&STREAM_ID.to_be_bytes());
        set_be_u16(&mut b[field::ACF], u16::from(ACF_MSG_TYPE) << 9);
        b[field::RESERVED] = 0x20;
        b[field::SENSOR] = self.sensor;
        set_be_u32(&mut b[field::PTP_S], self.ptp.0);
        set_be_u32(&mut b[field::PTP_NS], self.ptp.1);
        b[field::SEQUENCE] = self.sequence;
        b[field::SEQUENCE + 1] = 0;
        b[field::CHANNEL] = self.channel & 0x3F;
        b[field::FLAGS] = self.flags;
        set_be_u32(
            &mut b[field::ADDRESS],
            (u32::from(self.frame_number & 3) << 28) | (self.offset & MAX_OFFSET),
        );
    }
}

/// The `DP_QP` value that selects CoE: enable bit 24, log2 of the line threshold in bits
/// 31:25, the channel in bits 5:0 (HSB's `configure_coe`).
pub fn qp_register(channel: u8, line_threshold_log2: u8) -> u32 {
    (1 << 24) | (u32::from(line_threshold_log2 & 0x7F) << 25) | u32::from(channel & 0x3F)
}

/// The CoE settings a `DP_QP` value holds, if bit 24 selects CoE: (channel, log2 of the
/// line threshold).
pub fn from_qp_register(qp: u32) -> Option<(u8, u8)> {
    (qp & (1 << 24) != 0).then_some(((qp & 0x3F) as u8, ((qp >> 25) & 0x7F) as u8))
}

/// The smallest `n` with `2^n ≥ bytes` (HSB's line threshold for a line of `bytes`).
pub fn line_threshold_log2(bytes: u32) -> u8 {
    bytes.max(1).next_power_of_two().trailing_zeros() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet laid out as HSB's emulator writes it (`init_metadata`,
    /// `update_packet_headers_midframe`): sensor 1, channel 5, a frame start at offset 0
    /// of frame 6 (sent as 2), sequence 0x7F, 4 payload bytes.
    static PACKET: [u8; 36] = [
        0x82, // subtype NTSCF
        0x80, 0x00, // SV, NTSCF length 0 (as HSB sends)
        0x00, // NTSCF sequence
        0, 0, 0, 0, 0xAA, 0xAA, 0xAA, 0xAA, // stream ID
        0x0C, 0x00, // ACF type 0x06 << 9
        0x20, 0x01, // reserved (MTV), sensor 1
        0x65, 0x43, 0x21, 0x00, // seconds
        0x00, 0x00, 0x03, 0xE8, // nanoseconds
        0x7F, 0x00, 0x05, 0x01, // sequence, reserved, channel, flags
        0x20, 0x00, 0x00, 0x00, // frame number 2, offset 0
        1, 2, 3, 4,
    ];

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                sensor: 1,
                ptp: (0x6543_2100, 1000),
                sequence: 0x7F,
                channel: 5,
                flags: FRAME_START,
                frame_number: 2,
                offset: 0,
            }
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert_eq!(p.ntscf_len(), 0);
        let mut out = [0xA5u8; 36];
        Repr {
            frame_number: 6,
            ..r
        }
        .emit(&mut out);
        out[32..].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(out, PACKET, "frame number 6 is sent as its low two bits");
    }

    #[test]
    fn offsets_and_the_byte_hsbs_receiver_checks() {
        let r = Repr {
            offset: 0x0ABC_DEF0,
            frame_number: 3,
            flags: FRAME_END | LINE_END,
            ..Repr::default()
        };
        let mut b = [0u8; 32];
        r.emit(&mut b);
        // HSB's Linux receiver reads byte 26 (12 here) as the "ACF message type" 0x0C
        assert_eq!(b[12], 0x0C);
        assert_eq!(&b[28..32], &[0x3A, 0xBC, 0xDE, 0xF0]);
        let back = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn rejects() {
        assert_eq!(
            Packet::new_checked(&PACKET[..31]).unwrap_err(),
            Error::Truncated
        );
        for (at, v) in [(0, 0x81), (11, 0xAB), (12, 0x0E)] {
            let mut b = PACKET;
            b[at] = v;
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(
                Repr::parse(&p).unwrap_err(),
                Error::Unsupported,
                "byte {at}"
            );
        }
    }

    #[test]
    fn qp_register_as_hsbs_configure_coe() {
        // configure_coe(channel 3, pixel_width 4800): 2^13 = 8192 ≥ 4800
        assert_eq!(line_threshold_log2(4800), 13);
        assert_eq!(line_threshold_log2(4096), 12);
        assert_eq!(line_threshold_log2(1), 0);
        let q = qp_register(3, 13);
        assert_eq!(q, 0x1B00_0003);
        assert_eq!(from_qp_register(q), Some((3, 13)));
        assert_eq!(from_qp_register(0xCAF0), None);
    }
}
