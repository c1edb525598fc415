//! The IMX274 driver: HSB's dual-camera board has the cameras behind an output-enable
//! expander, so every camera access first enables that camera's output (as HSB's
//! `Imx274Cam` does), then writes or reads the camera at 0x1A.
//!
//! ```no_run
//! use rocelink_hsb::host::{control::Control, i2c::I2c, imx274::Camera};
//! use rocelink_hsb::sensor::Imx274Mode;
//! let mut ctl = Control::new("192.168.0.2:8192".parse().unwrap()).unwrap();
//! let mut bus = I2c::new(&mut ctl, rocelink_hsb::regs::i2c::CAM_BUS).unwrap();
//! let cam = Camera::new(0).unwrap();
//! cam.configure(&mut bus, Imx274Mode::P1080Raw10).unwrap();
//! cam.start(&mut bus).unwrap();
//! // ... frames ...
//! cam.stop(&mut bus).unwrap();
//! ```

use super::i2c::{I2c, I2cError};
use crate::imx274::{ADDRESS, START, STOP, Step, mode_table};
use crate::regs::i2c::EXPANDER_ADDRESS;
use crate::sensor::Imx274Mode;
use std::time::Duration;

/// Cameras behind the expander.
pub const MAX_CAMERAS: usize = 4;

/// One camera of the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Camera {
    index: usize,
}

impl Camera {
    /// Camera `index` (0 or 1 on HSB's dual board; the expander has four outputs).
    pub fn new(index: usize) -> Result<Camera, String> {
        if index >= MAX_CAMERAS {
            return Err(format!(
                "camera {index}: the expander has outputs for cameras 0..{MAX_CAMERAS}"
            ));
        }
        Ok(Camera { index })
    }

    /// Which camera.
    pub fn index(&self) -> usize {
        self.index
    }

    fn select(&self, bus: &mut I2c<'_>) -> Result<(), I2cError> {
        bus.transaction(EXPANDER_ADDRESS, &[1 << self.index], 0)
            .map(|_| ())
    }

    /// Write register `reg`.
    pub fn set_register(&self, bus: &mut I2c<'_>, reg: u16, value: u8) -> Result<(), I2cError> {
        self.select(bus)?;
        let [hi, lo] = reg.to_be_bytes();
        bus.transaction(ADDRESS, &[hi, lo, value], 0).map(|_| ())
    }

    /// Read register `reg`.
    pub fn register(&self, bus: &mut I2c<'_>, reg: u16) -> Result<u8, I2cError> {
        self.select(bus)?;
        let r = bus.transaction(ADDRESS, &reg.to_be_bytes(), 1)?;
        Ok(r.first().copied().unwrap_or(0))
    }

    fn run(&self, bus: &mut I2c<'_>, table: &[Step]) -> Result<(), I2cError> {
        for s in table {
            match *s {
                Step::Write(r, v) => self.set_register(bus, r, v)?,
                Step::WaitMs(ms) => std::thread::sleep(Duration::from_millis(u64::from(ms))),
            }
        }
        Ok(())
    }

    /// Put the camera in `mode` (in standby): HSB's table for it.
    pub fn configure(&self, bus: &mut I2c<'_>, mode: Imx274Mode) -> Result<(), I2cError> {
        self.run(bus, &mode_table(mode))
    }

    /// Start streaming.
    pub fn start(&self, bus: &mut I2c<'_>) -> Result<(), I2cError> {
        self.run(bus, START)
    }

    /// Stop streaming.
    pub fn stop(&self, bus: &mut I2c<'_>) -> Result<(), I2cError> {
        self.run(bus, STOP)
    }

    /// The mode the camera's registers name, if any of HSB's tables set it.
    pub fn mode(&self, bus: &mut I2c<'_>) -> Result<Option<Imx274Mode>, I2cError> {
        let mdsel = self.register(bus, crate::imx274::REG_MDSEL1)?;
        let readout = self.register(bus, crate::imx274::REG_READOUT)?;
        Ok(crate::imx274::mode_of(mdsel, readout))
    }
}
