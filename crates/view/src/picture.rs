//! Pictures of frames, small enough to refresh several times a second: a camera's Bayer
//! frame demosaiced by 2×2 cells and decimated to at most [`MAX_WIDTH`] pixels, echo data
//! (samples × channels) log-compressed to grey, an IMS §4 image as its grey pixels — each
//! read straight from the packed bytes (only the pixels shown are touched) and encoded as a
//! PNG with the fastest compression.

use rocelink_record::format::Header;
use rocelink_wire::ims::image::{HEADER_LEN, ImageGeometry, PixelDepth};
use std::sync::Arc;

/// The widest picture made (wider frames are decimated).
pub const MAX_WIDTH: usize = 960;
/// The tallest picture made (taller echo data keeps the largest of each run of rows).
pub const MAX_HEIGHT: usize = 1024;

/// An 8-bit picture, grey (1 channel) or RGB (3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// 1 (grey) or 3 (RGB).
    pub channels: usize,
    /// Row-major samples.
    pub data: Vec<u8>,
}

/// Why a picture could not be made or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PictureError {
    /// The frame is shorter than its geometry.
    #[error("frame of {len} bytes is shorter than its picture needs ({need})")]
    Short {
        /// Bytes in the frame.
        len: usize,
        /// Bytes the geometry needs.
        need: usize,
    },
    /// The PNG encoder refused.
    #[error("png: {0}")]
    Png(String),
}

impl Picture {
    /// The picture as a PNG, compressed cheaply (pictures are made several times a second
    /// and read once): fdeflate's fast level after the Up filter, measured faster than its
    /// fastest level with adaptive filters (2.0 against 3.9 ms for a 960×540 RGB picture)
    /// at the same size.
    pub fn to_png(&self) -> Result<Vec<u8>, PictureError> {
        let mut out = Vec::with_capacity(self.data.len() / 2 + 1024);
        let mut enc = png::Encoder::new(&mut out, self.width as u32, self.height as u32);
        enc.set_color(match self.channels {
            1 => png::ColorType::Grayscale,
            _ => png::ColorType::Rgb,
        });
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        enc.set_filter(png::Filter::Up);
        enc.write_header()
            .and_then(|mut w| w.write_image_data(&self.data))
            .map_err(|e| PictureError::Png(e.to_string()))?;
        Ok(out)
    }
}

/// Makes the picture of one frame's bytes.
pub type Render = Arc<dyn Fn(&[u8]) -> Result<Picture, PictureError> + Send + Sync>;

/// The picture for frames a recording header describes: a Bayer image for a camera, grey
/// echo data for shots (`grey`), none for byte layouts.
pub fn for_header(h: &Header) -> Option<Render> {
    let packing = Packing::of(&h.layout)?;
    if h.width < 2 || h.height < 2 {
        return None;
    }
    let width = h.width as usize;
    let g = Geometry {
        width,
        height: h.height as usize,
        start: h.start_byte as usize,
        line: h.bytes_per_line as usize,
        line_bytes: packing.line_bytes(width),
        bits: h.bits,
    };
    Some(match packing {
        Packing::Csi10 => with(g, h.grey, csi10),
        Packing::Csi12 => with(g, h.grey, csi12),
        Packing::Coe10 => with(g, h.grey, coe10),
        Packing::Coe12 => with(g, h.grey, coe12),
    })
}

/// The renderer of `g`'s frames read by `sample` (a function item: each layout gets its
/// own loop, the sampler inlined).
fn with<S>(g: Geometry, grey: bool, sample: S) -> Render
where
    S: Fn(&[u8], usize) -> u16 + Copy + Send + Sync + 'static,
{
    if grey {
        Arc::new(move |d: &[u8]| echo(&g, d, sample))
    } else {
        Arc::new(move |d: &[u8]| bayer(&g, d, sample))
    }
}

/// The picture of IMS frames: a §4 image of `geom` and `depth`, shown grey.
pub fn ims_image(geom: ImageGeometry, depth: PixelDepth) -> Render {
    Arc::new(move |d: &[u8]| ims(geom, depth, d))
}

/// The picture of IMS frames of any length: a square §4 image when the length fits one
/// ([`ims_square`]), else the bytes themselves as grey rows of 1024.
pub fn ims_any() -> Render {
    Arc::new(|d: &[u8]| match ims_square(d.len()) {
        Some((g, depth)) => ims(g, depth, d),
        None => bytes(d),
    })
}

/// Bytes as grey rows of 1024 (the first [`MAX_HEIGHT`] rows).
fn bytes(d: &[u8]) -> Result<Picture, PictureError> {
    const W: usize = 1024;
    let h = (d.len() / W).min(MAX_HEIGHT);
    if h == 0 {
        return Err(PictureError::Short {
            len: d.len(),
            need: W,
        });
    }
    Ok(Picture {
        width: W,
        height: h,
        channels: 1,
        data: d[..W * h].to_vec(),
    })
}

/// A §4 image guessed from a frame's length: a square 6-bit image when the pixel bytes are
/// a square number, else a square 4-bit one, else `None` (bytes, not an image).
pub fn ims_square(len: usize) -> Option<(ImageGeometry, PixelDepth)> {
    let body = len.checked_sub(HEADER_LEN)?;
    let root = |n: usize| (n as f64).sqrt().round() as usize;
    let side = root(body);
    if side >= 2 && side * side == body {
        return Some((ImageGeometry::square(side), PixelDepth::Six));
    }
    let side = root(body * 2);
    (side >= 2 && side % 2 == 0 && side * side == body * 2)
        .then(|| (ImageGeometry::square(side), PixelDepth::Four))
}

trait Square {
    fn square(side: usize) -> ImageGeometry;
}
impl Square for ImageGeometry {
    fn square(side: usize) -> ImageGeometry {
        ImageGeometry {
            columns: side,
            rows: side,
        }
    }
}

/// Where the pixels of a packed frame are.
#[derive(Clone, Copy)]
struct Geometry {
    width: usize,
    height: usize,
    start: usize,
    line: usize,
    line_bytes: usize,
    bits: u32,
}

impl Geometry {
    /// Line `y` of `d`, checked to hold `width` pixels.
    fn line<'a>(&self, d: &'a [u8], y: usize) -> Result<&'a [u8], PictureError> {
        let at = self.start + y * self.line;
        d.get(at..at + self.line_bytes).ok_or(PictureError::Short {
            len: d.len(),
            need: self.start + self.height * self.line,
        })
    }
}

/// How pixels are packed in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Packing {
    Csi10,
    Csi12,
    Coe10,
    Coe12,
}

impl Packing {
    fn of(layout: &str) -> Option<Packing> {
        Some(match layout {
            "csi-raw10" => Packing::Csi10,
            "csi-raw12" => Packing::Csi12,
            "coe-raw10" => Packing::Coe10,
            "coe-raw12" => Packing::Coe12,
            _ => return None,
        })
    }

    /// The bytes a line of `w` pixels packs into.
    fn line_bytes(self, w: usize) -> usize {
        match self {
            Packing::Csi10 => w.div_ceil(4) * 5,
            Packing::Csi12 | Packing::Coe12 => w.div_ceil(2) * 3,
            Packing::Coe10 => w.div_ceil(3) * 4,
        }
    }
}

/// Pixel `x` of a CSI RAW10 line: four pixels' high bytes, then their low bits.
#[inline]
fn csi10(l: &[u8], x: usize) -> u16 {
    let (g, i) = (x / 4 * 5, x % 4);
    u16::from(l[g + i]) << 2 | u16::from(l[g + 4] >> (2 * i)) & 3
}

/// Pixel `x` of a CSI RAW12 line: two pixels' high bytes, then their low nibbles.
#[inline]
fn csi12(l: &[u8], x: usize) -> u16 {
    let (g, i) = (x / 2 * 3, x % 2);
    u16::from(l[g + i]) << 4 | u16::from(l[g + 2] >> (4 * i)) & 0xF
}

/// Pixel `x` of a CoE RAW10 line: three pixels in a little-endian u32.
#[inline]
fn coe10(l: &[u8], x: usize) -> u16 {
    let g = x / 3 * 4;
    let w = u32::from_le_bytes([l[g], l[g + 1], l[g + 2], l[g + 3]]);
    ((w >> (10 * (x % 3))) & 0x3FF) as u16
}

/// Pixel `x` of a CoE RAW12 line: two pixels in three bytes, low byte first.
#[inline]
fn coe12(l: &[u8], x: usize) -> u16 {
    let g = x / 2 * 3;
    match x % 2 {
        0 => u16::from(l[g]) | u16::from(l[g + 1] & 0xF) << 8,
        _ => u16::from(l[g + 1] >> 4) | u16::from(l[g + 2]) << 4,
    }
}

/// RGGB cells, every `step`-th cell in each direction, one RGB pixel per cell.
fn bayer(
    g: &Geometry,
    d: &[u8],
    sample: impl Fn(&[u8], usize) -> u16,
) -> Result<Picture, PictureError> {
    let cells = g.width / 2;
    let step = cells.div_ceil(MAX_WIDTH).max(1);
    let (w, h) = (cells / step, g.height / 2 / step);
    let shift = g.bits.saturating_sub(8);
    let mut data = Vec::with_capacity(w * h * 3);
    for cy in 0..h {
        let (top, bottom) = (g.line(d, 2 * cy * step)?, g.line(d, 2 * cy * step + 1)?);
        for cx in 0..w {
            let x = 2 * cx * step;
            let s = |l: &[u8], dx: usize| u32::from(sample(l, x + dx)) >> shift;
            let green = (s(top, 1) + s(bottom, 0)) / 2;
            data.extend_from_slice(&[s(top, 0) as u8, green as u8, s(bottom, 1) as u8]);
        }
    }
    Ok(Picture {
        width: w,
        height: h,
        channels: 3,
        data,
    })
}

/// Echo data (rows = samples, columns = channels) as grey: each value's distance from
/// mid-scale, log-compressed (`log(1 + |v − mid|)` over its maximum); columns decimated to
/// [`MAX_WIDTH`], runs of rows to their largest to [`MAX_HEIGHT`].
fn echo(
    g: &Geometry,
    d: &[u8],
    sample: impl Fn(&[u8], usize) -> u16,
) -> Result<Picture, PictureError> {
    let step_x = g.width.div_ceil(MAX_WIDTH).max(1);
    let step_y = g.height.div_ceil(MAX_HEIGHT).max(1);
    let (w, h) = (g.width / step_x, g.height.div_ceil(step_y));
    let mid = 1i32 << (g.bits - 1);
    let scale = 255.0 / (1.0 + f64::from(mid)).ln();
    let lut: Vec<u8> = (0..=mid)
        .map(|a| ((1.0 + f64::from(a)).ln() * scale).round().min(255.0) as u8)
        .collect();
    let mut data = vec![0u8; w * h];
    for y in 0..g.height {
        let line = g.line(d, y)?;
        let row = &mut data[(y / step_y) * w..][..w];
        for (x, out) in row.iter_mut().enumerate() {
            let v = i32::from(sample(line, x * step_x));
            let a = (v - mid).unsigned_abs().min(mid as u32) as usize;
            *out = (*out).max(lut[a]);
        }
    }
    Ok(Picture {
        width: w,
        height: h,
        channels: 1,
        data,
    })
}

/// A §4 image (column-major pixels after the 64-byte header) as grey, scaled to 8 bits.
fn ims(geom: ImageGeometry, depth: PixelDepth, d: &[u8]) -> Result<Picture, PictureError> {
    let need = geom.encoded_len(depth);
    if d.len() < need {
        return Err(PictureError::Short { len: d.len(), need });
    }
    let body = &d[HEADER_LEN..need];
    let cb = geom.column_bytes(depth);
    let (w, h) = (geom.columns, geom.rows);
    let mut data = vec![0u8; w * h];
    for c in 0..w {
        let col = &body[c * cb..(c + 1) * cb];
        for r in 0..h {
            data[r * w + c] = match depth {
                PixelDepth::Six => (col[r] & 0x3F) << 2,
                PixelDepth::Four => ((col[r / 2] >> (4 * (r % 2))) & 0x0F) * 17,
            };
        }
    }
    Ok(Picture {
        width: w,
        height: h,
        channels: 1,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_wire::pixel::{unpack_coe_raw10, unpack_coe_raw12, unpack_raw10, unpack_raw12};

    fn line(seed: u32, n: usize) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8)
            .collect()
    }

    #[test]
    fn each_sampler_reads_what_the_unpacker_unpacks() {
        let l = line(7, 60);
        let w = 16;
        let cases: [(&str, Vec<u16>); 4] = [
            ("csi-raw10", {
                let mut v = Vec::new();
                unpack_raw10(&l[..20], &mut v);
                v
            }),
            ("csi-raw12", {
                let mut v = Vec::new();
                unpack_raw12(&l[..24], &mut v);
                v
            }),
            ("coe-raw10", {
                let mut v = Vec::new();
                unpack_coe_raw10(&l, w, &mut v);
                v
            }),
            ("coe-raw12", {
                let mut v = Vec::new();
                unpack_coe_raw12(&l, w, &mut v);
                v
            }),
        ];
        for (layout, want) in cases {
            let s = match Packing::of(layout).unwrap() {
                Packing::Csi10 => csi10,
                Packing::Csi12 => csi12,
                Packing::Coe10 => coe10,
                Packing::Coe12 => coe12,
            };
            let got: Vec<u16> = (0..w).map(|x| s(&l, x)).collect();
            assert_eq!(got, want[..w], "{layout}");
        }
        assert!(Packing::of("bytes").is_none());
    }

    fn header(layout: &str, w: u32, h: u32, bits: u32, grey: bool) -> Header {
        Header {
            layout: layout.into(),
            width: w,
            height: h,
            bits,
            bytes_per_line: (w * bits / 8) as u64,
            grey,
            ..Header::default()
        }
    }

    #[test]
    fn a_wide_bayer_frame_is_decimated_to_the_cells_it_shows() {
        // 4000 px wide RAW12: 2000 cells, every 3rd shown → 666 × (8/2/3 = 1)
        let h = header("csi-raw12", 4000, 8, 12, false);
        let mut d = vec![0u8; 6000 * 8];
        // cell (x=3, y=0) is pixels (6,0),(7,0),(6,1),(7,1): R=0xAB_, G=0x40_/0x60_, B=0x10_
        d[9] = 0xAB; // pixel 6 of line 0 (group 3, byte 0)
        d[10] = 0x40; // pixel 7 of line 0
        d[6000 + 9] = 0x60; // pixel 6 of line 1
        d[6000 + 10] = 0x10; // pixel 7 of line 1
        let p = for_header(&h).unwrap()(&d).unwrap();
        assert_eq!((p.width, p.height, p.channels), (666, 1, 3));
        assert_eq!(&p.data[3..6], &[0xAB, 0x50, 0x10]);
        assert_eq!(&p.data[..3], &[0, 0, 0]);
    }

    #[test]
    fn echo_data_is_log_grey_and_short_frames_are_errors() {
        let h = header("csi-raw12", 4, 2, 12, true);
        // line of 4 pixels = 6 bytes; pixel 0 = 0x800 (mid: black), pixel 1 = 0xFFF (top)
        let d = [
            0x80, 0xFF, 0xF0, 0x00, 0x80, 0x00, 0x80, 0x80, 0, 0x80, 0x80, 0,
        ];
        let p = for_header(&h).unwrap()(&d).unwrap();
        assert_eq!((p.width, p.height, p.channels), (4, 2, 1));
        assert_eq!(p.data[0], 0);
        assert_eq!(p.data[1], 255);
        assert!(p.data[2] > 250, "0x000 is as far from mid as 0xFFF");
        assert_eq!(p.data[3], 0);
        assert!(matches!(
            for_header(&h).unwrap()(&d[..8]),
            Err(PictureError::Short { .. })
        ));
        assert!(for_header(&header("bytes", 0, 0, 0, false)).is_none());
    }

    #[test]
    fn ims_images_show_their_column_major_pixels_and_are_guessed_square() {
        let g = ImageGeometry {
            columns: 2,
            rows: 2,
        };
        let mut f = vec![0u8; 64];
        f.extend_from_slice(&[0x3F, 0x01, 0x02, 0x03]); // column 0: 63, 1; column 1: 2, 3
        let p = ims_image(g, PixelDepth::Six)(&f).unwrap();
        assert_eq!(p.data, [0xFC, 0x08, 0x04, 0x0C]);
        assert_eq!(
            ims_square(64 + 65536),
            Some((ImageGeometry::square(256), PixelDepth::Six))
        );
        assert_eq!(
            ims_square(64 + 32768),
            Some((ImageGeometry::square(256), PixelDepth::Four))
        );
        assert_eq!(ims_square(64 + 1000), None);
        let raw: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let q = ims_any()(&raw).unwrap();
        assert_eq!((q.width, q.height), (1024, 4));
        assert_eq!(q.data[..], raw[..4096]);
        assert_eq!(ims_any()(&f).unwrap(), p, "a square image is shown as one");
        assert_eq!(ims_square(10), None);
        let png = p.to_png().unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        assert_eq!((dec.info().width, dec.info().height), (2, 2));
    }
}
