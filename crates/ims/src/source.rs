//! What a worker sends: frames from a deterministic generator, §4 images, or a file; and
//! what a buffer unit checks of each frame it consumes.

use rocelink_wire::ims::image::{self, HEADER_LEN, ImageGeometry, PixelDepth};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Where a worker's frames come from. Frame `index` always has the same bytes, so a
/// retransmission is the frame that was lost.
pub trait FrameSource {
    /// Bytes of every frame.
    fn frame_len(&self) -> usize;
    /// Write frame `index`, to be sent to `va`, into `out` (`frame_len` bytes). `Ok(false)`
    /// when there are no more frames.
    fn fill(&mut self, index: u64, va: u64, out: &mut [u8]) -> io::Result<bool>;
}

/// What a buffer unit checks of each frame before handing it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Verify {
    /// The §4 header: CRC-32C of the bytes after it, and the frame's own VA (images and
    /// [`PatternSource`] frames carry it).
    #[default]
    Header,
    /// Nothing (frames of raw bytes, e.g. from a file).
    None,
}

impl Verify {
    /// True when `frame`, delivered at `va`, passes.
    pub fn check(self, frame: &[u8], va: u64) -> bool {
        match self {
            Verify::Header => image::header_ok(frame, va),
            Verify::None => true,
        }
    }
}

/// Frames of `len` bytes: the §4 header (CRC-32C, VA), then bytes that depend on the frame
/// index only. Cheap to make at tens of Gbit/s; the buffer unit checks them with
/// [`Verify::Header`].
#[derive(Debug, Clone)]
pub struct PatternSource {
    len: usize,
    frames: Option<u64>,
}

impl PatternSource {
    /// `frames` frames (`None`: endless) of `len` bytes (at least the 64-byte header).
    pub fn new(len: usize, frames: Option<u64>) -> Option<PatternSource> {
        (len >= HEADER_LEN).then_some(PatternSource { len, frames })
    }
}

impl FrameSource for PatternSource {
    fn frame_len(&self) -> usize {
        self.len
    }
    fn fill(&mut self, index: u64, va: u64, out: &mut [u8]) -> io::Result<bool> {
        if self.frames.is_some_and(|n| index >= n) {
            return Ok(false);
        }
        let seed = (index ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let body = &mut out[HEADER_LEN..];
        let mut words = body.chunks_exact_mut(8);
        for (i, w) in (&mut words).enumerate() {
            let x = seed ^ (i as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
            w.copy_from_slice(&x.to_le_bytes());
        }
        for (i, b) in words.into_remainder().iter_mut().enumerate() {
            *b = (seed >> (8 * i)) as u8;
        }
        image::write_header(out, va);
        Ok(true)
    }
}

/// §4 images (4- or 6-bit pixels, column by column, CRC-32C header) whose pixels depend
/// on the frame index.
#[derive(Debug, Clone)]
pub struct ImageSource {
    geom: ImageGeometry,
    depth: PixelDepth,
    frames: Option<u64>,
    pixels: Vec<u8>,
}

impl ImageSource {
    /// `frames` images (`None`: endless) of `geom` at `depth`.
    pub fn new(geom: ImageGeometry, depth: PixelDepth, frames: Option<u64>) -> ImageSource {
        ImageSource {
            geom,
            depth,
            frames,
            pixels: vec![0; geom.columns * geom.rows],
        }
    }
}

impl FrameSource for ImageSource {
    fn frame_len(&self) -> usize {
        self.geom.encoded_len(self.depth)
    }
    fn fill(&mut self, index: u64, va: u64, out: &mut [u8]) -> io::Result<bool> {
        if self.frames.is_some_and(|n| index >= n) {
            return Ok(false);
        }
        let max = match self.depth {
            PixelDepth::Four => 0x0F,
            PixelDepth::Six => 0x3F,
        };
        let rows = self.geom.rows.max(1);
        for (i, p) in self.pixels.iter_mut().enumerate() {
            let (c, r) = (i / rows, i % rows);
            *p = ((c + 3 * r) as u64 ^ index) as u8 & max;
        }
        image::encode(&self.pixels, self.geom, self.depth, va, out)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(true)
    }
}

/// Frames read from a file, `len` bytes each (a short last piece is padded with zeros);
/// with `repeat` the file starts over at its end.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    size: u64,
    len: usize,
    repeat: bool,
}

impl FileSource {
    /// Frames of `len` bytes from `path`.
    pub fn open(path: &Path, len: usize, repeat: bool) -> io::Result<FileSource> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        if size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is empty", path.display()),
            ));
        }
        Ok(FileSource {
            file,
            size,
            len,
            repeat,
        })
    }
}

impl FrameSource for FileSource {
    fn frame_len(&self) -> usize {
        self.len
    }
    fn fill(&mut self, index: u64, _va: u64, out: &mut [u8]) -> io::Result<bool> {
        let per_file = self.size.div_ceil(self.len as u64);
        if !self.repeat && index >= per_file {
            return Ok(false);
        }
        let at = (index % per_file) * self.len as u64;
        self.file.seek(SeekFrom::Start(at))?;
        let mut got = 0;
        while got < out.len() {
            match self.file.read(&mut out[got..])? {
                0 => break,
                n => got += n,
            }
        }
        out[got..].fill(0);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_frames_check_at_their_va_and_differ_by_index() {
        let mut s = PatternSource::new(1000, Some(2)).unwrap();
        let (mut a, mut b) = (vec![0u8; 1000], vec![0u8; 1000]);
        assert!(s.fill(0, 4096, &mut a).unwrap());
        assert!(s.fill(1, 4096, &mut b).unwrap());
        assert!(Verify::Header.check(&a, 4096) && Verify::Header.check(&b, 4096));
        assert!(!Verify::Header.check(&a, 8192));
        assert_ne!(a[64..], b[64..]);
        let mut again = vec![0u8; 1000];
        s.fill(0, 4096, &mut again).unwrap();
        assert_eq!(a, again, "a retransmission is the same frame");
        assert!(!s.fill(2, 0, &mut again).unwrap(), "two frames only");
        assert!(PatternSource::new(63, None).is_none());
    }

    #[test]
    fn images_decode_to_their_pixels() {
        let g = ImageGeometry {
            columns: 256,
            rows: 256,
        };
        for depth in [PixelDepth::Four, PixelDepth::Six] {
            let mut s = ImageSource::new(g, depth, None);
            let mut out = vec![0u8; s.frame_len()];
            assert!(s.fill(5, 1 << 40, &mut out).unwrap());
            assert!(Verify::Header.check(&out, 1 << 40));
            let d = image::decode(&out, g, depth).unwrap();
            assert!(d.crc_ok);
            assert_eq!(d.pixels, s.pixels);
        }
        assert_eq!(
            ImageSource::new(g, PixelDepth::Six, None).frame_len(),
            65_600
        );
    }
}
