//! A shot's shape and its synthetic echoes.
//!
//! A shot is `samples` rows of `channels` 12-bit ADC samples, each row packed as CSI-2
//! RAW12 (two samples in three bytes: high bytes first, then both low nibbles), so a shot
//! is `samples × channels × 1.5` bytes — the probe's 96 channels at 40 MSPS make the
//! paper's 46 Gbit/s per link. It travels as messages of `message_bytes` (4096 by default,
//! the largest UD message), the last one shorter.

use crate::Error;
use rocelink_wire::ultrasound::imm::MAX_MESSAGES;

/// The shape of a shot and of its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Samples per channel (N_s).
    pub samples: u32,
    /// Channels (even: two samples pack into three bytes).
    pub channels: u16,
    /// Payload bytes of every message but the last (64 to 4096, a multiple of 64).
    pub message_bytes: u32,
}

impl Geometry {
    /// `samples` × `channels` in 4096-byte messages.
    pub const fn new(samples: u32, channels: u16) -> Geometry {
        Geometry {
            samples,
            channels,
            message_bytes: 4096,
        }
    }

    /// Why this geometry cannot be sent, if so.
    pub fn check(&self) -> Result<(), Error> {
        if self.samples == 0 || self.channels == 0 || !self.channels.is_multiple_of(2) {
            return Err(Error::Config(format!(
                "shot of {} samples x {} channels: both must be at least 1 and channels even (two 12-bit samples pack into 3 bytes)",
                self.samples, self.channels
            )));
        }
        let m = self.message_bytes;
        if !(64..=4096).contains(&m) || !m.is_multiple_of(64) {
            return Err(Error::Config(format!(
                "message size {m}: must be 64 to 4096 bytes in steps of 64"
            )));
        }
        if self.messages_u64() > u64::from(MAX_MESSAGES) {
            return Err(Error::Config(format!(
                "a shot of {} bytes needs {} messages of {m} bytes; at most {MAX_MESSAGES}",
                self.bytes(),
                self.messages_u64()
            )));
        }
        Ok(())
    }

    /// Bytes of one row (one sample of every channel).
    pub const fn row_bytes(&self) -> usize {
        self.channels as usize * 3 / 2
    }

    /// Bytes of a shot.
    pub const fn bytes(&self) -> usize {
        self.samples as usize * self.row_bytes()
    }

    fn messages_u64(&self) -> u64 {
        (self.bytes() as u64).div_ceil(u64::from(self.message_bytes.max(1)))
    }

    /// Messages of a shot.
    pub fn messages(&self) -> u32 {
        self.messages_u64() as u32
    }

    /// Byte range of message `index` inside the shot.
    pub fn message_range(&self, index: u32) -> core::ops::Range<usize> {
        let m = self.message_bytes as usize;
        let start = (index as usize * m).min(self.bytes());
        start..(start + m).min(self.bytes())
    }

    /// Bytes a shot occupies in a receive buffer: whole messages, so any message fits the
    /// slot of any other.
    pub fn stride(&self) -> usize {
        self.messages() as usize * self.message_bytes as usize
    }
}

/// Synthetic echoes, deterministic from a seed and the shot number, so a receiver can
/// check every byte: per channel, a pulse (a windowed sine, 2048 ± 1500) returning at a
/// delay that grows with the channel's distance from the array's centre and moves with the
/// shot, over a baseline of 2048 with a few counts of hashed noise.
#[derive(Debug, Clone)]
pub struct Echoes {
    seed: u64,
    pulse: Vec<i16>,
}

impl Echoes {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Echoes {
        let n = 64;
        let pulse = (0..n)
            .map(|i| {
                let x = i as f64 / n as f64;
                let window = (std::f64::consts::PI * x).sin().powi(2);
                (1500.0 * window * (2.0 * std::f64::consts::PI * 6.0 * x).sin()).round() as i16
            })
            .collect();
        Echoes { seed, pulse }
    }

    /// Sample value of channel `c` at time `t` of shot `shot` (12 bits).
    pub fn sample(&self, shot: u64, t: u32, c: u16, channels: u16) -> u16 {
        let mut v = 2048 + self.noise(shot, t, c);
        let d = self.delay(shot, c, channels);
        if let Some(&p) = t.checked_sub(d).and_then(|i| self.pulse.get(i as usize)) {
            v += i32::from(p);
        }
        v.clamp(0, 4095) as u16
    }

    fn delay(&self, shot: u64, c: u16, channels: u16) -> u32 {
        let mid = i64::from(channels / 2);
        let off = (i64::from(c) - mid).unsigned_abs();
        // a reflector at a depth that wanders with the shot; the hyperbola's curvature
        let depth = 200 + (mix(self.seed ^ shot) % 400) as u32;
        depth + (off * off / 64) as u32
    }

    fn noise(&self, shot: u64, t: u32, c: u16) -> i32 {
        let h = mix(self.seed ^ shot.rotate_left(17) ^ (u64::from(t) << 16) ^ u64::from(c));
        (h & 15) as i32 - 8
    }

    /// Write the bytes `range` of shot `shot` into `out` (`range.len()` bytes).
    pub fn fill(&self, g: &Geometry, shot: u64, range: core::ops::Range<usize>, out: &mut [u8]) {
        let row = g.row_bytes();
        let mut at = range.start;
        let mut o = 0;
        let mut buf = vec![0u8; row];
        while at < range.end {
            let t = (at / row) as u32;
            self.row(g, shot, t, &mut buf);
            let from = at % row;
            let n = (row - from).min(range.end - at);
            out[o..o + n].copy_from_slice(&buf[from..from + n]);
            at += n;
            o += n;
        }
    }

    /// Row `t` of shot `shot`, packed RAW12.
    fn row(&self, g: &Geometry, shot: u64, t: u32, out: &mut [u8]) {
        for (pair, b) in out.chunks_exact_mut(3).enumerate() {
            let c = pair as u16 * 2;
            let a = self.sample(shot, t, c, g.channels);
            let z = self.sample(shot, t, c + 1, g.channels);
            b[0] = (a >> 4) as u8;
            b[1] = (z >> 4) as u8;
            b[2] = (a & 0xF) as u8 | ((z & 0xF) << 4) as u8;
        }
    }

    /// The whole shot.
    pub fn shot(&self, g: &Geometry, shot: u64) -> Vec<u8> {
        let mut v = vec![0u8; g.bytes()];
        self.fill(g, shot, 0..g.bytes(), &mut v);
        v
    }

    /// The first byte offset where `data` differs from shot `shot`, if any (a shorter
    /// `data` differs at its end).
    pub fn first_difference(&self, g: &Geometry, shot: u64, data: &[u8]) -> Option<usize> {
        let row = g.row_bytes();
        let mut buf = vec![0u8; row];
        for t in 0..g.samples {
            self.row(g, shot, t, &mut buf);
            let at = t as usize * row;
            let got = data.get(at..at + row);
            if got != Some(&buf[..]) {
                let got = data.get(at..).unwrap_or(&[]);
                let i = buf.iter().zip(got).take_while(|(a, b)| a == b).count();
                return Some(at + i);
            }
        }
        (data.len() != g.bytes()).then_some(g.bytes().min(data.len()))
    }
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_wire::pixel::unpack_raw12;

    #[test]
    fn sizes_of_the_papers_shots() {
        // one link of the paper's probe: 96 channels
        let g = Geometry::new(4000, 96);
        assert_eq!(
            (g.row_bytes(), g.bytes(), g.messages()),
            (144, 576_000, 141)
        );
        assert_eq!(g.message_range(140), 573_440..576_000);
        assert_eq!(g.stride(), 141 * 4096);
        assert!(g.check().is_ok());
        for bad in [
            Geometry::new(0, 96),
            Geometry::new(10, 95),
            Geometry {
                message_bytes: 100,
                ..g
            },
            Geometry::new(3_000_000, 96), // 432 MB: over 65536 messages
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn echoes_are_12_bit_raw12_deterministic_and_differ_per_shot() {
        let g = Geometry::new(700, 8);
        let e = Echoes::new(1);
        let a = e.shot(&g, 5);
        assert_eq!(a, Echoes::new(1).shot(&g, 5));
        assert_ne!(a, e.shot(&g, 6));
        assert_ne!(a, Echoes::new(2).shot(&g, 5));
        // unpacked, every value is the model's, and the pulse is there
        let mut v = Vec::new();
        unpack_raw12(&a, &mut v);
        assert_eq!(v.len(), 700 * 8);
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(x, e.sample(5, (i / 8) as u32, (i % 8) as u16, 8));
        }
        assert!(v.iter().any(|&x| x > 3000) && v.iter().any(|&x| x < 1000));
        // a piece equals the same bytes of the whole, across row boundaries
        let mut piece = vec![0u8; 1000];
        e.fill(&g, 5, 100..1100, &mut piece);
        assert_eq!(piece, a[100..1100]);
    }

    #[test]
    fn first_difference_finds_the_byte() {
        let g = Geometry::new(100, 4);
        let e = Echoes::new(3);
        let mut a = e.shot(&g, 9);
        assert_eq!(e.first_difference(&g, 9, &a), None);
        a[257] ^= 1;
        assert_eq!(e.first_difference(&g, 9, &a), Some(257));
        assert_eq!(e.first_difference(&g, 9, &a[..50]), Some(50));
    }
}
