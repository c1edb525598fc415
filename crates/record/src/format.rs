//! The on-disk layout of a recording directory.
//!
//! * `recording.json` — stream parameters (written first, atomically).
//! * `data.bin` — frames, each at a 4096-aligned offset, zero-padded to 4096.
//! * `index.bin` — append-only 128-byte little-endian records, one per frame, written only
//!   after the frame's data write completed (and, in batches, after `fdatasync` of the data),
//!   each protected by a CRC32C so a torn last record is recognised and ignored.
//!
//! Index record:
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `RLIX` |
//! | 4 | 2 | version (1) |
//! | 6 | 2 | verdict bits: 0 good, 1 complete, 2 crc_ok, 3 crc present |
//! | 8 | 8 | frame number |
//! | 16 | 8 | offset in `data.bin` |
//! | 24 | 8 | length in bytes |
//! | 32 | 4 | frame CRC (as received) |
//! | 36 | 4 | window flags |
//! | 40 | 8 | dropped packets |
//! | 48 | 8 | start-of-frame PTP seconds |
//! | 56 | 4 | start-of-frame PTP nanoseconds |
//! | 60 | 4 | metadata PTP nanoseconds |
//! | 64 | 8 | metadata PTP seconds |
//! | 72 | 8 | recorded at (ns since the epoch) |
//! | 80 | 4 | packets |
//! | 84 | 4 | ring page |
//! | 88 | 4 | frames the recorder dropped since the previous record |
//! | 92 | 32 | reserved (0) |
//! | 124 | 4 | CRC32C of bytes 0..124 |

use serde::{Deserialize, Serialize};

/// Index record size.
pub const RECORD_LEN: usize = 128;
/// Magic of an index record.
pub const MAGIC: &[u8; 4] = b"RLIX";
/// Alignment of frames in `data.bin`.
pub const ALIGN: u64 = 4096;

/// Stream parameters stored in `recording.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Header {
    /// "rocelink-recording".
    pub format: String,
    /// 1.
    pub version: u32,
    /// Frame size in bytes.
    pub frame_size: u64,
    /// Sensor name (e.g. "imx274-1080p-raw10", "pattern").
    pub sensor: String,
    /// Pixel layout: "csi-raw10", "csi-raw12", "bytes".
    pub layout: String,
    /// Image width in pixels (0 if not an image).
    pub width: u32,
    /// Image height in lines.
    pub height: u32,
    /// Bits per pixel.
    pub bits: u32,
    /// Offset of the first active line in a frame.
    pub start_byte: u64,
    /// Bytes per line.
    pub bytes_per_line: u64,
    /// Frame alignment in `data.bin`.
    pub alignment: u64,
    /// Creation time, ns since the epoch.
    pub created_ns: u64,
    /// The image is grey (echo data: samples × channels), not a Bayer mosaic. Absent in
    /// recordings that predate it (they are camera frames).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grey: bool,
}

/// What the index says about one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Entry {
    /// Frame number.
    pub frame_number: u64,
    /// Offset in `data.bin`.
    pub offset: u64,
    /// Length.
    pub length: u64,
    /// Frame is good.
    pub good: bool,
    /// All packets arrived.
    pub complete: bool,
    /// CRC matched (false also when there was none).
    pub crc_ok: bool,
    /// The device sent a CRC.
    pub crc_present: bool,
    /// Frame CRC as received.
    pub crc: u32,
    /// Window flags.
    pub flags: u32,
    /// Packets missing.
    pub dropped_packets: u64,
    /// PTP at the first data.
    pub sof: (u64, u32),
    /// PTP at metadata.
    pub meta: (u64, u32),
    /// When it was recorded.
    pub recorded_ns: u64,
    /// Packets.
    pub packets: u32,
    /// Ring page.
    pub page: u32,
    /// Frames dropped by the recorder just before this one.
    pub dropped_before: u32,
}

/// Frame number of a drop marker: an index record with no frame (length 0) whose
/// `dropped_before` counts frames lost after the last indexed one (a full disk, a limit).
pub const DROP_MARKER: u64 = u64::MAX;

impl Entry {
    /// A drop marker for `n` frames.
    pub fn drop_marker(n: u32, recorded_ns: u64) -> Entry {
        Entry {
            frame_number: DROP_MARKER,
            dropped_before: n,
            recorded_ns,
            ..Entry::default()
        }
    }
    /// True for a drop marker.
    pub fn is_drop_marker(&self) -> bool {
        self.frame_number == DROP_MARKER && self.length == 0
    }
}

/// CRC-32/JAMCRC (HSB's frame CRC): `zlib.crc32(frame) ^ 0xFFFFFFFF`.
pub fn jamcrc(b: &[u8]) -> u32 {
    !(crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, b) as u32)
}

/// The largest frame a recording may declare (1 GiB).
pub const MAX_FRAME: u64 = 1 << 30;
/// The largest image side a recording may declare.
pub const MAX_SIDE: u32 = 16_384;

impl Header {
    /// Refuse stream parameters no frame can have (so nothing reading them divides by
    /// zero, shifts by a huge amount or allocates without bound). Names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.frame_size > MAX_FRAME {
            return Err(format!(
                "frame_size {} is over {MAX_FRAME}",
                self.frame_size
            ));
        }
        let image = match self.layout.as_str() {
            "bytes" | "" => false,
            "csi-raw10" | "coe-raw10" => {
                self.bits == 10
                    || return Err(format!("layout {} with bits {}", self.layout, self.bits))
            }
            "csi-raw12" | "coe-raw12" => {
                self.bits == 12
                    || return Err(format!("layout {} with bits {}", self.layout, self.bits))
            }
            other => return Err(format!("unknown layout {other:?}")),
        };
        if image {
            if !(2..=MAX_SIDE).contains(&self.width) || !(2..=MAX_SIDE).contains(&self.height) {
                return Err(format!(
                    "image {}x{}: width and height must be 2 to {MAX_SIDE}",
                    self.width, self.height
                ));
            }
            let line = u64::from(self.width) * u64::from(self.bits) / 8;
            if self.bytes_per_line < line || self.bytes_per_line > MAX_FRAME {
                return Err(format!(
                    "bytes_per_line {} for {} pixels of {} bits",
                    self.bytes_per_line, self.width, self.bits
                ));
            }
            if self.start_byte > MAX_FRAME {
                return Err(format!(
                    "start_byte {} is over {MAX_FRAME}",
                    self.start_byte
                ));
            }
        }
        Ok(())
    }
}

fn crc32c(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

impl Entry {
    /// Encode as a 128-byte record.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        let v = u16::from(self.good)
            | u16::from(self.complete) << 1
            | u16::from(self.crc_ok) << 2
            | u16::from(self.crc_present) << 3;
        b[6..8].copy_from_slice(&v.to_le_bytes());
        b[8..16].copy_from_slice(&self.frame_number.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.length.to_le_bytes());
        b[32..36].copy_from_slice(&self.crc.to_le_bytes());
        b[36..40].copy_from_slice(&self.flags.to_le_bytes());
        b[40..48].copy_from_slice(&self.dropped_packets.to_le_bytes());
        b[48..56].copy_from_slice(&self.sof.0.to_le_bytes());
        b[56..60].copy_from_slice(&self.sof.1.to_le_bytes());
        b[60..64].copy_from_slice(&self.meta.1.to_le_bytes());
        b[64..72].copy_from_slice(&self.meta.0.to_le_bytes());
        b[72..80].copy_from_slice(&self.recorded_ns.to_le_bytes());
        b[80..84].copy_from_slice(&self.packets.to_le_bytes());
        b[84..88].copy_from_slice(&self.page.to_le_bytes());
        b[88..92].copy_from_slice(&self.dropped_before.to_le_bytes());
        let c = crc32c(&b[..124]);
        b[124..128].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decode a record; `None` if the magic, version or CRC is wrong (e.g. a torn write).
    pub fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < RECORD_LEN || &b[0..4] != MAGIC || b[4..6] != 1u16.to_le_bytes() {
            return None;
        }
        let u32_ =
            |r: std::ops::Range<usize>| u32::from_le_bytes(b[r].try_into().unwrap_or_default());
        let u64_ =
            |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or_default());
        if crc32c(&b[..124]) != u32_(124..128) {
            return None;
        }
        let v = u16::from_le_bytes([b[6], b[7]]);
        Some(Entry {
            frame_number: u64_(8..16),
            offset: u64_(16..24),
            length: u64_(24..32),
            good: v & 1 != 0,
            complete: v & 2 != 0,
            crc_ok: v & 4 != 0,
            crc_present: v & 8 != 0,
            crc: u32_(32..36),
            flags: u32_(36..40),
            dropped_packets: u64_(40..48),
            sof: (u64_(48..56), u32_(56..60)),
            meta: (u64_(64..72), u32_(60..64)),
            recorded_ns: u64_(72..80),
            packets: u32_(80..84),
            page: u32_(84..88),
            dropped_before: u32_(88..92),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_torn_detection() {
        let e = Entry {
            frame_number: 7,
            offset: 8192,
            length: 5000,
            good: true,
            complete: true,
            crc_ok: true,
            crc_present: true,
            crc: 0xABCD,
            flags: 1,
            dropped_packets: 0,
            sof: (1, 2),
            meta: (3, 4),
            recorded_ns: 5,
            packets: 9,
            page: 1,
            dropped_before: 2,
        };
        let b = e.encode();
        assert_eq!(Entry::decode(&b), Some(e));
        let mut torn = b;
        torn[100] ^= 1;
        assert_eq!(Entry::decode(&torn), None);
        assert_eq!(Entry::decode(&b[..127]), None);
        assert_eq!(Entry::decode(&[0u8; 128]), None);
    }
}
