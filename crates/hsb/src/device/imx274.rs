//! An IMX274 on I2C: a register file (16-bit addresses, 8-bit values, writes that
//! auto-increment) that streams the frames of its mode while out of standby.
//!
//! The model recognises a mode the way HSB's tables set one (MDSEL1 at 0x3004 with the
//! readout register 0x30E2, [`crate::imx274::mode_of`]); a camera left in its power-on
//! state, or configured with a combination no table writes, streams nothing even out of
//! standby, so a host that skips the mode table sees no frames, as on the board.

use crate::imx274::{REG_MDSEL1, REG_READOUT, REG_STANDBY, mode_of};
use crate::sensor::Imx274Mode;

pub use crate::imx274::ADDRESS;

/// Registers the model keeps: 0x3000..0x4000.
const FIRST: u16 = 0x3000;
const LEN: usize = 0x1000;

/// One camera.
#[derive(Debug, Clone)]
pub struct Imx274 {
    regs: Box<[u8; LEN]>,
    /// Register writes taken.
    pub writes: u64,
}

impl Default for Imx274 {
    fn default() -> Self {
        Imx274::new()
    }
}

impl Imx274 {
    /// A camera at power-on: standby, no mode.
    pub fn new() -> Imx274 {
        let mut regs = Box::new([0u8; LEN]);
        regs[usize::from(REG_STANDBY - FIRST)] = 0x12;
        // a power-on readout setting none of HSB's tables uses
        regs[usize::from(REG_MDSEL1 - FIRST)] = 0xFF;
        regs[usize::from(REG_READOUT - FIRST)] = 0xFF;
        Imx274 { regs, writes: 0 }
    }

    /// Register `r` (0 outside the model's range).
    pub fn register(&self, r: u16) -> u8 {
        r.checked_sub(FIRST)
            .and_then(|i| self.regs.get(usize::from(i)))
            .copied()
            .unwrap_or(0)
    }

    /// An I2C transaction addressed to the camera: `[reg_hi, reg_lo, values…]` writes from
    /// `reg` on; then `read` bytes from `reg` on.
    pub fn transact(&mut self, write: &[u8], read: usize) -> Vec<u8> {
        let Some((hi_lo, values)) = write.split_first_chunk::<2>() else {
            return vec![0; read];
        };
        let reg = u16::from_be_bytes(*hi_lo);
        for (i, v) in values.iter().enumerate() {
            let r = reg.wrapping_add(i as u16);
            if let Some(slot) = r
                .checked_sub(FIRST)
                .and_then(|i| self.regs.get_mut(usize::from(i)))
            {
                *slot = *v;
                self.writes += 1;
            }
        }
        (0..read)
            .map(|i| self.register(reg.wrapping_add(i as u16)))
            .collect()
    }

    /// The configured mode, if HSB's tables configured one.
    pub fn mode(&self) -> Option<Imx274Mode> {
        mode_of(self.register(REG_MDSEL1), self.register(REG_READOUT))
    }

    /// The mode it streams in: out of standby and configured.
    pub fn streaming(&self) -> Option<Imx274Mode> {
        (self.register(REG_STANDBY) == 0)
            .then(|| self.mode())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imx274::{START, STOP, Step, mode_table};

    fn apply(cam: &mut Imx274, table: &[Step]) {
        for s in table {
            if let Step::Write(r, v) = *s {
                let [hi, lo] = r.to_be_bytes();
                cam.transact(&[hi, lo, v], 0);
            }
        }
    }

    #[test]
    fn streams_its_mode_only_after_the_tables() {
        let mut cam = Imx274::new();
        assert_eq!(cam.streaming(), None);
        apply(&mut cam, START);
        assert_eq!(cam.streaming(), None, "out of standby but never configured");
        for m in [
            Imx274Mode::P1080Raw10,
            Imx274Mode::P2160Raw12,
            Imx274Mode::P2160Raw10,
        ] {
            apply(&mut cam, &mode_table(m));
            assert_eq!((cam.mode(), cam.streaming()), (Some(m), None));
            apply(&mut cam, START);
            assert_eq!(cam.streaming(), Some(m));
            apply(&mut cam, STOP);
            assert_eq!(cam.streaming(), None);
        }
    }

    #[test]
    fn writes_auto_increment_and_reads_follow() {
        let mut cam = Imx274::new();
        cam.transact(&[0x30, 0x0A, 0x12, 0x34, 0x56], 0);
        assert_eq!(cam.transact(&[0x30, 0x0A], 3), vec![0x12, 0x34, 0x56]);
        // outside the model's range: ignored, reads 0
        cam.transact(&[0x10, 0x00, 0x77], 0);
        assert_eq!(cam.transact(&[0x10, 0x00], 1), vec![0]);
        assert_eq!(cam.writes, 3);
    }
}
