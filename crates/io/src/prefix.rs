//! Address prefixes (`ADDR` or `ADDR/LEN`, as text in a configuration) and the subnet of
//! a local interface address.

use crate::net::interface_addrs;
use std::net::IpAddr;

/// An address prefix: `ADDR` (a single host) or `ADDR/LEN` (as text in a configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// Every address (`any`).
    pub const ANY_V4: Prefix = Prefix {
        addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        len: 0,
    };

    /// Loopback: 127.0.0.0/8 and ::1.
    pub fn loopback() -> [Prefix; 2] {
        [
            Prefix {
                addr: IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
                len: 8,
            },
            Prefix {
                addr: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                len: 128,
            },
        ]
    }

    /// `addr/len`, if `len` fits the family (masked to the prefix).
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Prefix { addr, len })
    }

    /// Just `ip`.
    pub fn host(ip: IpAddr) -> Prefix {
        Prefix {
            addr: ip,
            len: if ip.is_ipv4() { 32 } else { 128 },
        }
    }

    /// Whether `ip` is in it (an IPv4 prefix holds no IPv6 address and the other way).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        if s == "any" {
            return Ok(Prefix::ANY_V4);
        }
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{s:?}: an address is IP, IP/PREFIX or any"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("{s:?}: a prefix length is 0 to {max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Prefix, String> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len == 0 {
            return write!(f, "any");
        }
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The subnet of the interface address `ip` (its netmask as a prefix), if a local
/// interface has it (loopback: 127.0.0.0/8).
pub fn subnet_of(ip: IpAddr) -> Option<Prefix> {
    if ip.is_loopback() {
        return Prefix::loopback().into_iter().find(|p| p.contains(ip));
    }
    interface_addrs()
        .into_iter()
        .find(|a| a.addr == ip)
        .and_then(|a| Prefix::new(ip, a.prefix_len))
}
