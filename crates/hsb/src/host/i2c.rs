//! I2C through the device's sequencer, as HSB's host does it (`Hololink::I2c::
//! i2c_transaction`): for each transaction a program is written to APB RAM that clears the
//! controller, fills its data buffer, sets the byte counts and bus, starts it, polls for
//! DONE, copies the status and the read bytes into the program, and clears START; the
//! software event is pointed at the program and fired; the host then polls the copied
//! status and reads the copied bytes.
//!
//! ```no_run
//! use rocelink_hsb::host::control::Control;
//! use rocelink_hsb::host::i2c::I2c;
//! let mut ctl = Control::new("192.168.0.2:8192".parse().unwrap()).unwrap();
//! let mut bus = I2c::new(&mut ctl, rocelink_hsb::regs::i2c::CAM_BUS).unwrap();
//! bus.transaction(0x70, &[0b01], 0).unwrap(); // expander: first camera
//! let mdsel = bus.transaction(0x1A, &[0x30, 0x04], 1).unwrap();
//! ```

use super::control::{Control, EcbError};
use crate::regs::{self, apb, i2c};
use crate::sequencer::Program;
use rocelink_wire::hsb::event::bits;
use std::time::{Duration, Instant};

/// Why an I2C transaction failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum I2cError {
    /// HSB's controller takes 7-bit addresses.
    #[error("I2C address {0:#x} is not a 7-bit address (0..=0x7f)")]
    BadAddress(u8),
    /// More than the controller's buffer.
    #[error("{what} of {len} bytes is longer than the controller's {max}-byte buffer")]
    TooLong {
        /// "write" or "read".
        what: &'static str,
        /// Bytes asked for.
        len: usize,
        /// The most one transaction moves.
        max: usize,
    },
    /// Nobody acknowledged the address (no such peripheral, or it is not enabled).
    #[error("no acknowledge from I2C address {address:#04x} on bus {bus} (NAK)")]
    Nak {
        /// Bus.
        bus: u32,
        /// Peripheral address.
        address: u8,
    },
    /// The controller reported an error.
    #[error(
        "I2C controller error on bus {bus}, address {address:#04x}: status {status:#x} ({why})"
    )]
    Controller {
        /// Bus.
        bus: u32,
        /// Peripheral address.
        address: u8,
        /// Status word.
        status: u32,
        /// FSM_ERR or I2C_ERR.
        why: &'static str,
    },
    /// The program did not report DONE in time (the device runs no sequencer, or the
    /// transaction hung).
    #[error(
        "I2C transaction with {address:#04x} on bus {bus} did not finish within {waited:?} \
         (status {status:#x}); does the device run sequencer programs?"
    )]
    Timeout {
        /// Bus.
        bus: u32,
        /// Peripheral address.
        address: u8,
        /// Last status copied.
        status: u32,
        /// How long the host polled.
        waited: Duration,
    },
    /// A register access failed.
    #[error(transparent)]
    Ecb(#[from] EcbError),
}

/// Register/value pairs per WR_BLOCK: a 1472-byte request holds 183.
const BLOCK: usize = 180;

/// One I2C bus of one device.
#[derive(Debug)]
pub struct I2c<'a> {
    ctl: &'a mut Control,
    bus: u32,
    rising: u32,
    falling: u32,
    enabled: u32,
    /// Time a transaction may take (HSB: 0.5 s).
    pub timeout: Duration,
    /// Transactions run.
    pub transactions: u64,
}

impl<'a> I2c<'a> {
    /// Bus `bus` (`regs::i2c::CAM_BUS` for cameras). Reads the device's event settings once,
    /// so transactions keep other events as they are.
    pub fn new(ctl: &'a mut Control, bus: u32) -> Result<I2c<'a>, EcbError> {
        let rising = ctl.read(regs::CTRL_EVT_RISING)?;
        let falling = ctl.read(regs::CTRL_EVT_FALLING)?;
        let enabled = ctl.read(regs::APB_INTERRUPT_EN)?;
        Ok(I2c {
            ctl,
            bus,
            rising,
            falling,
            enabled,
            timeout: Duration::from_millis(500),
            transactions: 0,
        })
    }

    /// The bus.
    pub fn bus(&self) -> u32 {
        self.bus
    }

    /// Quiesce event `bit` (HSB's `clear_apb_event`).
    fn clear_event(&mut self, bit: u32, w: &mut Vec<(u32, u32)>) {
        let m = 1 << bit;
        if self.enabled & m != 0 {
            self.enabled &= !m;
            w.push((regs::APB_INTERRUPT_EN, self.enabled));
        }
        if self.rising & m != 0 {
            self.rising &= !m;
            w.push((regs::CTRL_EVT_RISING, self.rising));
        }
        if self.falling & m != 0 {
            self.falling &= !m;
            w.push((regs::CTRL_EVT_FALLING, self.falling));
        }
        w.push((regs::CTRL_EVT_CLEAR, m));
        w.push((regs::CTRL_EVT_CLEAR, 0));
    }

    /// Point event `bit` at `program`, on its rising edge (HSB's `configure_apb_event`).
    fn configure_event(&mut self, bit: u32, program: u32, w: &mut Vec<(u32, u32)>) {
        self.clear_event(bit, w);
        w.push((apb::vector(bit), program));
        self.rising |= 1 << bit;
        w.push((regs::CTRL_EVT_RISING, self.rising));
        self.enabled |= 1 << bit;
        w.push((regs::APB_INTERRUPT_EN, self.enabled));
    }

    fn write_all(&mut self, w: &[(u32, u32)]) -> Result<(), EcbError> {
        for chunk in w.chunks(BLOCK) {
            self.ctl.write_block(chunk)?;
        }
        Ok(())
    }

    /// The sequencer program of a transaction: clear, load the bytes to write, set the
    /// counts, enable the bus, start, wait for DONE, copy the status and the bytes read,
    /// clear. Returns its words and the slots the status and the read words are copied to.
    fn program(&self, address: u8, write: &[u8], read: usize) -> (Vec<u32>, usize, Vec<usize>) {
        let reg = |off: u32| i2c::BASE + off;
        let mut p = Program::new();
        p.write(reg(i2c::CONTROL), 0);
        for (i, chunk) in write.chunks(4).enumerate() {
            let mut b = [0u8; 4];
            b[..chunk.len()].copy_from_slice(chunk);
            p.write(reg(i2c::DATA) + 4 * i as u32, u32::from_le_bytes(b));
        }
        p.write(
            reg(i2c::NUM_BYTES),
            write.len() as u32 | (read as u32) << 16,
        );
        p.write(reg(i2c::BUS_EN), self.bus);
        p.write(reg(i2c::CONTROL), u32::from(address) << 16 | i2c::START);
        p.poll(reg(i2c::STATUS), i2c::DONE, i2c::DONE);
        let status_slot = p.read(reg(i2c::STATUS));
        let data_slots: Vec<usize> = (0..read.div_ceil(4))
            .map(|i| p.read(reg(i2c::DATA) + 4 * i as u32))
            .collect();
        p.write(reg(i2c::CONTROL), 0);
        (p.finish(), status_slot, data_slots)
    }

    /// Poll the status copied to `status_at` until the controller says DONE, at most the
    /// timeout.
    fn wait_done(&mut self, address: u8, status_at: u32) -> Result<u32, I2cError> {
        let start = Instant::now();
        loop {
            let s = self.ctl.read(status_at)?;
            if s & i2c::DONE != 0 {
                return Ok(s);
            }
            if start.elapsed() >= self.timeout {
                return Err(I2cError::Timeout {
                    bus: self.bus,
                    address,
                    status: s,
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Write `write` to the peripheral at `address`, then read `read` bytes from it.
    pub fn transaction(
        &mut self,
        address: u8,
        write: &[u8],
        read: usize,
    ) -> Result<Vec<u8>, I2cError> {
        if address > 0x7F {
            return Err(I2cError::BadAddress(address));
        }
        let max = i2c::BUFFER_LEN as usize;
        for (what, len) in [("write", write.len()), ("read", read)] {
            if len > max {
                return Err(I2cError::TooLong { what, len, max });
            }
        }
        let (words, status_slot, data_slots) = self.program(address, write, read);
        let at = |slot: usize| apb::SW_PROGRAM + 4 * slot as u32;
        // load it, point the software event at it
        let mut w: Vec<(u32, u32)> = words.iter().enumerate().map(|(i, &v)| (at(i), v)).collect();
        self.configure_event(bits::SW_EVENT, apb::SW_PROGRAM, &mut w);
        self.write_all(&w)?;
        // fire it (and give the device the APB timeout the host will wait)
        let mut w = Vec::new();
        self.configure_event(bits::I2C_BUSY, apb::NULL_PROGRAM, &mut w);
        w.push((regs::CTRL_EVT_SW_EVENT, 1));
        w.push((regs::CTRL_EVT_SW_EVENT, 0));
        let ticks = (self.timeout.as_secs_f64() / 51.2e-9).clamp(1.0, 0xFF_FFFF as f64);
        w.push((regs::APB_TIMEOUT, ticks as u32));
        self.write_all(&w)?;
        self.transactions += 1;
        // the copied status
        let status = self.wait_done(address, at(status_slot))?;
        let mut w = Vec::new();
        self.clear_event(bits::I2C_BUSY, &mut w);
        self.write_all(&w)?;
        check_status(self.bus, address, status)?;
        let mut out = Vec::with_capacity(data_slots.len() * 4);
        if let (Some(&first), Some(&last)) = (data_slots.first(), data_slots.last()) {
            // one block read over the span of the slots
            let span = self.ctl.read_block(at(first), (last - first + 1) as u32)?;
            for s in &data_slots {
                out.extend_from_slice(&span[s - first].to_le_bytes());
            }
        }
        out.truncate(read);
        Ok(out)
    }
}
/// The error a finished transaction's `status` says, if any.
fn check_status(bus: u32, address: u8, status: u32) -> Result<(), I2cError> {
    let fail = |why| I2cError::Controller {
        bus,
        address,
        status,
        why,
    };
    if status & i2c::FSM_ERR != 0 {
        return Err(fail("FSM_ERR"));
    }
    if status & i2c::I2C_ERR != 0 {
        return Err(fail("I2C_ERR"));
    }
    if status & i2c::NAK != 0 {
        return Err(I2cError::Nak { bus, address });
    }
    Ok(())
}
