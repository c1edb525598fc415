//! The Sony IMX274 on HSB's camera board, as HSB's host programs it: 7-bit I2C address
//! 0x1A behind an output-enable expander at 0x70 (bit 0: first camera, bit 1: second);
//! 16-bit register addresses sent big-endian, 8-bit values; three modes, each a table of
//! register writes and waits, then the start table; the stop table ends streaming.
//! The tables are HSB 2.7's (`python/hololink/sensors/imx274/imx274_mode.py`).
//!
//! ```
//! use rocelink_hsb::imx274::{Step, mode_table};
//! use rocelink_hsb::sensor::Imx274Mode;
//! let t = mode_table(Imx274Mode::P1080Raw10);
//! assert!(t.contains(&Step::Write(0x3004, 0x02)));
//! ```

use crate::sensor::Imx274Mode;

/// The camera's I2C address.
pub const ADDRESS: u8 = 0x1A;

/// Standby register: 0x00 streams; HSB's tables write 0x12 while configuring and 0x01 to
/// stop.
pub const REG_STANDBY: u16 = 0x3000;
/// MDSEL1, the readout mode: 0x01 4K RAW10, 0x00 4K RAW12, 0x02 1080p (2×2 binned) RAW10.
pub const REG_MDSEL1: u16 = 0x3004;
/// The readout register HSB's tables set with MDSEL1 (0x01, 0x00, 0x02 likewise).
pub const REG_READOUT: u16 = 0x30E2;
/// Digital gain: 0..=6 for ×1..×64 (HSB's player sets 2, ×4).
pub const REG_DIGITAL_GAIN: u16 = 0x3012;

/// One entry of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Write `value` to `register`.
    Write(u16, u8),
    /// Wait this many milliseconds.
    WaitMs(u32),
}

use Step::{WaitMs, Write};

/// Start streaming.
pub const START: &[Step] = &[
    Write(0x3000, 0x00),
    Write(0x303E, 0x02),
    WaitMs(15),
    Write(0x30F4, 0x00),
    Write(0x3018, 0xA2),
    WaitMs(15),
];

/// Stop streaming.
pub const STOP: &[Step] = &[WaitMs(1), Write(0x3000, 0x01)];

/// The first part of every mode table (clocking and analog settings, 24 MHz input).
const COMMON: &[Step] = &[
    WaitMs(1),
    Write(0x3000, 0x12),
    Write(0x3120, 0xF0),
    Write(0x3122, 0x02),
    Write(0x3129, 0x9C),
    Write(0x312A, 0x02),
    Write(0x312D, 0x02),
    Write(0x310B, 0x00),
    Write(0x304C, 0x00),
    Write(0x304D, 0x03),
    Write(0x331C, 0x1A),
    Write(0x3502, 0x02),
    Write(0x3529, 0x0E),
    Write(0x352A, 0x0E),
    Write(0x352B, 0x0E),
    Write(0x3538, 0x0E),
    Write(0x3539, 0x0E),
    Write(0x3553, 0x00),
    Write(0x357D, 0x05),
    Write(0x357F, 0x05),
    Write(0x3581, 0x04),
    Write(0x3583, 0x76),
    Write(0x3587, 0x01),
    Write(0x35BB, 0x0E),
    Write(0x35BC, 0x0E),
    Write(0x35BD, 0x0E),
    Write(0x35BE, 0x0E),
    Write(0x35BF, 0x0E),
    Write(0x366E, 0x00),
    Write(0x366F, 0x00),
    Write(0x3670, 0x00),
    Write(0x3671, 0x00),
    Write(0x30EE, 0x01),
    Write(0x3304, 0x32),
    Write(0x3306, 0x32),
    Write(0x3590, 0x32),
    Write(0x3686, 0x32),
];

const P2160_RAW10: &[Step] = &[
    // resolution
    Write(0x30E2, 0x01),
    Write(0x30F6, 0x07),
    Write(0x30F7, 0x01),
    Write(0x30F8, 0xC6),
    Write(0x30F9, 0x11),
    Write(0x3130, 0x78),
    Write(0x3131, 0x08),
    Write(0x3132, 0x70),
    Write(0x3133, 0x08),
    // crop
    Write(0x30DD, 0x01),
    Write(0x30DE, 0x04),
    Write(0x30E0, 0x03),
    Write(0x3037, 0x01),
    Write(0x3038, 0x0C),
    Write(0x3039, 0x00),
    Write(0x303A, 0x0C),
    Write(0x303B, 0x0F),
    // mode
    Write(0x3004, 0x01),
    Write(0x3005, 0x01),
    Write(0x3006, 0x00),
    Write(0x3007, 0x02),
    Write(0x300C, 0x0C),
    Write(0x300D, 0x00),
    Write(0x300E, 0x00),
    Write(0x3019, 0x00),
    Write(0x3A41, 0x08),
    Write(0x3342, 0x0A),
    Write(0x3343, 0x00),
    Write(0x3344, 0x16),
    Write(0x3345, 0x00),
    Write(0x3528, 0x0E),
    Write(0x3554, 0x1F),
    Write(0x3555, 0x01),
    Write(0x3556, 0x01),
    Write(0x3557, 0x01),
    Write(0x3558, 0x01),
    Write(0x3559, 0x00),
    Write(0x355A, 0x00),
    Write(0x35BA, 0x0E),
    Write(0x366A, 0x1B),
    Write(0x366B, 0x1A),
    Write(0x366C, 0x19),
    Write(0x366D, 0x17),
    Write(0x33A6, 0x01),
    Write(0x306B, 0x05),
    WaitMs(1),
];

const P2160_RAW12: &[Step] = &[
    Write(0x30E2, 0x00),
    Write(0x30F6, 0xED),
    Write(0x30F7, 0x01),
    Write(0x30F8, 0x08),
    Write(0x30F9, 0x13),
    Write(0x3130, 0x94),
    Write(0x3131, 0x08),
    Write(0x3132, 0x70),
    Write(0x3133, 0x08),
    Write(0x30DD, 0x01),
    Write(0x30DE, 0x04),
    Write(0x30E0, 0x03),
    Write(0x3037, 0x01),
    Write(0x3038, 0x0C),
    Write(0x3039, 0x00),
    Write(0x303A, 0x0C),
    Write(0x303B, 0x0F),
    Write(0x3004, 0x00),
    Write(0x3005, 0x07),
    Write(0x3006, 0x00),
    Write(0x3007, 0x02),
    Write(0x300C, 0x0C),
    Write(0x300D, 0x00),
    Write(0x300E, 0x00),
    Write(0x3019, 0x00),
    Write(0x3A41, 0x10),
    Write(0x3342, 0xFF),
    Write(0x3343, 0x01),
    Write(0x3344, 0xFF),
    Write(0x3345, 0x01),
    Write(0x3528, 0x0F),
    Write(0x3554, 0x00),
    Write(0x3555, 0x00),
    Write(0x3556, 0x00),
    Write(0x3557, 0x00),
    Write(0x3558, 0x00),
    Write(0x3559, 0x1F),
    Write(0x355A, 0x1F),
    Write(0x35BA, 0x0F),
    Write(0x366A, 0x00),
    Write(0x366B, 0x00),
    Write(0x366C, 0x00),
    Write(0x366D, 0x00),
    Write(0x33A6, 0x01),
    Write(0x306B, 0x07),
    WaitMs(1),
];

const P1080_RAW10: &[Step] = &[
    Write(0x30E2, 0x02),
    Write(0x30F6, 0x04),
    Write(0x30F7, 0x01),
    Write(0x30F8, 0x0C),
    Write(0x30F9, 0x12),
    Write(0x3130, 0x40),
    Write(0x3131, 0x04),
    Write(0x3132, 0x38),
    Write(0x3133, 0x04),
    Write(0x30DD, 0x01),
    Write(0x30DE, 0x07),
    Write(0x30DF, 0x00),
    Write(0x30E0, 0x04),
    Write(0x30E1, 0x00),
    Write(0x3037, 0x01),
    Write(0x3038, 0x0C),
    Write(0x3039, 0x00),
    Write(0x303A, 0x0C),
    Write(0x303B, 0x0F),
    Write(0x3004, 0x02),
    Write(0x3005, 0x21),
    Write(0x3006, 0x00),
    Write(0x3007, 0xB1),
    Write(0x300C, 0x08),
    Write(0x300D, 0x00),
    Write(0x3019, 0x00),
    Write(0x3A41, 0x08),
    Write(0x3342, 0x0A),
    Write(0x3343, 0x00),
    Write(0x3344, 0x1A),
    Write(0x3345, 0x00),
    Write(0x3528, 0x0E),
    Write(0x3554, 0x00),
    Write(0x3555, 0x01),
    Write(0x3556, 0x01),
    Write(0x3557, 0x01),
    Write(0x3558, 0x01),
    Write(0x3559, 0x00),
    Write(0x355A, 0x00),
    Write(0x35BA, 0x0E),
    Write(0x366A, 0x1B),
    Write(0x366B, 0x1A),
    Write(0x366C, 0x19),
    Write(0x366D, 0x17),
    Write(0x33A6, 0x01),
    Write(0x306B, 0x05),
    WaitMs(1),
];

/// The whole configuration table of `mode` (without the start table).
pub fn mode_table(mode: Imx274Mode) -> Vec<Step> {
    let tail = match mode {
        Imx274Mode::P2160Raw10 => P2160_RAW10,
        Imx274Mode::P2160Raw12 => P2160_RAW12,
        Imx274Mode::P1080Raw10 => P1080_RAW10,
    };
    COMMON.iter().chain(tail).copied().collect()
}

/// The mode a camera configured by one of HSB's tables is in, from MDSEL1 and the readout
/// register; `None` for any other combination.
pub fn mode_of(mdsel1: u8, readout: u8) -> Option<Imx274Mode> {
    match (mdsel1, readout) {
        (0x01, 0x01) => Some(Imx274Mode::P2160Raw10),
        (0x00, 0x00) => Some(Imx274Mode::P2160Raw12),
        (0x02, 0x02) => Some(Imx274Mode::P1080Raw10),
        _ => None,
    }
}

/// The names `--mode` takes, with HSB's mode numbers: `0`/`4k-raw10`, `1`/`1080p-raw10`,
/// `2`/`4k-raw12`.
pub fn parse_mode(s: &str) -> Option<Imx274Mode> {
    match s {
        "0" | "4k" | "4k-raw10" => Some(Imx274Mode::P2160Raw10),
        "1" | "1080p" | "1080p-raw10" => Some(Imx274Mode::P1080Raw10),
        "2" | "4k-raw12" => Some(Imx274Mode::P2160Raw12),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(t: &[Step], reg: u16) -> Option<u8> {
        t.iter().rev().find_map(|s| match *s {
            Write(r, v) if r == reg => Some(v),
            _ => None,
        })
    }

    #[test]
    fn each_table_names_its_own_mode_and_height() {
        for m in [
            Imx274Mode::P2160Raw10,
            Imx274Mode::P2160Raw12,
            Imx274Mode::P1080Raw10,
        ] {
            let t = mode_table(m);
            let (mdsel, readout) = (last(&t, REG_MDSEL1), last(&t, REG_READOUT));
            assert_eq!(mode_of(mdsel.unwrap(), readout.unwrap()), Some(m));
            // 0x3132/0x3133: the active lines, little-endian
            let lines = u16::from_le_bytes([last(&t, 0x3132).unwrap(), last(&t, 0x3133).unwrap()]);
            assert_eq!(usize::from(lines), m.geometry().1);
            assert_eq!(last(&t, REG_STANDBY), Some(0x12), "configured in standby");
        }
        assert_eq!(last(START, REG_STANDBY), Some(0));
        assert_eq!(last(STOP, REG_STANDBY), Some(1));
        assert_eq!(mode_of(0x01, 0x00), None);
        assert_eq!(parse_mode("1"), Some(Imx274Mode::P1080Raw10));
        assert_eq!(parse_mode("8k"), None);
    }
}
