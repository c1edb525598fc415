//! Recorded frames as images: the active pixels of a CSI-2 or CoE RAW10/RAW12 frame (by the
//! geometry in `recording.json`), and the files `rocelink export` writes — numpy `.npy`,
//! 16-bit PGM, and an RGGB-demosaiced RGB8 PNG at half resolution.

use crate::format::Header;
use rocelink_wire::pixel::{unpack_coe_raw10, unpack_coe_raw12, unpack_raw10, unpack_raw12};

/// Why a frame is not an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The recording's layout is not an image layout.
    #[error(
        "recording layout is {0:?}, not an image (record with an image sensor's layout: imx274-… or coe-raw10:WxH)"
    )]
    NotAnImage(String),
    /// The frame holds fewer bytes than its geometry needs.
    #[error(
        "frame shorter than its geometry (line {line} needs bytes {start}..{end}, frame has {len})"
    )]
    Short {
        /// The line.
        line: usize,
        /// First byte it needs.
        start: usize,
        /// One past its last byte.
        end: usize,
        /// Frame length.
        len: usize,
    },
    /// The PNG encoder refused.
    #[error("png: {0}")]
    Png(String),
}

/// The active image of a frame: `height` lines of `width` pixels of `bits` significant bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Pixels per line.
    pub width: usize,
    /// Lines.
    pub height: usize,
    /// Significant bits per pixel (10 or 12).
    pub bits: u32,
    /// Row-major pixels.
    pub pixels: Vec<u16>,
}

/// Unpack the active pixels of `data` as `h` describes them (a checked header: see
/// [`Header::check`]).
pub fn unpack(h: &Header, data: &[u8]) -> Result<Image, ImageError> {
    let layout = h.layout.as_str();
    if !matches!(
        layout,
        "csi-raw10" | "csi-raw12" | "coe-raw10" | "coe-raw12"
    ) {
        return Err(ImageError::NotAnImage(h.layout.clone()));
    }
    let (w, hgt, bpl, start) = (
        h.width as usize,
        h.height as usize,
        h.bytes_per_line as usize,
        h.start_byte as usize,
    );
    let line_bytes = match layout {
        "coe-raw10" => w.div_ceil(3) * 4,
        "coe-raw12" => (w * 3).div_ceil(2),
        _ => w * h.bits as usize / 8,
    };
    let mut px = Vec::with_capacity(w * hgt);
    for y in 0..hgt {
        let at = start + y * bpl;
        let line = data.get(at..at + line_bytes).ok_or(ImageError::Short {
            line: y,
            start: at,
            end: at + line_bytes,
            len: data.len(),
        })?;
        match layout {
            "csi-raw10" => unpack_raw10(line, &mut px),
            "csi-raw12" => unpack_raw12(line, &mut px),
            "coe-raw10" => unpack_coe_raw10(line, w, &mut px),
            _ => unpack_coe_raw12(line, w, &mut px),
        }
    }
    Ok(Image {
        width: w,
        height: hgt,
        bits: h.bits,
        pixels: px,
    })
}

/// A numpy `.npy` file (format 1.0) of `shape` with dtype `descr` (e.g. `<u2`, `|u1`).
pub fn npy(shape: &[usize], descr: &str, body: &[u8]) -> Vec<u8> {
    let dims = shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let dims = if shape.len() == 1 {
        format!("{dims},")
    } else {
        dims
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

impl Image {
    /// A uint16 (height, width) `.npy`.
    pub fn to_npy(&self) -> Vec<u8> {
        let body: Vec<u8> = self.pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
        npy(&[self.height, self.width], "<u2", &body)
    }

    /// A 16-bit grey PGM of the Bayer image.
    pub fn to_pgm(&self) -> Vec<u8> {
        let max = (1u32 << self.bits) - 1;
        let mut b = format!("P5\n{} {}\n{max}\n", self.width, self.height).into_bytes();
        b.extend(self.pixels.iter().flat_map(|v| v.to_be_bytes()));
        b
    }

    /// A 16-bit grey PNG at full resolution, values scaled to the full 16 bits (echo data,
    /// or a Bayer image seen as it was sampled).
    pub fn to_grey_png(&self) -> Result<Vec<u8>, ImageError> {
        let shift = 16u32.saturating_sub(self.bits);
        let body: Vec<u8> = self
            .pixels
            .iter()
            .flat_map(|&v| (v << shift).to_be_bytes())
            .collect();
        let mut b = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut b, self.width as u32, self.height as u32);
            enc.set_color(png::ColorType::Grayscale);
            enc.set_depth(png::BitDepth::Sixteen);
            enc.write_header()
                .and_then(|mut w| w.write_image_data(&body))
                .map_err(|e| ImageError::Png(e.to_string()))?;
        }
        Ok(b)
    }

    /// RGGB 2×2 cells demosaiced to one RGB8 pixel each (half resolution), as a PNG.
    pub fn to_png(&self) -> Result<Vec<u8>, ImageError> {
        let (w, px) = (self.width, &self.pixels);
        let shift = self.bits.saturating_sub(8);
        let (ow, oh) = (self.width / 2, self.height / 2);
        let mut rgb = Vec::with_capacity(ow * oh * 3);
        for y in 0..oh {
            for x in 0..ow {
                let p = |dy: usize, dx: usize| u32::from(px[(2 * y + dy) * w + 2 * x + dx]);
                let g = (p(0, 1) + p(1, 0)) / 2;
                rgb.extend_from_slice(&[
                    (p(0, 0) >> shift) as u8,
                    (g >> shift) as u8,
                    (p(1, 1) >> shift) as u8,
                ]);
            }
        }
        let mut b = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut b, ow as u32, oh as u32);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header()
                .and_then(|mut w| w.write_image_data(&rgb))
                .map_err(|e| ImageError::Png(e.to_string()))?;
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(layout: &str, w: u32, h: u32, bits: u32, bpl: u64) -> Header {
        Header {
            layout: layout.into(),
            width: w,
            height: h,
            bits,
            bytes_per_line: bpl,
            ..Header::default()
        }
    }

    #[test]
    fn csi_raw12_frame_unpacks_line_by_line() {
        // 2×2 RAW12, lines padded to 8 bytes
        let data = [
            0x10, 0x20, 0x21, 0, 0, 0, 0, 0, 0x30, 0x40, 0x43, 0, 0, 0, 0, 0,
        ];
        let img = unpack(&header("csi-raw12", 2, 2, 12, 8), &data).unwrap();
        assert_eq!(img.pixels, [0x101, 0x202, 0x303, 0x404]);
        let pgm = img.to_pgm();
        assert!(pgm.starts_with(b"P5\n2 2\n4095\n"));
        assert_eq!(&pgm[pgm.len() - 2..], &[0x04, 0x04]);
        let png = img.to_png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }

    #[test]
    fn grey_png_holds_every_sample_scaled_to_16_bits() {
        let img = Image {
            width: 3,
            height: 2,
            bits: 12,
            pixels: vec![0, 1, 0xFFF, 7, 0x800, 42],
        };
        let png = img.to_grey_png().unwrap();
        let mut r = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (3, 2));
        assert_eq!(info.color_type, png::ColorType::Grayscale);
        assert_eq!(info.bit_depth, png::BitDepth::Sixteen);
        let got: Vec<u16> = buf[..info.buffer_size()]
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]) >> 4)
            .collect();
        assert_eq!(got, img.pixels);
    }

    #[test]
    fn short_frames_and_byte_layouts_are_errors() {
        let h = header("csi-raw10", 4, 3, 10, 8);
        assert!(matches!(
            unpack(&h, &[0u8; 10]),
            Err(ImageError::Short { line: 1, .. })
        ));
        assert!(matches!(
            unpack(&header("bytes", 0, 0, 0, 0), &[1, 2]),
            Err(ImageError::NotAnImage(_))
        ));
    }

    #[test]
    fn npy_header_is_aligned_and_names_the_shape() {
        let b = npy(&[2, 3], "<u2", &[0; 12]);
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let text = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(text.contains("'shape': (2, 3)") && text.ends_with('\n'));
        assert!(
            std::str::from_utf8(&npy(&[5], "|u1", &[0; 5])[10..])
                .unwrap()
                .contains("(5,)")
        );
    }
}
