//! Out-of-band connection data that RDMA tools exchange over TCP before any RoCE packet:
//! rdma-core's `ibv_*_pingpong` message `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, GID as 32 hex
//! digits) plus a NUL, 52 bytes in all.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Bytes of a pingpong exchange message, NUL included.
pub const PINGPONG_MSG_LEN: usize = 52;

/// A QP's address as rdma-core's pingpong tools exchange it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PingpongDest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN (24 bits).
    pub psn: u32,
    /// GID: on RoCE v2 the IP address (IPv4 mapped into IPv6).
    pub gid: [u8; 16],
}

/// A message that is not a pingpong address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OobError(String);

impl fmt::Display for OobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OobError {}

/// The RoCE v2 GID of an IP address.
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The IP address of a RoCE v2 GID (`None` for the zero GID).
pub fn ip_of_gid(gid: [u8; 16]) -> Option<IpAddr> {
    let v6 = Ipv6Addr::from(gid);
    if v6.is_unspecified() {
        return None;
    }
    Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
}

impl PingpongDest {
    /// The 52-byte message.
    pub fn encode(&self) -> [u8; PINGPONG_MSG_LEN] {
        let hex: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!("{:04x}:{:06x}:{:06x}:{hex}", self.lid, self.qpn, self.psn);
        let mut m = [0u8; PINGPONG_MSG_LEN];
        m[..s.len()].copy_from_slice(s.as_bytes());
        m
    }

    /// Parse a message (up to its first NUL).
    pub fn decode(m: &[u8]) -> Result<PingpongDest, OobError> {
        let text = std::str::from_utf8(m.split(|&b| b == 0).next().unwrap_or_default())
            .map_err(|_| OobError("exchange message is not text".into()))?;
        let parts: Vec<&str> = text.split(':').collect();
        let [lid, qpn, psn, gid] = parts[..] else {
            return Err(OobError(format!("malformed exchange message {text:?}")));
        };
        let num = |s: &str| {
            u32::from_str_radix(s, 16)
                .map_err(|_| OobError(format!("bad number {s:?} in {text:?}")))
        };
        if gid.len() != 32 || !gid.is_ascii() {
            return Err(OobError(format!("GID {gid:?} is not 32 hex characters")));
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(&gid[2 * i..2 * i + 2], 16)
                .map_err(|_| OobError(format!("bad GID {gid:?}")))?;
        }
        Ok(PingpongDest {
            lid: num(lid)? as u16,
            qpn: num(qpn)? & 0xFF_FFFF,
            psn: num(psn)? & 0xFF_FFFF,
            gid: g,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_message_bytes() {
        let d = PingpongDest {
            lid: 0,
            qpn: 0x11,
            psn: 0xABCDEF,
            gid: gid_of("10.77.0.11".parse().unwrap()),
        };
        let m = d.encode();
        assert_eq!(
            &m[..],
            b"0000:000011:abcdef:00000000000000000000ffff0a4d000b\0"
        );
        assert_eq!(PingpongDest::decode(&m), Ok(d));
        assert_eq!(ip_of_gid(d.gid), Some("10.77.0.11".parse().unwrap()));
        assert_eq!(ip_of_gid([0; 16]), None);
        for bad in [
            &b"0000:zz:1:00"[..],
            b"0000:000011:abcdef:0000",
            b"\xff\xfe",
            b"0000:000011:abcdef:00000000000000000000ffff0a4d00\xc3\xa9",
        ] {
            assert!(PingpongDest::decode(bad).is_err(), "{bad:?}");
        }
    }
}
