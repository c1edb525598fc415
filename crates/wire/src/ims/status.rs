//! Status channel packet (Table 3.1): 28 bytes carried in a UC/UD SEND.

use crate::bytes::{be_u32, set_be_u32};
use crate::{Error, Result};

/// Packet length.
pub const PACKET_LEN: usize = 28;

/// Status channel method (Table 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Worker → WCU: status channel registration request.
    StatReq,
    /// WCU → worker: status channel registration response.
    StatRes,
    /// Worker → WCU: status channel termination request.
    StatTerm,
    /// WCU → worker: status channel terminated.
    StatDown,
    /// Worker → WCU: data channel registration request.
    DataReq,
    /// WCU → worker: data channel registration response.
    DataRes,
    /// Worker → WCU: data channel termination request.
    DataTerm,
    /// WCU → worker: data channel terminated.
    DataDown,
}

impl Method {
    /// Wire value.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// From the wire value (0..=7).
    pub fn from_code(c: u8) -> Option<Method> {
        use Method::*;
        Some(match c {
            0 => StatReq,
            1 => StatRes,
            2 => StatTerm,
            3 => StatDown,
            4 => DataReq,
            5 => DataRes,
            6 => DataTerm,
            7 => DataDown,
            _ => return None,
        })
    }
    /// Upper-case name as in the specification.
    pub fn name(self) -> &'static str {
        use Method::*;
        match self {
            StatReq => "STAT_REQ",
            StatRes => "STAT_RES",
            StatTerm => "STAT_TERM",
            StatDown => "STAT_DOWN",
            DataReq => "DATA_REQ",
            DataRes => "DATA_RES",
            DataTerm => "DATA_TERM",
            DataDown => "DATA_DOWN",
        }
    }
}

/// A status packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusRepr {
    /// Protocol major version (1 since end-to-end CRC).
    pub major: u8,
    /// Protocol minor version.
    pub minor: u8,
    /// Method.
    pub method: Method,
    /// LID of the worker (identifies it together with `qpn`).
    pub lid: u32,
    /// Status-channel QPN of the worker.
    pub qpn: u32,
    /// Q_Key (STAT_REQ) or data-channel QPN (DATA_REQ / DATA_RES).
    pub qkey_or_qpnd: u32,
    /// Virtual address offset (DATA_RES).
    pub va: u64,
    /// R_Key of the write window (DATA_RES).
    pub rkey: u32,
}

impl StatusRepr {
    /// Parse 28 bytes; an undefined method is [`Error::Malformed`].
    pub fn parse(b: &[u8]) -> Result<StatusRepr> {
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        let method = Method::from_code(b[3]).ok_or(Error::Malformed)?;
        Ok(StatusRepr {
            major: b[0],
            minor: b[1],
            method,
            lid: be_u32(&b[4..8]),
            qpn: be_u32(&b[8..12]),
            qkey_or_qpnd: be_u32(&b[12..16]),
            va: u64::from(be_u32(&b[16..20])) | (u64::from(be_u32(&b[20..24])) << 32),
            rkey: be_u32(&b[24..28]),
        })
    }

    /// Write 28 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.major;
        b[1] = self.minor;
        b[2] = 0;
        b[3] = self.method.code();
        set_be_u32(&mut b[4..8], self.lid);
        set_be_u32(&mut b[8..12], self.qpn);
        set_be_u32(&mut b[12..16], self.qkey_or_qpnd);
        set_be_u32(&mut b[16..20], self.va as u32);
        set_be_u32(&mut b[20..24], (self.va >> 32) as u32);
        set_be_u32(&mut b[24..28], self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_res_layout() {
        let r = StatusRepr {
            major: 1,
            minor: 1,
            method: Method::DataRes,
            lid: 7,
            qpn: 0x48,
            qkey_or_qpnd: 0x49,
            va: 0x1122_3344_5566_7788,
            rkey: 0xABCD,
        };
        let mut b = [0xA5u8; 28];
        r.emit(&mut b);
        assert_eq!(&b[0..4], &[1, 1, 0, 5]);
        assert_eq!(
            &b[16..24],
            &[0x55, 0x66, 0x77, 0x88, 0x11, 0x22, 0x33, 0x44]
        );
        assert_eq!(StatusRepr::parse(&b).unwrap(), r);
        for m in 0..8 {
            assert_eq!(Method::from_code(m).unwrap().code(), m);
        }
        b[3] = 8;
        assert_eq!(StatusRepr::parse(&b), Err(Error::Malformed));
        assert_eq!(StatusRepr::parse(&b[..27]), Err(Error::Truncated));
    }
}
