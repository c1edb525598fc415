//! The device's APB side: sequencer programs run against its registers, and where the
//! I2C controller's registers are.

use super::{DeviceCore, i2c};
use crate::{regs, sequencer};

impl DeviceCore {
    /// Run the queued sequencer programs (not from inside one: a program that fires an
    /// event queues it for after itself). At most 64 per call, so programs that fire each
    /// other cannot hang the device.
    pub(super) fn run_programs(&mut self) {
        if self.running {
            return;
        }
        self.running = true;
        for _ in 0..64 {
            let Some(at) = self.programs.pop_front() else {
                break;
            };
            let end = regs::APB_RAM + regs::APB_RAM_LEN;
            match sequencer::run(&mut Apb(self), at, end) {
                Ok(_) => self.stats.programs += 1,
                Err(_) => self.stats.program_errors += 1,
            }
        }
        self.programs.clear();
        self.running = false;
    }
}

/// The offset of `addr` in the I2C controller's block, if it is one of its registers.
pub(super) fn i2c_offset(addr: u32) -> Option<u32> {
    let off = addr.checked_sub(regs::i2c::BASE)?;
    i2c::I2cController::decodes(off).then_some(off)
}

/// The device's registers as the sequencer sees them.
struct Apb<'a>(&'a mut DeviceCore);

impl sequencer::Bus for Apb<'_> {
    fn read(&mut self, addr: u32) -> u32 {
        self.0.read(addr).unwrap_or(0)
    }
    fn write(&mut self, addr: u32, value: u32) {
        self.0.write(addr, value);
    }
}
