//! Ethernet Control Bus: register reads and writes over UDP 8192.
//!
//! Request: `cmd u8, flags u8, seq u16, reserved u16, (addr u32, data u32)*` — except that
//! the HSB host sends RD_DWORD as 10 bytes (no data word), so the number of operations is
//! `((len - 6) + 4) / 8` and only the last may lack its data word.
//! Response: `cmd u8, flags u8, seq u16, status u8, reserved u8, (addr u32, data u32)*,
//! latched sequence u16` (the FPGA) or `u32` (HSB emulator and mock), all big-endian.

use crate::bytes::{be_u16, be_u32};
use crate::{Error, Result};

/// Flag: the device must answer (writes are answered only with it).
pub const FLAG_ACK_REQUEST: u8 = 0x01;
/// Flag: the device checks `seq == latched + 1` and refuses the request otherwise.
pub const FLAG_SEQUENCE_CHECK: u8 = 0x02;
/// Most APB operations in one ECB packet.
pub const MAX_BLOCK_OPS: usize = 511;
/// Offset of the first (address, data) pair in requests and responses.
pub const OPS_OFFSET: usize = 6;

/// ECB command byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Command(pub u8);

impl Command {
    /// Write one 32-bit register.
    pub const WR_DWORD: Command = Command(0x04);
    /// Write a list of (address, value) pairs.
    pub const WR_BLOCK: Command = Command(0x09);
    /// Read one 32-bit register.
    pub const RD_DWORD: Command = Command(0x14);
    /// Read consecutive registers.
    pub const RD_BLOCK: Command = Command(0x19);

    /// Name of a command the FPGA defines (it executes only the four DWORD/BLOCK ones).
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x01 => "WR_BYTE",
            0x02 => "WR_WORD",
            0x04 => "WR_DWORD",
            0x09 => "WR_BLOCK",
            0x0A => "RMW_BYTE",
            0x11 => "RD_BYTE",
            0x12 => "RD_WORD",
            0x14 => "RD_DWORD",
            0x19 => "RD_BLOCK",
            0x20 => "GET_INFO",
            _ => return None,
        })
    }
    /// One of the four commands a device executes.
    pub fn is_supported(self) -> bool {
        matches!(self.0, 0x04 | 0x09 | 0x14 | 0x19)
    }
    /// A read command.
    pub fn is_read(self) -> bool {
        self.0 & 0x10 != 0
    }
    /// The response command byte the device sends: `0x80 | rd << 4 | cmd[3:0]`.
    pub fn response(self) -> u8 {
        0x80 | (self.0 & 0x10) | (self.0 & 0x0F)
    }
}

/// Response status byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub u8);

impl Status {
    /// Success.
    pub const SUCCESS: Status = Status(0x00);
    /// General error.
    pub const ERROR_GENERAL: Status = Status(0x02);
    /// Invalid address (also an APB timeout).
    pub const INVALID_ADDR: Status = Status(0x03);
    /// Invalid command.
    pub const INVALID_CMD: Status = Status(0x04);
    /// Invalid packet length.
    pub const INVALID_PKT_LENGTH: Status = Status(0x05);
    /// Invalid flags.
    pub const INVALID_FLAGS: Status = Status(0x06);
    /// Buffer full.
    pub const BUFFER_FULL: Status = Status(0x07);
    /// Invalid block size.
    pub const INVALID_BLOCK_SIZE: Status = Status(0x08);
    /// Invalid indirect address.
    pub const INVALID_INDIRECT_ADDR: Status = Status(0x09);
    /// Command timeout.
    pub const COMMAND_TIMEOUT: Status = Status(0x0A);
    /// Sequence check failed; the request was not executed.
    pub const SEQUENCE_CHECK_FAIL: Status = Status(0x0B);
    /// Host-side error (never on the wire from a device).
    pub const HOST_ERROR: Status = Status(0xF0);

    /// Symbolic name, or `None` for an undefined value.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x00 => "SUCCESS",
            0x02 => "ERROR_GENERAL",
            0x03 => "INVALID_ADDR",
            0x04 => "INVALID_CMD",
            0x05 => "INVALID_PKT_LENGTH",
            0x06 => "INVALID_FLAGS",
            0x07 => "BUFFER_FULL",
            0x08 => "INVALID_BLOCK_SIZE",
            0x09 => "INVALID_INDIRECT_ADDR",
            0x0A => "COMMAND_TIMEOUT",
            0x0B => "SEQUENCE_CHECK_FAIL",
            0xF0 => "HOST_ERROR",
            _ => return None,
        })
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} (0x{:02x})", self.0),
            None => write!(f, "unknown status 0x{:02x}", self.0),
        }
    }
}

/// A view of an ECB request.
#[derive(Debug, Clone)]
pub struct Request<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Request<T> {
    /// Wrap and check: at least a header and one address.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < OPS_OFFSET + 4 {
            return Err(Error::Truncated);
        }
        Ok(Request { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Command.
    pub fn command(&self) -> Command {
        Command(self.b()[0])
    }
    /// Flags.
    pub fn flags(&self) -> u8 {
        self.b()[1]
    }
    /// Sequence number.
    pub fn sequence(&self) -> u16 {
        be_u16(&self.b()[2..4])
    }
    /// Number of (address, data) operations (`((len-6)+4)/8`).
    pub fn op_count(&self) -> usize {
        (self.b().len() - OPS_OFFSET + 4) / 8
    }
    /// True when the length is exactly header + whole pairs, or whole pairs minus the last
    /// data word (the 10-byte RD_DWORD form).
    pub fn length_is_exact(&self) -> bool {
        matches!((self.b().len() - OPS_OFFSET) % 8, 0 | 4)
    }
    /// Operation `i`: address and, if present, data.
    pub fn op(&self, i: usize) -> Option<(u32, Option<u32>)> {
        if i >= self.op_count() {
            return None;
        }
        let at = OPS_OFFSET + 8 * i;
        let b = self.b();
        let addr = b.get(at..at + 4).map(be_u32)?;
        Some((addr, b.get(at + 4..at + 8).map(be_u32)))
    }
    /// All operations.
    pub fn ops(&self) -> impl Iterator<Item = (u32, Option<u32>)> + '_ {
        (0..self.op_count()).filter_map(|i| self.op(i))
    }
}

/// Header fields of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// Command.
    pub command: Command,
    /// Flags.
    pub flags: u8,
    /// Sequence.
    pub sequence: u16,
}

impl RequestHeader {
    /// Append the request to `out` the way the HSB host does: RD_DWORD as 10 bytes
    /// (address only), reads as (address, 0) pairs, writes as (address, value) pairs.
    pub fn emit(&self, ops: &[(u32, u32)], out: &mut Vec<u8>) {
        out.push(self.command.0);
        out.push(self.flags);
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for (i, (addr, data)) in ops.iter().enumerate() {
            out.extend_from_slice(&addr.to_be_bytes());
            let short_read = self.command == Command::RD_DWORD && i + 1 == ops.len();
            if !short_read {
                out.extend_from_slice(
                    &if self.command.is_read() { 0 } else { *data }.to_be_bytes(),
                );
            }
        }
    }
}

/// Length of the latched-sequence trailer of a response.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum Trailer {
    /// 2 bytes (FPGA).
    #[default]
    Two,
    /// 4 bytes (HSB emulator / mock server; the sequence in the first two).
    Four,
}

/// A view of an ECB response.
#[derive(Debug, Clone)]
pub struct Response<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Response<T> {
    /// Wrap and check: header plus whole pairs plus a 0-, 2- or 4-byte trailer.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let len = buffer.as_ref().len();
        if len < OPS_OFFSET {
            return Err(Error::Truncated);
        }
        if !matches!((len - OPS_OFFSET) % 8, 0 | 2 | 4) {
            return Err(Error::Malformed);
        }
        Ok(Response { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Response command byte.
    pub fn command(&self) -> u8 {
        self.b()[0]
    }
    /// Echoed flags.
    pub fn flags(&self) -> u8 {
        self.b()[1]
    }
    /// Echoed sequence.
    pub fn sequence(&self) -> u16 {
        be_u16(&self.b()[2..4])
    }
    /// Status.
    pub fn status(&self) -> Status {
        Status(self.b()[4])
    }
    fn trailer_len(&self) -> usize {
        (self.b().len() - OPS_OFFSET) % 8
    }
    /// Number of (address, data) pairs.
    pub fn op_count(&self) -> usize {
        (self.b().len() - OPS_OFFSET) / 8
    }
    /// Pair `i`.
    pub fn op(&self, i: usize) -> Option<(u32, u32)> {
        if i >= self.op_count() {
            return None;
        }
        let at = OPS_OFFSET + 8 * i;
        Some((
            be_u32(&self.b()[at..at + 4]),
            be_u32(&self.b()[at + 4..at + 8]),
        ))
    }
    /// The latched sequence number, if a trailer is present.
    pub fn latched_sequence(&self) -> Option<u16> {
        let at = OPS_OFFSET + 8 * self.op_count();
        (self.trailer_len() >= 2).then(|| be_u16(&self.b()[at..at + 2]))
    }
    /// Trailer kind, if any.
    pub fn trailer(&self) -> Option<Trailer> {
        match self.trailer_len() {
            2 => Some(Trailer::Two),
            4 => Some(Trailer::Four),
            _ => None,
        }
    }
}

/// Header fields of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseHeader {
    /// Response command byte (see [`Command::response`]; INVALID_CMD echoes the raw byte).
    pub command: u8,
    /// Echoed flags.
    pub flags: u8,
    /// Echoed sequence.
    pub sequence: u16,
    /// Status.
    pub status: Status,
}

impl ResponseHeader {
    /// Append the response with `ops` and the latched-sequence trailer.
    pub fn emit(&self, ops: &[(u32, u32)], latched: u16, trailer: Trailer, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.command, self.flags]);
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&[self.status.0, 0]);
        for (a, d) in ops {
            out.extend_from_slice(&a.to_be_bytes());
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(&latched.to_be_bytes());
        if trailer == Trailer::Four {
            out.extend_from_slice(&[0, 0]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rd_dword_is_ten_bytes() {
        // struct.pack(">BBHBBI", 0x14, 3, 0x100, 0, 0, 0x80)
        let h = RequestHeader {
            command: Command::RD_DWORD,
            flags: 3,
            sequence: 0x100,
        };
        let mut out = Vec::new();
        h.emit(&[(0x80, 0xFFFF)], &mut out);
        assert_eq!(out, [0x14, 0x03, 0x01, 0x00, 0, 0, 0, 0, 0, 0x80]);
        let r = Request::new_checked(&out[..]).unwrap();
        assert_eq!(r.op_count(), 1);
        assert_eq!(r.op(0), Some((0x80, None)));
        assert!(r.length_is_exact());
    }

    #[test]
    fn wr_block() {
        let h = RequestHeader {
            command: Command::WR_BLOCK,
            flags: FLAG_ACK_REQUEST,
            sequence: 7,
        };
        let mut out = Vec::new();
        h.emit(&[(0x1000, 0xCAF0), (0x1004, 0xBEEF)], &mut out);
        assert_eq!(out.len(), 6 + 16);
        let r = Request::new_checked(&out[..]).unwrap();
        assert_eq!(r.command(), Command::WR_BLOCK);
        assert_eq!(
            r.ops().collect::<Vec<_>>(),
            vec![(0x1000, Some(0xCAF0)), (0x1004, Some(0xBEEF))]
        );
        assert!(!Request::new_checked(&out[..17]).unwrap().length_is_exact());
        assert!(Request::new_checked(&out[..9]).is_err());
        assert_eq!(r.op(2), None);
        assert_eq!(r.op(usize::MAX), None);
    }

    #[test]
    fn responses_with_both_trailers() {
        for (t, len) in [(Trailer::Two, 16), (Trailer::Four, 18)] {
            let h = ResponseHeader {
                command: 0x94,
                flags: 3,
                sequence: 0x101,
                status: Status::SUCCESS,
            };
            let mut out = Vec::new();
            h.emit(&[(0x80, 0x2606)], 0x101, t, &mut out);
            assert_eq!(out.len(), len);
            let r = Response::new_checked(&out[..]).unwrap();
            assert_eq!(r.op(0), Some((0x80, 0x2606)));
            assert_eq!(r.op(1), None);
            assert_eq!(r.latched_sequence(), Some(0x101));
            assert_eq!(r.trailer(), Some(t));
            assert_eq!(r.status(), Status::SUCCESS);
        }
        assert_eq!(
            Response::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn command_bytes() {
        assert_eq!(Command::RD_DWORD.response(), 0x94);
        assert_eq!(Command::WR_BLOCK.response(), 0x89);
        assert!(!Command(0x20).is_supported());
        assert_eq!(Command(0x20).name(), Some("GET_INFO"));
        assert_eq!(Status(0x0B).to_string(), "SEQUENCE_CHECK_FAIL (0x0b)");
        assert_eq!(Status(0x55).to_string(), "unknown status 0x55");
    }
}
