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
    /// As [`FrameSource::fill`], for sources whose frames come as the application makes
    /// them: frame `index` written into the start of `out` (at most `frame_len` bytes), or
    /// none yet, or no more. By default every frame fills `out`.
    fn next_frame(&mut self, index: u64, va: u64, out: &mut [u8]) -> io::Result<Fill> {
        Ok(match self.fill(index, va, out)? {
            true => Fill::Frame(out.len()),
            false => Fill::Done,
        })
    }
}

/// What [`FrameSource::next_frame`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// A frame of this many bytes.
    Frame(usize),
    /// None yet: ask again soon.
    Later,
    /// No more frames.
    Done,
}

/// A frame the application queued ([`FrameQueue`]).
#[derive(Debug, Clone)]
pub enum Queued {
    /// Bytes sent as they are.
    Bytes(Vec<u8>),
    /// A §4 image: column-major pixels, encoded with the frame's VA and CRC-32C.
    Image {
        /// `columns × rows` pixels, column by column.
        pixels: Vec<u8>,
        /// Its shape.
        geometry: ImageGeometry,
        /// 4 or 6 bits.
        depth: PixelDepth,
    },
}

impl Queued {
    /// Its length on the wire.
    pub fn len(&self) -> usize {
        match self {
            Queued::Bytes(b) => b.len(),
            Queued::Image {
                geometry, depth, ..
            } => geometry.encoded_len(*depth),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The application's end of a queue of frames a worker sends ([`QueueSource`]), shared
/// between threads.
#[derive(Debug, Clone, Default)]
pub struct FrameQueue(std::sync::Arc<std::sync::Mutex<(std::collections::VecDeque<Queued>, bool)>>);

impl FrameQueue {
    /// Queue a frame; false once closed.
    pub fn push(&self, f: Queued) -> bool {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.1 {
            return false;
        }
        g.0.push_back(f);
        true
    }

    /// No more frames: the worker closes its channels once the queued ones are ACKed.
    pub fn close(&self) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1 = true;
    }

    fn pop(&self) -> (Option<Queued>, bool) {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let f = g.0.pop_front();
        (f, g.1)
    }
}

/// Frames the application hands over one by one ([`FrameQueue`]), each at most `max`
/// bytes; ends when the queue is closed and empty.
#[derive(Debug)]
pub struct QueueSource {
    queue: FrameQueue,
    max: usize,
}

impl QueueSource {
    /// A source of frames of up to `max` bytes, and the queue that feeds it.
    pub fn new(max: usize) -> (QueueSource, FrameQueue) {
        let queue = FrameQueue::default();
        (
            QueueSource {
                queue: queue.clone(),
                max,
            },
            queue,
        )
    }
}

impl FrameSource for QueueSource {
    fn frame_len(&self) -> usize {
        self.max
    }
    fn fill(&mut self, index: u64, va: u64, out: &mut [u8]) -> io::Result<bool> {
        Ok(matches!(self.next_frame(index, va, out)?, Fill::Frame(_)))
    }
    fn next_frame(&mut self, _index: u64, va: u64, out: &mut [u8]) -> io::Result<Fill> {
        let (f, closed) = self.queue.pop();
        let Some(f) = f else {
            return Ok(if closed { Fill::Done } else { Fill::Later });
        };
        let n = f.len();
        let too_long = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a frame of {n} bytes is over the worker's {} bytes",
                    self.max
                ),
            )
        };
        let dst = out.get_mut(..n).ok_or_else(too_long)?;
        match f {
            Queued::Bytes(b) => dst.copy_from_slice(&b),
            Queued::Image {
                pixels,
                geometry,
                depth,
            } => image::encode(&pixels, geometry, depth, va, dst)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
        }
        Ok(Fill::Frame(n))
    }
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
