//! Frame sources for the emulator.
//!
//! * [`Sensor::Pattern`] — a deterministic pattern whose size is whatever the host
//!   programmed (DP_BUFFER_LENGTH), as with a real sensor window; byte `i` of frame `n` is
//!   [`pattern_byte`]`(n, i)`, so a receiver can check every byte.
//! * [`Sensor::Imx274`] — IMX274 CSI-2 frames as HSB delivers them (`docs/reference/hsb.md`, "Formats"): one
//!   embedded-data line (175 bytes padded to 176; RAW12: 210 → 216), optical-black lines
//!   (8; RAW12: 16), then the active lines, each zero-padded to 8 bytes; pixels RAW10 (4 in
//!   5 bytes) or RAW12 (2 in 3 bytes) showing colour bars over a gradient, Bayer RGGB.
//!   1080p RAW10 is 2 611 376 bytes.
//! * [`Sensor::Ultrasound`] — channels × samples of 12-bit ADC values in little-endian
//!   16-bit containers: decaying echoes at channel-dependent depths.
//! * [`Sensor::Replay`] — the bytes of a file, cut into frames.

use std::path::Path;

/// IMX274 readout modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Imx274Mode {
    /// 1920×1080 RAW10.
    P1080Raw10,
    /// 3840×2160 RAW10.
    P2160Raw10,
    /// 3840×2160 RAW12.
    P2160Raw12,
}

impl Imx274Mode {
    /// (width, height, bits per pixel).
    pub fn geometry(self) -> (usize, usize, usize) {
        match self {
            Imx274Mode::P1080Raw10 => (1920, 1080, 10),
            Imx274Mode::P2160Raw10 => (3840, 2160, 10),
            Imx274Mode::P2160Raw12 => (3840, 2160, 12),
        }
    }
    /// Bytes per line (packed pixels, padded to 8).
    pub fn bytes_per_line(self) -> usize {
        let (w, _, bpp) = self.geometry();
        (w * bpp / 8).next_multiple_of(8)
    }
    /// Offset of the first active line.
    pub fn start_byte(self) -> usize {
        match self {
            Imx274Mode::P2160Raw12 => 216 + 16 * self.bytes_per_line(),
            _ => 176 + 8 * self.bytes_per_line(),
        }
    }
    /// Whole CSI frame.
    pub fn frame_len(self) -> usize {
        self.start_byte() + self.geometry().1 * self.bytes_per_line()
    }
}

/// A frame source.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Sensor {
    /// Deterministic bytes, as many as the window holds.
    Pattern,
    /// IMX274 CSI frames.
    Imx274(Imx274Mode),
    /// 12-bit ADC shots.
    Ultrasound {
        /// Channels.
        channels: usize,
        /// Samples per channel.
        samples: usize,
    },
    /// A file's bytes, `frame` bytes at a time (the last frame may be shorter).
    Replay {
        /// The data.
        data: std::sync::Arc<Vec<u8>>,
        /// Frame size.
        frame: usize,
    },
}

/// Byte `i` of pattern frame `n`.
#[inline]
pub fn pattern_byte(n: u64, i: usize) -> u8 {
    let x = (i as u64)
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(n.wrapping_mul(0x85EB_CA6B));
    (x ^ (x >> 13) ^ (i as u64 >> 8)) as u8
}

/// The colour-bar test image value (0..max) of pixel (x, y) in frame `n`.
pub fn bar_pixel(x: usize, y: usize, w: usize, h: usize, max: u32, n: u64) -> u32 {
    let moving = ((x as u64 + n * 16) % w.max(1) as u64) < 8; // a marker that moves per frame
    if moving {
        max
    } else {
        bar_pixel_static(x, y, w, h, max)
    }
}

/// Pack a line of pixels at `bpp` bits.
fn pack(bpp: usize, px: &[u32], out: &mut [u8]) {
    if bpp == 10 {
        pack_raw10(px, out)
    } else {
        pack_raw12(px, out)
    }
}

/// The colour-bar CSI frame `n` of mode `m` into `out`. A line is one of ten base lines (the
/// Bayer row parity × the five brightness bands) plus the moving marker, so each base line
/// is packed once and copied, and only the packed groups under the marker are redone —
/// the same bytes as packing every pixel (see the test), at a copy's cost.
fn imx274_frame(m: Imx274Mode, n: u64, out: &mut Vec<u8>) {
    let (w, h, bpp) = m.geometry();
    out.clear();
    out.resize(m.frame_len(), 0);
    // embedded data line: a recognisable header (frame counter)
    out[..8].copy_from_slice(&n.to_le_bytes());
    let bpl = m.bytes_per_line();
    let max = (1u32 << bpp) - 1;
    // pixels per packed group and its bytes
    let (gp, gb) = if bpp == 10 { (4, 5) } else { (2, 3) };
    // the marker's columns: x with (x + 16n) mod w < 8
    let shift = ((n.wrapping_mul(16)) % w as u64) as usize;
    let marker: Vec<usize> = (0..8.min(w)).map(|k| (k + w - shift) % w).collect();
    let mut groups: Vec<usize> = marker.iter().map(|x| x / gp).collect();
    groups.sort_unstable();
    groups.dedup();
    // base lines without the marker: the frame number only moves the marker, so a frame
    // "far" from it (none of its columns in the marker) gives them
    let mut base: Vec<Option<Vec<u8>>> = vec![None; 10];
    let mut line = vec![0u32; w];
    for y in 0..h {
        let key = (y & 1) * 5 + (y * 5 / h.max(1)).min(4);
        if base[key].is_none() {
            for (x, p) in line.iter_mut().enumerate() {
                *p = bar_pixel_static(x, y, w, h, max);
            }
            let mut b = vec![0u8; bpl];
            pack(bpp, &line, &mut b);
            base[key] = Some(b);
        }
        let at = m.start_byte() + y * bpl;
        let dst = &mut out[at..at + bpl];
        if let Some(b) = &base[key] {
            dst.copy_from_slice(b);
        }
        for &g in &groups {
            let px: Vec<u32> = (g * gp..((g + 1) * gp).min(w))
                .map(|x| bar_pixel(x, y, w, h, max, n))
                .collect();
            let lo = g * gb;
            if lo < bpl {
                pack(bpp, &px, &mut dst[lo..(lo + gb).min(bpl)]);
            }
        }
    }
}

/// [`bar_pixel`] without the moving marker.
fn bar_pixel_static(x: usize, y: usize, w: usize, h: usize, max: u32) -> u32 {
    // eight vertical bars; the Bayer site selects which colour the bar lets through
    const BARS: [[u32; 3]; 8] = [
        [1, 1, 1],
        [1, 1, 0],
        [0, 1, 1],
        [0, 1, 0],
        [1, 0, 1],
        [1, 0, 0],
        [0, 0, 1],
        [0, 0, 0],
    ];
    let bar = BARS[(x * 8 / w.max(1)).min(7)];
    let site = match (y & 1, x & 1) {
        (0, 0) => 0, // R
        (1, 1) => 2, // B
        _ => 1,      // G
    };
    let level = max * (3 + (y * 5 / h.max(1)) as u32) / 8; // brighter towards the bottom
    bar[site] * level
}

fn pack_raw10(px: &[u32], out: &mut [u8]) {
    for (p, o) in px.chunks(4).zip(out.chunks_mut(5)) {
        let g = |i: usize| p.get(i).copied().unwrap_or(0) & 0x3FF;
        for i in 0..4.min(o.len()) {
            o[i] = (g(i) >> 2) as u8;
        }
        if o.len() == 5 {
            o[4] = ((g(0) & 3) | ((g(1) & 3) << 2) | ((g(2) & 3) << 4) | ((g(3) & 3) << 6)) as u8;
        }
    }
}

fn pack_raw12(px: &[u32], out: &mut [u8]) {
    for (p, o) in px.chunks(2).zip(out.chunks_mut(3)) {
        let g = |i: usize| p.get(i).copied().unwrap_or(0) & 0xFFF;
        if o.len() == 3 {
            o[0] = (g(0) >> 4) as u8;
            o[1] = (g(1) >> 4) as u8;
            o[2] = ((g(0) & 0xF) | ((g(1) & 0xF) << 4)) as u8;
        }
    }
}

/// The largest file a replay sensor takes (`file:PATH`).
pub const MAX_REPLAY: u64 = 4 << 30;

impl Sensor {
    /// Load a replay source (at most [`MAX_REPLAY`] bytes).
    pub fn replay(path: &Path, frame: usize) -> std::io::Result<Sensor> {
        // held in memory whole: bounded (a device or a pipe never ends)
        let data = rocelink_io::file::read_bounded(path, MAX_REPLAY)?;
        if data.is_empty() || frame == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "empty file or zero frame size",
            ));
        }
        Ok(Sensor::Replay {
            data: std::sync::Arc::new(data),
            frame,
        })
    }

    /// Frame size this sensor produces (`None`: whatever the window is).
    pub fn frame_len(&self) -> Option<usize> {
        match self {
            Sensor::Pattern => None,
            Sensor::Imx274(m) => Some(m.frame_len()),
            Sensor::Ultrasound { channels, samples } => Some(channels * samples * 2),
            Sensor::Replay { frame, .. } => Some(*frame),
        }
    }

    /// Write frame `n` into `out` (resized). `window` is the programmed window, used by the
    /// pattern sensor. Returns whether the frame ends with TLAST.
    pub fn frame(&self, n: u64, window: usize, out: &mut Vec<u8>) -> bool {
        match self {
            Sensor::Pattern => {
                out.clear();
                out.extend((0..window).map(|i| pattern_byte(n, i)));
                true
            }
            Sensor::Imx274(m) => {
                imx274_frame(*m, n, out);
                true
            }
            Sensor::Ultrasound { channels, samples } => {
                out.clear();
                out.reserve(channels * samples * 2);
                for c in 0..*channels {
                    let depth = 50 + (c * 37 + n as usize * 3) % ((*samples).max(1) / 2 + 1);
                    for s in 0..*samples {
                        let t = s as f64;
                        let carrier = (t * 0.7 + c as f64).sin();
                        let d = (s as f64 - depth as f64) / 12.0;
                        let echo = (-d * d).exp() * 1800.0;
                        let noise = f64::from(pattern_byte(n, c * samples + s) % 16) - 8.0;
                        let v = (2048.0 + echo * carrier + noise).clamp(0.0, 4095.0) as u16;
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                }
                true
            }
            Sensor::Replay { data, frame } => {
                let frames = data.len().div_ceil(*frame) as u64;
                let k = (n % frames) as usize;
                out.clear();
                out.extend_from_slice(&data[k * frame..((k + 1) * frame).min(data.len())]);
                true
            }
        }
    }
}

pub use rocelink_wire::pixel::{
    coe_bytes_per_line, unpack_coe_raw10, unpack_coe_raw12, unpack_raw10, unpack_raw12,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The frame packed pixel by pixel (the straightforward way).
    fn imx274_reference(m: Imx274Mode, n: u64) -> Vec<u8> {
        let (w, h, bpp) = m.geometry();
        let mut out = vec![0u8; m.frame_len()];
        out[..8].copy_from_slice(&n.to_le_bytes());
        let bpl = m.bytes_per_line();
        let max = (1u32 << bpp) - 1;
        let mut line = vec![0u32; w];
        for y in 0..h {
            for (x, p) in line.iter_mut().enumerate() {
                *p = bar_pixel(x, y, w, h, max, n);
            }
            let at = m.start_byte() + y * bpl;
            pack(bpp, &line, &mut out[at..at + bpl]);
        }
        out
    }

    #[test]
    fn imx274_frames_equal_the_pixel_by_pixel_packing() {
        let mut out = Vec::new();
        for m in [
            Imx274Mode::P1080Raw10,
            Imx274Mode::P2160Raw10,
            Imx274Mode::P2160Raw12,
        ] {
            let w = m.geometry().0 as u64;
            // marker inside, at the start, and wrapping over the right edge
            for n in [0u64, 1, 7, w / 16 - 1, w / 16, 1000] {
                imx274_frame(m, n, &mut out);
                assert!(out == imx274_reference(m, n), "{m:?} frame {n}");
            }
        }
    }

    #[test]
    fn imx274_sizes_match_hsb() {
        assert_eq!(Imx274Mode::P1080Raw10.frame_len(), 2_611_376);
        assert_eq!(Imx274Mode::P1080Raw10.start_byte(), 19_376);
        assert_eq!(Imx274Mode::P1080Raw10.bytes_per_line(), 2400);
        assert_eq!(Imx274Mode::P2160Raw10.frame_len(), 10_406_576);
        assert_eq!(Imx274Mode::P2160Raw12.bytes_per_line(), 5760);
    }

    #[test]
    fn raw10_and_raw12_round_trip() {
        let px: Vec<u32> = (0..8).map(|i| (i * 131) & 0x3FF).collect();
        let mut b = vec![0u8; 10];
        pack_raw10(&px, &mut b);
        let mut back = Vec::new();
        unpack_raw10(&b, &mut back);
        assert_eq!(back.iter().map(|&v| u32::from(v)).collect::<Vec<_>>(), px);
        let px: Vec<u32> = (0..8).map(|i| (i * 517) & 0xFFF).collect();
        let mut b = vec![0u8; 12];
        pack_raw12(&px, &mut b);
        let mut back = Vec::new();
        unpack_raw12(&b, &mut back);
        assert_eq!(back.iter().map(|&v| u32::from(v)).collect::<Vec<_>>(), px);
    }

    #[test]
    fn coe_packings_match_hsb_converter() {
        // RAW10: P0 = 0x3FF, P1 = 0x000, P2 = 0x155 -> u32 0x155003FF, little-endian.
        let mut px = Vec::new();
        unpack_coe_raw10(
            &[0xFF, 0x03, 0x50, 0x15, 0x01, 0x00, 0x00, 0x00],
            4,
            &mut px,
        );
        assert_eq!(px, [0x3FF, 0x000, 0x155, 0x001]);
        // RAW12: P0 = 0xABC, P1 = 0x123 -> BC 3A 12 (CSI order would be AB 12 3C).
        px.clear();
        unpack_coe_raw12(&[0xBC, 0x3A, 0x12, 0xBC, 0x3A, 0x12], 3, &mut px);
        assert_eq!(px, [0xABC, 0x123, 0xABC]);
        assert_eq!(coe_bytes_per_line(1920, 10), 2560);
        assert_eq!(coe_bytes_per_line(1920, 12), 2880);
        assert_eq!(coe_bytes_per_line(10, 10), 64);
    }

    #[test]
    fn frames_are_deterministic_and_sized() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for s in [
            Sensor::Pattern,
            Sensor::Imx274(Imx274Mode::P1080Raw10),
            Sensor::Ultrasound {
                channels: 8,
                samples: 512,
            },
        ] {
            s.frame(3, 5000, &mut a);
            s.frame(3, 5000, &mut b);
            assert_eq!(a, b);
            assert_eq!(a.len(), s.frame_len().unwrap_or(5000));
            s.frame(4, 5000, &mut b);
            assert_ne!(a, b, "frames differ");
        }
        let r = Sensor::Replay {
            data: std::sync::Arc::new((0..250u8).collect()),
            frame: 100,
        };
        r.frame(2, 0, &mut a);
        assert_eq!(a.len(), 50);
        r.frame(3, 0, &mut a);
        assert_eq!(a[0], 0);
    }
}
