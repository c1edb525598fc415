//! The device's I2C controller (`regs::I2C_CTRL`) and what hangs off its buses: HSB's
//! dual-IMX274 board has an output-enable expander at 0x70 on the camera bus in front of
//! two IMX274s at 0x1A, so one address reaches whichever camera the expander enables.
//!
//! A transaction runs when the host (or a sequencer program) sets START in the control
//! register: `num_bytes` write bytes from the data buffer go out, then `num_bytes >> 16`
//! bytes are read back into the data buffer from offset 0 (little-endian in each word, as
//! HSB's host packs and unpacks them); status becomes DONE, with NAK when nobody answered
//! the address. There is no clock here: a transaction completes within the write that
//! started it.

use super::imx274::Imx274;
use crate::regs::i2c;

pub use crate::regs::i2c::EXPANDER_ADDRESS;

/// The controller's registers and the peripherals on its buses.
#[derive(Debug, Clone)]
pub struct I2cController {
    control: u32,
    bus_en: u32,
    num_bytes: u32,
    clk_cnt: u32,
    status: u32,
    buffer: [u8; i2c::BUFFER_LEN as usize],
    /// Output enables of the expander (bit `i`: camera `i`).
    expander: u8,
    /// Cameras behind the expander on the camera bus.
    pub cameras: Vec<Imx274>,
    /// Transactions run.
    pub transactions: u64,
    /// Transactions nobody acknowledged.
    pub naks: u64,
}

impl I2cController {
    /// A controller with `cameras` IMX274s behind the expander (0: an empty camera bus).
    pub fn new(cameras: usize) -> I2cController {
        I2cController {
            control: 0,
            bus_en: 0,
            num_bytes: 0,
            clk_cnt: 0,
            status: 0,
            buffer: [0; i2c::BUFFER_LEN as usize],
            expander: 0,
            cameras: (0..cameras).map(|_| Imx274::new()).collect(),
            transactions: 0,
            naks: 0,
        }
    }

    /// Whether `off` (from the controller's base) is one of its registers.
    pub fn decodes(off: u32) -> bool {
        matches!(
            off,
            i2c::CONTROL | i2c::BUS_EN | i2c::NUM_BYTES | i2c::CLK_CNT | i2c::STATUS
        ) || (i2c::DATA..i2c::DATA + i2c::BUFFER_LEN).contains(&off)
    }

    /// Read register `off`.
    pub fn read(&self, off: u32) -> u32 {
        match off {
            i2c::CONTROL => self.control,
            i2c::BUS_EN => self.bus_en,
            i2c::NUM_BYTES => self.num_bytes,
            i2c::CLK_CNT => self.clk_cnt,
            i2c::STATUS => self.status,
            o if (i2c::DATA..i2c::DATA + i2c::BUFFER_LEN).contains(&o) => {
                let i = ((o - i2c::DATA) & !3) as usize;
                u32::from_le_bytes([
                    self.buffer[i],
                    self.buffer[i + 1],
                    self.buffer[i + 2],
                    self.buffer[i + 3],
                ])
            }
            _ => 0,
        }
    }

    /// Write register `off`; setting START runs the transaction.
    pub fn write(&mut self, off: u32, v: u32) {
        match off {
            i2c::CONTROL => {
                let was = self.control & i2c::START != 0;
                self.control = v;
                if v & i2c::START == 0 {
                    self.status = 0; // clearing START lowers DONE
                } else if !was {
                    self.status = self.transact();
                }
            }
            i2c::BUS_EN => self.bus_en = v,
            i2c::NUM_BYTES => self.num_bytes = v,
            i2c::CLK_CNT => self.clk_cnt = v,
            o if (i2c::DATA..i2c::DATA + i2c::BUFFER_LEN).contains(&o) => {
                let i = ((o - i2c::DATA) & !3) as usize;
                self.buffer[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {}
        }
    }

    fn transact(&mut self) -> u32 {
        self.transactions += 1;
        let wn = (self.num_bytes & 0x1FF) as usize;
        let rn = ((self.num_bytes >> 16) & 0x1FF) as usize;
        if wn > self.buffer.len() || rn > self.buffer.len() || self.control & i2c::TEN_BIT != 0 {
            return i2c::DONE | i2c::FSM_ERR;
        }
        let addr = ((self.control >> 16) & 0x7F) as u8;
        let write = self.buffer[..wn].to_vec();
        let got = self.peripheral(addr, &write, rn);
        match got {
            Some(r) => {
                // read bytes replace whole buffer words (as HSB's mock controller writes
                // them): what the write left past the last read byte is cleared
                let end = r.len().next_multiple_of(4).min(self.buffer.len());
                self.buffer[..end].fill(0);
                self.buffer[..r.len()].copy_from_slice(&r);
                i2c::DONE
            }
            None => {
                self.naks += 1;
                i2c::DONE | i2c::NAK
            }
        }
    }

    /// One transaction on the enabled bus; `None`: no acknowledge.
    fn peripheral(&mut self, addr: u8, write: &[u8], read: usize) -> Option<Vec<u8>> {
        if self.bus_en != i2c::CAM_BUS || self.cameras.is_empty() {
            return None;
        }
        if addr == EXPANDER_ADDRESS {
            if let Some(&b) = write.last() {
                self.expander = b;
            }
            return Some(vec![self.expander; read]);
        }
        if addr != super::imx274::ADDRESS {
            return None;
        }
        let mut answer = None;
        for (i, cam) in self.cameras.iter_mut().enumerate() {
            if self.expander & (1 << i) != 0 {
                // with several outputs enabled, every camera takes the write; the first
                // drives the read
                let r = cam.transact(write, read);
                answer = answer.or(Some(r));
            }
        }
        answer
    }

    /// Back to the reset state (cameras powered down too).
    pub fn reset(&mut self) {
        *self = I2cController::new(self.cameras.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(c: &mut I2cController, addr: u8, write: &[u8], read: usize) -> (u32, Vec<u8>) {
        c.write(i2c::CONTROL, 0);
        for (i, chunk) in write.chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            c.write(i2c::DATA + 4 * i as u32, u32::from_le_bytes(w));
        }
        c.write(i2c::NUM_BYTES, write.len() as u32 | (read as u32) << 16);
        c.write(i2c::BUS_EN, i2c::CAM_BUS);
        c.write(i2c::CONTROL, u32::from(addr) << 16 | i2c::START);
        let st = c.read(i2c::STATUS);
        let data = (0..read)
            .map(|i| c.read(i2c::DATA + (i as u32 & !3)).to_le_bytes()[i % 4])
            .collect();
        c.write(i2c::CONTROL, 0);
        (st, data)
    }

    #[test]
    fn the_expander_picks_the_camera() {
        let mut c = I2cController::new(2);
        // nothing enabled: the camera address is not acknowledged
        assert_eq!(
            start(&mut c, 0x1A, &[0x30, 0x00], 1).0,
            i2c::DONE | i2c::NAK
        );
        assert_eq!(start(&mut c, EXPANDER_ADDRESS, &[0b10], 0).0, i2c::DONE);
        assert_eq!(start(&mut c, 0x1A, &[0x30, 0x04, 0x02], 0).0, i2c::DONE);
        assert_eq!(c.cameras[1].register(0x3004), 0x02);
        assert_ne!(c.cameras[0].register(0x3004), 0x02);
        let (st, v) = start(&mut c, 0x1A, &[0x30, 0x04], 1);
        assert_eq!((st, v), (i2c::DONE, vec![0x02]));
        assert_eq!(
            c.read(i2c::DATA),
            0x02,
            "the rest of the read word is cleared"
        );
        // another address, another bus, a too-long count
        assert_eq!(start(&mut c, 0x36, &[0], 0).0, i2c::DONE | i2c::NAK);
        c.write(i2c::BUS_EN, 0);
        c.write(i2c::CONTROL, 0x1A << 16 | i2c::START);
        assert_eq!(c.read(i2c::STATUS), i2c::DONE | i2c::NAK);
        c.write(i2c::CONTROL, 0);
        assert_eq!(c.read(i2c::STATUS), 0, "clearing START lowers DONE");
        c.write(i2c::NUM_BYTES, 0x1FF);
        c.write(i2c::CONTROL, 0x1A << 16 | i2c::START);
        assert_eq!(c.read(i2c::STATUS), i2c::DONE | i2c::FSM_ERR);
        assert_eq!(c.naks, 3);
    }

    #[test]
    fn an_empty_board_acknowledges_nothing() {
        let mut c = I2cController::new(0);
        assert_eq!(
            start(&mut c, EXPANDER_ADDRESS, &[1], 0).0,
            i2c::DONE | i2c::NAK
        );
    }
}
