//! Async event messages a device sends from UDP 8432 when an enabled event fires.

use crate::bytes::{be_u32, be_u64};
use crate::{Error, Result};

/// Message length.
pub const MESSAGE_LEN: usize = 18;

/// Event bit numbers.
pub mod bits {
    /// I2C controller busy.
    pub const I2C_BUSY: u32 = 0;
    /// Software event.
    pub const SW_EVENT: u32 = 2;
    /// Sensor interface 0 frame end.
    pub const SIF_0_FRAME_END: u32 = 16;
    /// Sensor interface 1 frame end.
    pub const SIF_1_FRAME_END: u32 = 17;
    /// GPIO 0.
    pub const GPIO0: u32 = 18;
    /// GPIO 1.
    pub const GPIO1: u32 = 19;
    /// Sensor interface 0 frame start.
    pub const SIF_0_FRAME_START: u32 = 20;
    /// Sensor interface 1 frame start.
    pub const SIF_1_FRAME_START: u32 = 21;
}

/// An async event message: `active u32, state u32, seconds u48, ns u32`, big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventRepr {
    /// Events that fired (bit per event).
    pub interrupt_active: u32,
    /// Current level of every event input.
    pub interrupt_state: u32,
    /// PTP seconds (48 bits on the wire).
    pub seconds: u64,
    /// PTP nanoseconds.
    pub nanoseconds: u32,
}

impl EventRepr {
    /// Parse the first 18 bytes.
    pub fn parse(b: &[u8]) -> Result<EventRepr> {
        if b.len() < MESSAGE_LEN {
            return Err(Error::Truncated);
        }
        Ok(EventRepr {
            interrupt_active: be_u32(&b[0..4]),
            interrupt_state: be_u32(&b[4..8]),
            seconds: be_u64(&[0, 0, b[8], b[9], b[10], b[11], b[12], b[13]]),
            nanoseconds: be_u32(&b[14..18]),
        })
    }

    /// Write 18 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.interrupt_active.to_be_bytes());
        b[4..8].copy_from_slice(&self.interrupt_state.to_be_bytes());
        b[8..14].copy_from_slice(&self.seconds.to_be_bytes()[2..]);
        b[14..18].copy_from_slice(&self.nanoseconds.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let e = EventRepr {
            interrupt_active: 1 << bits::SIF_0_FRAME_END,
            interrupt_state: 0x3,
            seconds: 0x0102_0304,
            nanoseconds: 7,
        };
        let mut b = [0xA5u8; 18];
        e.emit(&mut b);
        assert_eq!(b, [0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 1, 2, 3, 4, 0, 0, 0, 7]);
        assert_eq!(EventRepr::parse(&b).unwrap(), e);
        assert_eq!(EventRepr::parse(&b[..17]), Err(Error::Truncated));
    }
}
