//! Image data mapping (§4.4–4.6): a 64-byte header — CRC32C (4 bytes), padding (4),
//! VA of the image (8), padding (48) — then the pixels column by column.
//!
//! * 6-bit images: one pixel per byte, the pixel in the low six bits (two zero padding bits
//!   above it). A 256×256 image is 64 + 65 536 = 65 600 bytes (Figure 4.5).
//! * 4-bit images: two pixels per byte; following the little-endian bit order of §4.3 the
//!   earlier pixel of a column is in the low nibble.
//!
//! The CRC is CRC-32C (Castagnoli, reflected, init and xorout 0xFFFFFFFF) over the pixel
//! bytes (offset 64 to the end), stored big-endian. Header words are big-endian.

use crate::bytes::{be_u32, be_u64, set_be_u32, set_be_u64};
use crate::{Error, Result};

/// Header length in front of the pixel bytes.
pub const HEADER_LEN: usize = 64;

/// Pixel depth of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PixelDepth {
    /// Two pixels per byte.
    Four,
    /// One pixel per byte (also usable for 8-bit data).
    Six,
}

impl PixelDepth {
    fn max(self) -> u8 {
        match self {
            PixelDepth::Four => 0x0F,
            PixelDepth::Six => 0x3F,
        }
    }
}

/// Image size: `columns` columns of `rows` pixels each (256 × 256 in the specification).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ImageGeometry {
    /// Number of columns.
    pub columns: usize,
    /// Pixels per column.
    pub rows: usize,
}

impl ImageGeometry {
    /// Bytes of one column on the wire.
    pub fn column_bytes(&self, depth: PixelDepth) -> usize {
        match depth {
            PixelDepth::Four => self.rows.div_ceil(2),
            PixelDepth::Six => self.rows,
        }
    }
    /// Total bytes: header + columns.
    pub fn encoded_len(&self, depth: PixelDepth) -> usize {
        HEADER_LEN + self.columns * self.column_bytes(depth)
    }
    fn pixels(&self) -> usize {
        self.columns * self.rows
    }
}

/// CRC-32C of `b`.
pub fn crc32c(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

/// Encode column-major `pixels` (`columns × rows`, each ≤ the depth's maximum) into `out`
/// (exactly `encoded_len` bytes), with `va` in the header and the CRC filled in.
pub fn encode(
    pixels: &[u8],
    geom: ImageGeometry,
    depth: PixelDepth,
    va: u64,
    out: &mut [u8],
) -> Result<()> {
    if pixels.len() != geom.pixels() || out.len() != geom.encoded_len(depth) {
        return Err(Error::Malformed);
    }
    if pixels.iter().any(|&p| p > depth.max()) {
        return Err(Error::Malformed);
    }
    out[..HEADER_LEN].fill(0);
    set_be_u64(&mut out[8..16], va);
    let cb = geom.column_bytes(depth);
    for (c, col) in pixels
        .chunks(geom.rows.max(1))
        .enumerate()
        .take(geom.columns)
    {
        let dst = &mut out[HEADER_LEN + c * cb..HEADER_LEN + (c + 1) * cb];
        match depth {
            PixelDepth::Six => dst.copy_from_slice(col),
            PixelDepth::Four => {
                for (i, d) in dst.iter_mut().enumerate() {
                    let lo = col[2 * i];
                    let hi = col.get(2 * i + 1).copied().unwrap_or(0);
                    *d = lo | (hi << 4);
                }
            }
        }
    }
    let crc = crc32c(&out[HEADER_LEN..]);
    set_be_u32(&mut out[0..4], crc);
    Ok(())
}

/// True when `frame` starts with a §4 header whose CRC-32C matches the bytes after the
/// header and whose VA field is `va` — the check a buffer unit makes of every frame, image
/// or not, that carries the header. A frame shorter than the header fails.
pub fn header_ok(frame: &[u8], va: u64) -> bool {
    frame.len() >= HEADER_LEN
        && be_u64(&frame[8..16]) == va
        && be_u32(&frame[0..4]) == crc32c(&frame[HEADER_LEN..])
}

/// Write the §4 header of `frame` (CRC-32C of the bytes after it, `va`; padding zero).
/// `false` (nothing written) when `frame` is shorter than the header.
pub fn write_header(frame: &mut [u8], va: u64) -> bool {
    if frame.len() < HEADER_LEN {
        return false;
    }
    let crc = crc32c(&frame[HEADER_LEN..]);
    frame[..HEADER_LEN].fill(0);
    set_be_u32(&mut frame[0..4], crc);
    set_be_u64(&mut frame[8..16], va);
    true
}

/// A decoded image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// CRC stored in the header.
    pub crc: u32,
    /// True when it matches the pixel bytes.
    pub crc_ok: bool,
    /// VA stored in the header.
    pub va: u64,
    /// Column-major pixels.
    pub pixels: Vec<u8>,
}

/// Decode an encoded image. Padding bits set in a 6-bit image are [`Error::Malformed`].
pub fn decode(b: &[u8], geom: ImageGeometry, depth: PixelDepth) -> Result<Decoded> {
    if b.len() < geom.encoded_len(depth) {
        return Err(Error::Truncated);
    }
    let b = &b[..geom.encoded_len(depth)];
    let data = &b[HEADER_LEN..];
    let crc = be_u32(&b[0..4]);
    let va = be_u64(&b[8..16]);
    let cb = geom.column_bytes(depth);
    let mut pixels = Vec::with_capacity(geom.pixels());
    for c in 0..geom.columns {
        let col = &data[c * cb..(c + 1) * cb];
        match depth {
            PixelDepth::Six => {
                if col.iter().any(|&p| p > 0x3F) {
                    return Err(Error::Malformed);
                }
                pixels.extend_from_slice(col);
            }
            PixelDepth::Four => {
                for r in 0..geom.rows {
                    let byte = col[r / 2];
                    pixels.push(if r % 2 == 0 { byte & 0x0F } else { byte >> 4 });
                }
            }
        }
    }
    Ok(Decoded {
        crc,
        crc_ok: cfg!(fuzzing) || crc == crc32c(data),
        va,
        pixels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn a_written_header_checks_and_any_flip_fails() {
        let mut f: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
        assert!(write_header(&mut f, 0x1122_3344_5566_7740));
        assert_eq!(&f[8..16], &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x40]);
        assert!(f[4..8].iter().chain(&f[16..64]).all(|&b| b == 0));
        assert_eq!(be_u32(&f[0..4]), crc32c(&f[64..]));
        assert!(header_ok(&f, 0x1122_3344_5566_7740));
        assert!(!header_ok(&f, 0x1122_3344_5566_7780), "another VA");
        for bit in [0, 31, 64 * 8, 199 * 8 + 7] {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            assert!(!header_ok(&g, 0x1122_3344_5566_7740), "bit {bit}");
        }
        assert!(!write_header(&mut [0u8; 63], 0));
        assert!(!header_ok(&[0u8; 63], 0));
    }

    #[test]
    fn six_bit_spec_size() {
        let g = ImageGeometry {
            columns: 256,
            rows: 256,
        };
        assert_eq!(g.encoded_len(PixelDepth::Six), 65_600);
        assert_eq!(g.encoded_len(PixelDepth::Four), 64 + 256 * 128);
        let pixels: Vec<u8> = (0..65_536u32).map(|i| (i % 64) as u8).collect();
        let mut out = vec![0xA5; 65_600];
        encode(&pixels, g, PixelDepth::Six, 0x40_0000, &mut out).unwrap();
        assert_eq!(&out[8..16], &[0, 0, 0, 0, 0, 0x40, 0, 0]);
        assert!(out[4..8].iter().chain(&out[16..64]).all(|&x| x == 0));
        assert_eq!(out[64], 0);
        assert_eq!(out[65], 1);
        assert_eq!(out[64 + 256], 0); // column 1 starts at byte 320
        let d = decode(&out, g, PixelDepth::Six).unwrap();
        assert!(d.crc_ok);
        assert_eq!(d.va, 0x40_0000);
        assert_eq!(d.pixels, pixels);
        out[1000] ^= 1;
        assert!(!decode(&out, g, PixelDepth::Six).unwrap().crc_ok);
    }

    #[test]
    fn four_bit_nibbles() {
        let g = ImageGeometry {
            columns: 2,
            rows: 3,
        };
        let pixels = [1, 2, 3, 4, 5, 6];
        let mut out = vec![0; g.encoded_len(PixelDepth::Four)];
        encode(&pixels, g, PixelDepth::Four, 0, &mut out).unwrap();
        assert_eq!(&out[64..], &[0x21, 0x03, 0x54, 0x06]);
        let d = decode(&out, g, PixelDepth::Four).unwrap();
        assert_eq!(d.pixels, pixels);
        assert!(d.crc_ok);
        assert_eq!(
            encode(&[16, 0, 0, 0, 0, 0], g, PixelDepth::Four, 0, &mut out),
            Err(Error::Malformed)
        );
        assert_eq!(
            decode(&out[..66], g, PixelDepth::Four),
            Err(Error::Truncated)
        );
    }
}
