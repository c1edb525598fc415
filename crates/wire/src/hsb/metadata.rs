//! The frame-end metadata record, the immediate-data layouts and the frame CRC.

use crate::bytes::{
    be_u32, be_u64, le_u32, le_u64, set_be_u32, set_be_u64, set_le_u32, set_le_u64,
};
use crate::{Error, Result};

/// Length of the metadata record (the payload of the 0x2B packet).
pub const RECORD_LEN: usize = 128;

/// Flag bit 0: the sensor asserted TLAST before the window was full ("early tlast").
pub const FLAG_EARLY_TLAST: u32 = 1 << 0;
/// Flag bit 1: the window ended on the byte count alone ("bytes-per-window only").
pub const FLAG_BPW_ONLY: u32 = 1 << 1;

/// Byte order of the record's fields.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum Endian {
    /// What the FPGA RTL, HSB host code and HSB emulator use (default).
    #[default]
    Big,
    /// What the HSB dataplane document describes.
    Little,
}

mod field {
    use crate::Field;
    pub(super) const FLAGS: Field = 0..4;
    pub(super) const PSN: Field = 4..8;
    pub(super) const CRC: Field = 8..12;
    pub(super) const SOF_S: Field = 12..20;
    pub(super) const SOF_NS: Field = 20..24;
    pub(super) const BYTES: Field = 24..32;
    pub(super) const FRAME: Field = 32..36;
    pub(super) const META_S: Field = 36..44;
    pub(super) const META_NS: Field = 44..48;
}

type Read32 = fn(&[u8]) -> u32;
type Read64 = fn(&[u8]) -> u64;
type Write32 = fn(&mut [u8], u32);
type Write64 = fn(&mut [u8], u64);

/// The meaning of a metadata record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Metadata {
    /// [`FLAG_EARLY_TLAST`], [`FLAG_BPW_ONLY`].
    pub flags: u32,
    /// PSN of this metadata packet (24 bits).
    pub psn: u32,
    /// Frame CRC (CRC-32/JAMCRC of the window's sensor bytes).
    pub crc: u32,
    /// PTP seconds at the first sensor data of the window (48 significant bits).
    pub sof_s: u64,
    /// PTP nanoseconds at the first sensor data.
    pub sof_ns: u32,
    /// Valid bytes written in this window.
    pub bytes_written: u64,
    /// Frame number (a 16-bit counter on the device).
    pub frame_number: u32,
    /// PTP seconds when the record was formed.
    pub meta_s: u64,
    /// PTP nanoseconds when the record was formed.
    pub meta_ns: u32,
}

impl Metadata {
    /// Parse the first 128 bytes of `b`.
    pub fn parse(b: &[u8], endian: Endian) -> Result<Metadata> {
        if b.len() < RECORD_LEN {
            return Err(Error::Truncated);
        }
        let (u32_, u64_): (Read32, Read64) = match endian {
            Endian::Big => (be_u32, be_u64),
            Endian::Little => (le_u32, le_u64),
        };
        Ok(Metadata {
            flags: u32_(&b[field::FLAGS]),
            psn: u32_(&b[field::PSN]),
            crc: u32_(&b[field::CRC]),
            sof_s: u64_(&b[field::SOF_S]),
            sof_ns: u32_(&b[field::SOF_NS]),
            bytes_written: u64_(&b[field::BYTES]),
            frame_number: u32_(&b[field::FRAME]),
            meta_s: u64_(&b[field::META_S]),
            meta_ns: u32_(&b[field::META_NS]),
        })
    }

    /// Write 128 bytes (reserved area zero).
    pub fn emit(&self, b: &mut [u8], endian: Endian) {
        let b = &mut b[..RECORD_LEN];
        let (w32, w64): (Write32, Write64) = match endian {
            Endian::Big => (set_be_u32, set_be_u64),
            Endian::Little => (set_le_u32, set_le_u64),
        };
        w32(&mut b[field::FLAGS], self.flags);
        w32(&mut b[field::PSN], self.psn & 0x00FF_FFFF);
        w32(&mut b[field::CRC], self.crc);
        w64(&mut b[field::SOF_S], self.sof_s);
        w32(&mut b[field::SOF_NS], self.sof_ns);
        w64(&mut b[field::BYTES], self.bytes_written);
        w32(&mut b[field::FRAME], self.frame_number);
        w64(&mut b[field::META_S], self.meta_s);
        w32(&mut b[field::META_NS], self.meta_ns);
        b[field::META_NS.end..].fill(0);
    }
}

/// How the 32-bit immediate of the metadata packet encodes PSN and buffer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum ImmLayout {
    /// HSB IP ≥ 0x2602: `psn[19:0] << 12 | page[11:0]` (default).
    #[default]
    Psn20Page12,
    /// HSB IP 0x2510 (and the dataplane document): `psn[23:0] << 8 | buffer[1:0]`.
    Psn24Buf8,
}

/// How a stream lays out what the host decodes: the immediate's fields and the metadata's
/// byte order. The device's packetizer writes it, the host's tracker reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct StreamLayout {
    /// Immediate layout (default: HSB IP ≥ 0x2602).
    pub imm_layout: ImmLayout,
    /// Metadata byte order (default: big-endian, as devices send it).
    pub endian: Endian,
}

impl ImmLayout {
    /// Encode.
    pub fn encode(self, psn: u32, page: u32) -> u32 {
        match self {
            ImmLayout::Psn20Page12 => ((psn & 0xF_FFFF) << 12) | (page & 0xFFF),
            ImmLayout::Psn24Buf8 => ((psn & 0xFF_FFFF) << 8) | (page & 0x3),
        }
    }

    /// Decode to `(psn bits, page)`. For [`ImmLayout::Psn20Page12`] only the low 20 PSN
    /// bits are known.
    pub fn decode(self, imm: u32) -> (u32, u32) {
        match self {
            ImmLayout::Psn20Page12 => ((imm >> 12) & 0xF_FFFF, imm & 0xFFF),
            ImmLayout::Psn24Buf8 => (imm >> 8, imm & 0xFF),
        }
    }

    /// Mask of the PSN bits this layout carries.
    pub fn psn_mask(self) -> u32 {
        match self {
            ImmLayout::Psn20Page12 => 0xF_FFFF,
            ImmLayout::Psn24Buf8 => 0xFF_FFFF,
        }
    }
}

/// Incremental CRC-32/JAMCRC (reflected, init 0xFFFFFFFF, no final XOR) of a frame.
#[derive(Debug, Clone, Default)]
pub struct FrameCrc(crc32fast::Hasher);

impl FrameCrc {
    /// Empty frame.
    pub fn new() -> FrameCrc {
        FrameCrc(crc32fast::Hasher::new())
    }
    /// Add the next bytes.
    #[inline]
    pub fn update(&mut self, b: &[u8]) {
        self.0.update(b);
    }
    /// The JAMCRC value as HSB puts it in the metadata.
    pub fn finalize(self) -> u32 {
        !self.0.finalize()
    }
}

/// CRC-32/JAMCRC of `b` (= `zlib.crc32(b) ^ 0xFFFFFFFF`).
pub fn jamcrc(b: &[u8]) -> u32 {
    !crc32fast::hash(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        Metadata {
            flags: FLAG_EARLY_TLAST,
            psn: 0x00_1234,
            crc: 0xA1B2_C3D4,
            sof_s: 0x0000_1122_3344_5566,
            sof_ns: 999_999_999,
            bytes_written: 2_611_376,
            frame_number: 0xBEEF,
            meta_s: 0x0000_1122_3344_5567,
            meta_ns: 5,
        }
    }

    #[test]
    fn big_endian_offsets() {
        let mut b = [0xA5u8; 128];
        sample().emit(&mut b, Endian::Big);
        assert_eq!(&b[0..4], &[0, 0, 0, 1]);
        assert_eq!(&b[4..8], &[0, 0, 0x12, 0x34]);
        assert_eq!(&b[8..12], &[0xA1, 0xB2, 0xC3, 0xD4]);
        assert_eq!(&b[12..20], &[0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66]);
        assert_eq!(&b[24..32], &[0, 0, 0, 0, 0, 0x27, 0xD8, 0xB0]);
        assert_eq!(&b[32..36], &[0, 0, 0xBE, 0xEF]);
        assert!(b[48..].iter().all(|&x| x == 0));
        assert_eq!(Metadata::parse(&b, Endian::Big).unwrap(), sample());
    }

    #[test]
    fn little_endian_variant() {
        let mut b = [0u8; 128];
        sample().emit(&mut b, Endian::Little);
        assert_eq!(&b[32..36], &[0xEF, 0xBE, 0, 0]);
        assert_eq!(Metadata::parse(&b, Endian::Little).unwrap(), sample());
        assert_ne!(Metadata::parse(&b, Endian::Big).unwrap(), sample());
        assert_eq!(
            Metadata::parse(&b[..127], Endian::Big),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn immediates() {
        let l = ImmLayout::Psn20Page12;
        assert_eq!(l.encode(0x12_3456, 0xABC), 0x2345_6ABC);
        assert_eq!(l.decode(0x2345_6ABC), (0x2_3456, 0xABC));
        let o = ImmLayout::Psn24Buf8;
        assert_eq!(o.encode(0x12_3456, 3), 0x1234_5603);
        assert_eq!(o.decode(0x1234_5603), (0x12_3456, 3));
    }

    #[test]
    fn jamcrc_matches_zlib_convention() {
        // zlib.crc32(b"123456789") = 0xCBF43926, so JAMCRC = 0x340BC6D9
        assert_eq!(jamcrc(b"123456789"), 0x340B_C6D9);
        let mut f = FrameCrc::new();
        f.update(b"1234");
        f.update(b"56789");
        assert_eq!(f.finalize(), 0x340B_C6D9);
    }
}
