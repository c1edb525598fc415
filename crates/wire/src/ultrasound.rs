//! Ultrasound shots (seed `004`): the 64-byte trigger command a host sends to a probe over
//! plain UDP, and the immediate data that numbers each UD SEND message of a shot.
//!
//! The paper leaves both formats open; rocelink's choices:
//!
//! * **Trigger** — 64 bytes, big-endian words:
//!
//!   | bytes | field |
//!   |---|---|
//!   | 0..4 | magic `"USTR"` |
//!   | 4 | version (1) |
//!   | 5 | command: 1 one shot, 2 start periodic triggers, 3 stop |
//!   | 6..8 | reserved (0) |
//!   | 8..16 | trigger number (the shot number of a one-shot command; the first shot's of a start) |
//!   | 16..24 | host time of sending, ns (the probe does not interpret it) |
//!   | 24..28 | destination QPN (low 24 bits) of the host's UD QP |
//!   | 28..32 | Q_Key of the host's UD QP |
//!   | 32..34 | host's RoCE UDP port (0: 4791) |
//!   | 34..36 | reserved (0) |
//!   | 36..40 | start: trigger frequency in mHz (0: the probe's own frequency) |
//!   | 40..48 | start: shots to take (0: until stop) |
//!   | 48..52 | samples per channel N_s (0: the probe's own setting) |
//!   | 52..54 | channels (0: the probe's own setting) |
//!   | 54..56 | reserved (0) |
//!   | 56..64 | cookie: what the probe's challenge carried (0 before one came) |
//!
//!   Shots go to the address the trigger came from, at the given port and QPN — once that
//!   address has shown it receives there: a probe answers a command whose cookie is not the
//!   one it derives for the sender's address and port with a **challenge** (command 4, 64
//!   bytes back to the sender, carrying that cookie, the probe's QPN and RoCE port) and acts
//!   only on commands that echo it, as QUIC validates an address before sending more than
//!   a few times what it received from it. A spoofed sender never sees the cookie.
//!
//! * **Message numbering** — every message of a shot is a UD SEND ONLY WITH IMMEDIATE whose
//!   immediate is `shot[15:0] << 16 | index`, index counting the shot's messages from 0, so
//!   the payload carries sample bytes only and lands contiguous (see [`imm`]).

use crate::bytes::{be_u16, be_u32, be_u64, set_be_u16, set_be_u32, set_be_u64};
use crate::{Error, Result};

/// Length of a trigger command.
pub const TRIGGER_LEN: usize = 64;
/// The magic at its start.
pub const MAGIC: [u8; 4] = *b"USTR";
/// The version this crate writes and reads.
pub const VERSION: u8 = 1;

/// What a trigger asks of the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Take one shot now, numbered with the trigger number.
    Shot,
    /// Take shots periodically from now on.
    Start {
        /// Trigger frequency in mHz (1000 = 1 Hz; 0: the probe's own trigger frequency).
        millihertz: u32,
        /// Shots to take (0: until [`Command::Stop`]).
        count: u64,
    },
    /// Stop periodic triggers.
    Stop,
    /// Probe → host: prove you receive at your address; send the command again with this
    /// message's cookie.
    Challenge,
}

/// A trigger command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerRepr {
    /// What to do.
    pub command: Command,
    /// Trigger number: the (first) shot's number.
    pub number: u64,
    /// Host time of sending (ns); not interpreted by the probe.
    pub host_ns: u64,
    /// The host's UD QPN (24 bits).
    pub qpn: u32,
    /// The host's Q_Key.
    pub qkey: u32,
    /// The host's RoCE UDP port (0: 4791).
    pub port: u16,
    /// Samples per channel (0: the probe's setting).
    pub samples: u32,
    /// Channels (0: the probe's setting).
    pub channels: u16,
    /// The probe's cookie for the sender's address (0 before a challenge gave it).
    pub cookie: u64,
}

mod field {
    pub(super) const MAGIC: core::ops::Range<usize> = 0..4;
    pub(super) const VERSION: usize = 4;
    pub(super) const COMMAND: usize = 5;
    pub(super) const NUMBER: usize = 8;
    pub(super) const HOST_NS: usize = 16;
    pub(super) const QPN: usize = 24;
    pub(super) const QKEY: usize = 28;
    pub(super) const PORT: usize = 32;
    pub(super) const MHZ: usize = 36;
    pub(super) const COUNT: usize = 40;
    pub(super) const SAMPLES: usize = 48;
    pub(super) const CHANNELS: usize = 52;
    pub(super) const COOKIE: usize = 56;
}

impl TriggerRepr {
    /// Read a trigger: exactly [`TRIGGER_LEN`] bytes with the magic, version 1, a known
    /// command, a 24-bit QPN and zero reserved bytes.
    pub fn parse(b: &[u8]) -> Result<TriggerRepr> {
        if b.len() < TRIGGER_LEN {
            return Err(Error::Truncated);
        }
        if b.len() > TRIGGER_LEN || b[field::MAGIC] != MAGIC {
            return Err(Error::Malformed);
        }
        if b[field::VERSION] != VERSION {
            return Err(Error::Unsupported);
        }
        let reserved = b[6..8]
            .iter()
            .chain(&b[34..36])
            .chain(&b[54..56])
            .any(|&x| x != 0);
        let qpn = be_u32(&b[field::QPN..]);
        if reserved || qpn > 0xFF_FFFF {
            return Err(Error::Malformed);
        }
        let (mhz, count) = (be_u32(&b[field::MHZ..]), be_u64(&b[field::COUNT..]));
        let command = match b[field::COMMAND] {
            1 => Command::Shot,
            2 => Command::Start {
                millihertz: mhz,
                count,
            },
            3 => Command::Stop,
            4 => Command::Challenge,
            _ => return Err(Error::Malformed),
        };
        if !matches!(command, Command::Start { .. }) && (mhz != 0 || count != 0) {
            return Err(Error::Malformed);
        }
        Ok(TriggerRepr {
            command,
            number: be_u64(&b[field::NUMBER..]),
            host_ns: be_u64(&b[field::HOST_NS..]),
            qpn,
            qkey: be_u32(&b[field::QKEY..]),
            port: be_u16(&b[field::PORT..]),
            samples: be_u32(&b[field::SAMPLES..]),
            channels: be_u16(&b[field::CHANNELS..]),
            cookie: be_u64(&b[field::COOKIE..]),
        })
    }

    /// Write the 64 bytes.
    pub fn emit(&self) -> [u8; TRIGGER_LEN] {
        let mut b = [0u8; TRIGGER_LEN];
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        let (cmd, mhz, count) = match self.command {
            Command::Shot => (1, 0, 0),
            Command::Start { millihertz, count } => (2, millihertz, count),
            Command::Stop => (3, 0, 0),
            Command::Challenge => (4, 0, 0),
        };
        b[field::COMMAND] = cmd;
        set_be_u64(&mut b[field::NUMBER..], self.number);
        set_be_u64(&mut b[field::HOST_NS..], self.host_ns);
        set_be_u32(&mut b[field::QPN..], self.qpn & 0xFF_FFFF);
        set_be_u32(&mut b[field::QKEY..], self.qkey);
        set_be_u16(&mut b[field::PORT..], self.port);
        set_be_u32(&mut b[field::MHZ..], mhz);
        set_be_u64(&mut b[field::COUNT..], count);
        set_be_u32(&mut b[field::SAMPLES..], self.samples);
        set_be_u16(&mut b[field::CHANNELS..], self.channels);
        set_be_u64(&mut b[field::COOKIE..], self.cookie);
        b
    }
}

/// The immediate data numbering a shot's messages.
pub mod imm {
    /// Most messages in one shot.
    pub const MAX_MESSAGES: u32 = 1 << 16;

    /// The immediate of message `index` of shot `shot`.
    pub const fn encode(shot: u64, index: u32) -> u32 {
        ((shot as u32 & 0xFFFF) << 16) | (index & 0xFFFF)
    }

    /// (low 16 bits of the shot number, message index).
    pub const fn decode(imm: u32) -> (u16, u32) {
        ((imm >> 16) as u16, imm & 0xFFFF)
    }

    /// The full shot number whose low 16 bits are `low`, nearest to `near` (shots numbered
    /// within ±32768 of what the receiver expects are told apart).
    pub const fn extend(low: u16, near: u64) -> u64 {
        let diff = low.wrapping_sub(near as u16) as i16;
        near.wrapping_add(diff as i64 as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A start command: trigger 7, host time 0x0102030405060708 ns, QPN 0x123456, Q_Key
    // 0x11111111, port 4791, 5 kHz (5_000_000 mHz), 1000 shots, N_s 2000, 96 channels.
    static START: [u8; 64] = [
        b'U', b'S', b'T', b'R', 1, 2, 0, 0, // magic, version, command, reserved
        0, 0, 0, 0, 0, 0, 0, 7, // number
        1, 2, 3, 4, 5, 6, 7, 8, // host ns
        0, 0x12, 0x34, 0x56, 0x11, 0x11, 0x11, 0x11, // QPN, Q_Key
        0x12, 0xB7, 0, 0, 0, 0x4C, 0x4B, 0x40, // port, reserved, mHz
        0, 0, 0, 0, 0, 0, 0x03, 0xE8, // count
        0, 0, 0x07, 0xD0, 0, 96, 0, 0, // samples, channels, reserved
        0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn start() -> TriggerRepr {
        TriggerRepr {
            command: Command::Start {
                millihertz: 5_000_000,
                count: 1000,
            },
            number: 7,
            host_ns: 0x0102_0304_0506_0708,
            qpn: 0x12_3456,
            qkey: 0x1111_1111,
            port: 4791,
            samples: 2000,
            channels: 96,
            cookie: 0,
        }
    }

    #[test]
    fn trigger_bytes_both_ways() {
        assert_eq!(TriggerRepr::parse(&START), Ok(start()));
        assert_eq!(start().emit(), START);
        let shot = TriggerRepr {
            command: Command::Shot,
            ..start()
        };
        assert_eq!(TriggerRepr::parse(&shot.emit()), Ok(shot));
        let stop = TriggerRepr {
            command: Command::Stop,
            ..start()
        };
        assert_eq!(TriggerRepr::parse(&stop.emit()), Ok(stop));
        let challenge = TriggerRepr {
            command: Command::Challenge,
            cookie: 0x0102_0304_0506_0708,
            ..start()
        };
        let b = challenge.emit();
        assert_eq!(b[5], 4);
        assert_eq!(b[56..64], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(TriggerRepr::parse(&b), Ok(challenge));
    }

    #[test]
    fn bad_triggers_are_refused() {
        assert_eq!(TriggerRepr::parse(&START[..63]), Err(Error::Truncated));
        assert_eq!(TriggerRepr::parse(&[0u8; 65]), Err(Error::Malformed));
        let edit = |i: usize, v: u8| {
            let mut b = START;
            b[i] = v;
            TriggerRepr::parse(&b)
        };
        assert_eq!(edit(0, b'X'), Err(Error::Malformed)); // magic
        assert_eq!(edit(4, 2), Err(Error::Unsupported)); // version
        assert_eq!(edit(5, 9), Err(Error::Malformed)); // command
        assert_eq!(edit(7, 1), Err(Error::Malformed)); // reserved
        assert_eq!(edit(55, 1), Err(Error::Malformed)); // reserved
        assert!(edit(60, 1).is_ok_and(|t| t.cookie == 1 << 24)); // cookie
        assert_eq!(edit(24, 1), Err(Error::Malformed)); // QPN over 24 bits
        assert_eq!(edit(5, 1), Err(Error::Malformed)); // a one-shot with a rate
        let mut b = START;
        b[36..40].fill(0); // start at the probe's own frequency
        assert!(matches!(
            TriggerRepr::parse(&b),
            Ok(TriggerRepr {
                command: Command::Start { millihertz: 0, .. },
                ..
            })
        ));
    }

    #[test]
    fn message_numbers_round_trip_and_extend_across_the_wrap() {
        assert_eq!(imm::encode(0x1_2345, 141), 0x2345_008D);
        assert_eq!(imm::decode(0x2345_008D), (0x2345, 141));
        assert_eq!(imm::extend(0x0002, 0xFFFF), 0x1_0002);
        assert_eq!(imm::extend(0xFFFE, 0x1_0001), 0xFFFE);
        assert_eq!(imm::extend(5, 5), 5);
        assert_eq!(imm::extend(3, 0), 3);
    }
}
