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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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

    /// `samples` × `channels` in 4096-byte messages, if such a shot can be sent.
    pub fn checked(samples: u32, channels: u16) -> Result<Geometry, Error> {
        let g = Geometry::new(samples, channels);
        g.check().map(|()| g)
    }

    /// Why this geometry cannot be sent, if so.
    pub fn check(&self) -> Result<(), Error> {
        if self.samples == 0 || self.channels == 0 || !self.channels.is_multiple_of(2) {
            return Err(Error::Shape {
                samples: self.samples,
                channels: self.channels,
            });
        }
        let m = self.message_bytes;
        if !(64..=4096).contains(&m) || !m.is_multiple_of(64) {
            return Err(Error::MessageSize(m));
        }
        if self.messages_u64() > u64::from(MAX_MESSAGES) {
            return Err(Error::TooManyMessages {
                bytes: self.bytes(),
                messages: self.messages_u64(),
                message: m,
                max: MAX_MESSAGES,
            });
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
/// shot, over a baseline of 2048 with a few counts of noise.
///
/// The noise of a row is a run of a per-seed table starting where a hash of (shot, row)
/// says, kept packed as well, so a row without a pulse is one copy and a probe generates
/// far faster than a link carries.
#[derive(Debug, Clone)]
pub struct Echoes {
    seed: u64,
    pulse: Vec<i16>,
    /// Noise, one value 0..16 per sample.
    noise: Vec<u8>,
    /// The same samples (2040 + noise), packed RAW12.
    packed: Vec<u8>,
}

/// What the messages of one shot share while a sender writes them ([`Echoes::fill_with`]):
/// its echo delays and a row buffer, reused from shot to shot.
#[derive(Debug, Clone, Default)]
pub struct ShotWork {
    /// The generator's seed, the shot and its channels the delays are of.
    key: Option<(u64, u64, u16)>,
    delays: Vec<u32>,
    /// The rows any pulse touches.
    rows: core::ops::Range<u32>,
    row: Vec<u8>,
}

/// A shot's channel delays and the rows its pulses touch.
type Delays<'a> = (&'a [u32], &'a core::ops::Range<u32>);

/// Where a row's noise may start in the table (pairs of samples).
const NOISE_STARTS: usize = 4096;
/// The most pairs in a row (65 534 channels).
const MAX_PAIRS: usize = 1 << 15;
/// Length of the pulse in samples.
const PULSE_LEN: u32 = 64;

fn pack(a: u16, z: u16, b: &mut [u8]) {
    b[0] = (a >> 4) as u8;
    b[1] = (z >> 4) as u8;
    b[2] = (a & 0xF) as u8 | ((z & 0xF) << 4) as u8;
}

impl Echoes {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Echoes {
        let n = PULSE_LEN;
        let pulse = (0..n)
            .map(|i| {
                let x = f64::from(i) / f64::from(n);
                let window = (std::f64::consts::PI * x).sin().powi(2);
                (1500.0 * window * (2.0 * std::f64::consts::PI * 6.0 * x).sin()).round() as i16
            })
            .collect();
        let pairs = NOISE_STARTS + MAX_PAIRS;
        let noise: Vec<u8> = (0..2 * pairs)
            .map(|i| {
                let h = mix(seed ^ 0x6E6F_6973_6500_0000 ^ (i as u64 / 16));
                ((h >> (4 * (i % 16))) & 15) as u8
            })
            .collect();
        let mut packed = vec![0u8; 3 * pairs];
        for (p, b) in packed.chunks_exact_mut(3).enumerate() {
            let (a, z) = (noise[2 * p], noise[2 * p + 1]);
            pack(2040 + u16::from(a), 2040 + u16::from(z), b);
        }
        Echoes {
            seed,
            pulse,
            noise,
            packed,
        }
    }

    /// Sample value of channel `c` at time `t` of shot `shot` (12 bits).
    pub fn sample(&self, shot: u64, t: u32, c: u16, channels: u16) -> u16 {
        let n = self.noise[2 * self.row_start(shot, t) + usize::from(c)];
        let v = 2040 + i32::from(n);
        let d = self.delay(shot, c, channels);
        self.with_pulse(t, d, v)
    }

    fn with_pulse(&self, t: u32, d: u32, v: i32) -> u16 {
        let p = t
            .checked_sub(d)
            .and_then(|i| self.pulse.get(i as usize))
            .map_or(0, |&p| i32::from(p));
        (v + p).clamp(0, 4095) as u16
    }

    fn depth(&self, shot: u64) -> u32 {
        // a reflector at a depth that wanders with the shot
        200 + (mix(self.seed ^ shot) % 400) as u32
    }

    fn delay(&self, shot: u64, c: u16, channels: u16) -> u32 {
        self.depth(shot) + curve(c, channels)
    }

    /// The pair of the noise table row `t` of shot `shot` starts at.
    fn row_start(&self, shot: u64, t: u32) -> usize {
        let h = mix(self.seed ^ shot.rotate_left(17) ^ (u64::from(t) << 16));
        (h % NOISE_STARTS as u64) as usize
    }

    /// Every channel's echo delay in shot `shot` into `d`; the rows any pulse touches.
    fn delays_into(&self, g: &Geometry, shot: u64, d: &mut Vec<u32>) -> core::ops::Range<u32> {
        let depth = self.depth(shot);
        d.clear();
        d.extend((0..g.channels).map(|c| depth + curve(c, g.channels)));
        let last = d.iter().copied().max().unwrap_or(depth);
        depth..last + PULSE_LEN
    }

    /// Write the bytes `range` of shot `shot` into `out` (`range.len()` bytes).
    pub fn fill(&self, g: &Geometry, shot: u64, range: core::ops::Range<usize>, out: &mut [u8]) {
        self.fill_with(g, shot, range, out, &mut ShotWork::default());
    }

    /// As [`Echoes::fill`], keeping in `work` what the shot's messages share (its echo
    /// delays, a row buffer): a sender writing a shot message by message computes them once
    /// per shot and allocates nothing per message.
    pub fn fill_with(
        &self,
        g: &Geometry,
        shot: u64,
        range: core::ops::Range<usize>,
        out: &mut [u8],
        work: &mut ShotWork,
    ) {
        let row = g.row_bytes();
        let key = (self.seed, shot, g.channels);
        if work.key != Some(key) {
            work.rows = self.delays_into(g, shot, &mut work.delays);
            work.key = Some(key);
        }
        work.row.resize(row, 0);
        let mut at = range.start;
        let mut o = 0;
        while at < range.end {
            let t = (at / row) as u32;
            let from = at % row;
            let n = (row - from).min(range.end - at);
            if from == 0 && n == row {
                self.row(shot, t, (&work.delays, &work.rows), &mut out[o..o + n]);
            } else {
                self.row(shot, t, (&work.delays, &work.rows), &mut work.row);
                out[o..o + n].copy_from_slice(&work.row[from..from + n]);
            }
            at += n;
            o += n;
        }
    }

    /// Row `t` of shot `shot`, packed RAW12: the noise copied, the pulses added.
    fn row(&self, shot: u64, t: u32, delays: Delays<'_>, out: &mut [u8]) {
        let start = self.row_start(shot, t);
        out.copy_from_slice(&self.packed[3 * start..3 * start + out.len()]);
        if !delays.1.contains(&t) {
            return;
        }
        let noise = &self.noise[2 * start..];
        for (pair, b) in out.chunks_exact_mut(3).enumerate() {
            let c = pair * 2;
            let (da, dz) = (delays.0[c], delays.0[c + 1]);
            if t.wrapping_sub(da) >= PULSE_LEN && t.wrapping_sub(dz) >= PULSE_LEN {
                continue;
            }
            let a = self.with_pulse(t, da, 2040 + i32::from(noise[c]));
            let z = self.with_pulse(t, dz, 2040 + i32::from(noise[c + 1]));
            pack(a, z, b);
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
        let mut d = Vec::new();
        let rows = self.delays_into(g, shot, &mut d);
        let mut buf = vec![0u8; row];
        for t in 0..g.samples {
            self.row(shot, t, (&d, &rows), &mut buf);
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

/// The hyperbola's curvature: extra delay of channel `c` off the array's centre.
fn curve(c: u16, channels: u16) -> u32 {
    let off = (i64::from(c) - i64::from(channels / 2)).unsigned_abs();
    (off * off / 64) as u32
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
    fn work_kept_between_messages_changes_no_byte() {
        // one ShotWork through shots, generators and shapes in turn, as a sender keeps it:
        // every message equals the same bytes of the whole shot
        let (e1, e2) = (Echoes::new(1), Echoes::new(2));
        let mut work = ShotWork::default();
        for (e, g, shot) in [
            (&e1, Geometry::new(700, 8), 5),
            (&e1, Geometry::new(700, 8), 6),
            (&e2, Geometry::new(700, 8), 6),
            (&e2, Geometry::new(300, 96), 6),
            (&e1, Geometry::new(700, 8), 5),
        ] {
            let whole = e.shot(&g, shot);
            for i in 0..g.messages() {
                let r = g.message_range(i);
                let mut m = vec![0u8; r.len()];
                e.fill_with(&g, shot, r.clone(), &mut m, &mut work);
                assert_eq!(m, whole[r], "shot {shot}, message {i}");
            }
            // a piece that starts and ends inside rows
            let mut piece = vec![0u8; 1000];
            e.fill_with(&g, shot, 77..1077, &mut piece, &mut work);
            assert_eq!(piece, whole[77..1077]);
        }
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
