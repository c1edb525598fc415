//! perftest's out-of-band messages (`ib_write_bw`, `ib_read_lat`, … without `-R`): what two
//! peers write to each other over TCP before, between and after the RoCE traffic. Every
//! message has a fixed size and no framing; see `docs/perf.md` for the order.
//!
//! * the version, 16 bytes, a decimal number NUL-padded (`"6.27"`);
//! * the system data, two big-endian `i32`s (cycle buffer, cache line size), peers ≥ 5.32;
//! * the MTU, the verbs MTU enum as a decimal string: 2 bytes (`"3\0"` for 1024) with a
//!   peer ≥ 5.31, 4 bytes with older ones;
//! * the key string of a QP ([`KeyMsg`]): `LID:OUT_READS:QPN:PSN:RKEY:VADDR:` then, on RoCE,
//!   the 16 GID bytes as `%02x:` each, then `SRQN:` — 108 bytes with the NUL (59 without a
//!   GID);
//! * the bandwidth report ([`BwReport`]): size and iterations as big-endian `u64`, then peak,
//!   average and message rate as big-endian `f64`s, each its own exchange.

use std::fmt;

/// perftest's default TCP port.
pub const DEFAULT_PORT: u16 = 18515;
/// Bytes of the version message.
pub const VERSION_LEN: usize = 16;
/// Bytes of a key string without a GID (IB), NUL included.
pub const KEY_LEN: usize = 59;
/// Bytes of a key string with a GID (RoCE), NUL included.
pub const KEY_LEN_GID: usize = 108;
/// The version rocelink advertises: new enough for every exchange perftest has (≥ 5.70, which
/// perftest requires), older than 6.28, whose parameter negotiation sends a build-dependent
/// C struct (`struct ibv_device_attr` in host layout) that a peer without verbs cannot make.
pub const VERSION: &str = "6.27";
/// UD Q_Key perftest uses.
pub const UD_QKEY: u32 = 0x1111_1111;

/// A message that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerftestError(String);

impl fmt::Display for PerftestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PerftestError {}

fn err(s: impl Into<String>) -> PerftestError {
    PerftestError(s.into())
}

/// The 16-byte version message of `v`.
pub fn encode_version(v: &str) -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    let n = v.len().min(VERSION_LEN - 1);
    m[..n].copy_from_slice(&v.as_bytes()[..n]);
    m
}

/// The bytes after the version string's NUL that say "rocelink, running this test":
/// perftest reads the version with `atof` and ignores them; two rocelink peers tell each
/// other which test (and connection type) they run, so a mismatch is refused.
pub const TAG: [u8; 2] = *b"RL";
/// Offset of [`TAG`] in the version message.
pub const TAG_AT: usize = 8;
/// Offset of the features byte after the tag (0 from a rocelink before it).
pub const FEATURES_AT: usize = TAG_AT + 4;
/// Feature: write_lat ends with perftest's closing exchange (hand-shake and `"done"`)
/// when both ends have it.
pub const CLOSES_WRITE_LAT: u8 = 1;
/// The features this build has.
pub const FEATURES: u8 = CLOSES_WRITE_LAT;

/// The version message of a rocelink side running test `test` (a code of its own choosing,
/// the same on both sides for the same test) over connection type `conn`.
pub fn encode_version_tagged(v: &str, test: u8, conn: u8) -> [u8; VERSION_LEN] {
    let mut m = encode_version(v);
    if v.len() < TAG_AT {
        m[TAG_AT..TAG_AT + 2].copy_from_slice(&TAG);
        m[TAG_AT + 2] = test;
        m[TAG_AT + 3] = conn;
        m[FEATURES_AT] = FEATURES;
    }
    m
}

/// (test, connection type) a rocelink peer's version message carries; `None` from perftest.
pub fn parse_tag(m: &[u8]) -> Option<(u8, u8)> {
    let t = m.get(TAG_AT..TAG_AT + 4)?;
    (t[..2] == TAG).then_some((t[2], t[3]))
}

/// The features a rocelink peer's version message says it has; 0 from perftest.
pub fn parse_features(m: &[u8]) -> u8 {
    match parse_tag(m) {
        Some(_) => m.get(FEATURES_AT).copied().unwrap_or(0),
        None => 0,
    }
}

/// A peer's version as perftest reads it (C's `atof`: the longest leading decimal number,
/// 0 when there is none).
pub fn parse_version(m: &[u8]) -> f64 {
    let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
    let s = String::from_utf8_lossy(&m[..end]);
    let s = s.trim_start();
    let mut n = 0;
    let mut dot = false;
    for (i, c) in s.char_indices() {
        match c {
            '0'..='9' => n = i + 1,
            '.' if !dot => dot = true,
            _ => break,
        }
    }
    s[..n].parse().unwrap_or(0.0)
}

/// The verbs MTU enum (1 = 256 … 5 = 4096) of a path MTU in bytes.
pub fn mtu_enum(bytes: usize) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// The path MTU in bytes of a verbs MTU enum.
pub fn mtu_bytes(e: u8) -> Option<usize> {
    (1..=5).contains(&e).then(|| 128usize << e)
}

/// The MTU message for a peer of version `peer`: `None` when perftest sends none (< 5.1).
pub fn encode_mtu(e: u8, peer: f64) -> Option<Vec<u8>> {
    if peer < 5.1 {
        return None;
    }
    let n = if peer >= 5.31 { 2 } else { 4 };
    let mut m = vec![0u8; n];
    let s = e.to_string();
    let k = s.len().min(n);
    m[..k].copy_from_slice(&s.as_bytes()[..k]);
    Some(m)
}

/// A peer's MTU message (C's `strtol`: leading digits).
pub fn parse_mtu(m: &[u8]) -> Option<u8> {
    let d: String = m
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    d.parse().ok()
}

/// The system-data messages (cycle buffer, cache line size), sent when the peer is ≥ 5.32.
pub fn encode_sys_data(cycle_buffer: i32, cache_line: i32) -> [[u8; 4]; 2] {
    [cycle_buffer.to_be_bytes(), cache_line.to_be_bytes()]
}

/// One QP's connection data, as perftest exchanges it (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct KeyMsg {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// Outstanding READs the QP accepts as responder (`max_dest_rd_atomic`).
    pub out_reads: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN (24 bits).
    pub psn: u32,
    /// Remote key of the buffer.
    pub rkey: u32,
    /// Virtual address of the buffer.
    pub vaddr: u64,
    /// GID (RoCE: the IP address, IPv4 mapped); `None` sends the 59-byte IB form.
    pub gid: Option<[u8; 16]>,
    /// SRQ number (0 without an SRQ).
    pub srqn: u32,
}

impl KeyMsg {
    /// The message, NUL included: [`KEY_LEN_GID`] bytes with a GID, [`KEY_LEN`] without.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        let len = match self.gid {
            Some(g) => {
                for b in g {
                    s.push_str(&format!("{b:02x}:"));
                }
                s.push_str(&format!("{:08x}:", self.srqn));
                KEY_LEN_GID
            }
            None => {
                s.push_str(&format!("{:08x}", self.srqn));
                KEY_LEN
            }
        };
        let mut m = vec![0u8; len];
        let n = s.len().min(len - 1);
        m[..n].copy_from_slice(&s.as_bytes()[..n]);
        m
    }

    /// Parse a key string (either size; a 108-byte one carries the GID).
    pub fn decode(m: &[u8]) -> Result<KeyMsg, PerftestError> {
        let with_gid = match m.len() {
            KEY_LEN_GID => true,
            KEY_LEN => false,
            n => {
                return Err(err(format!(
                    "a perftest key string is 59 or 108 bytes, not {n}"
                )));
            }
        };
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let s = std::str::from_utf8(&m[..end])
            .map_err(|_| err("the perftest key string is not ASCII"))?;
        let f: Vec<&str> = s.split(':').collect();
        let want = if with_gid { 23 } else { 7 };
        if f.len() < want {
            return Err(err(format!("cannot parse the perftest key string {s:?}")));
        }
        let hex = |i: usize, bits: u32| -> Result<u64, PerftestError> {
            let v = u64::from_str_radix(f[i], 16).map_err(|_| {
                err(format!(
                    "field {} of the key string {s:?} is not hex",
                    i + 1
                ))
            })?;
            if bits < 64 && v >> bits != 0 {
                return Err(err(format!("field {} of {s:?} is out of range", i + 1)));
            }
            Ok(v)
        };
        let gid = if with_gid {
            let mut g = [0u8; 16];
            for (k, b) in g.iter_mut().enumerate() {
                *b = hex(6 + k, 8)? as u8;
            }
            Some(g)
        } else {
            None
        };
        Ok(KeyMsg {
            lid: hex(0, 16)? as u16,
            out_reads: hex(1, 16)? as u16,
            qpn: hex(2, 24)? as u32,
            psn: hex(3, 24)? as u32,
            rkey: hex(4, 32)? as u32,
            vaddr: hex(5, 64)?,
            gid,
            srqn: hex(if with_gid { 22 } else { 6 }, 32)? as u32,
        })
    }
}

/// A bandwidth test's result as the peers exchange it at the end (the client's is what a
/// WRITE/READ server prints).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth, in the report's unit.
    pub bw_peak: f64,
    /// Average bandwidth, in the report's unit.
    pub bw_avg: f64,
    /// Messages per second, millions.
    pub msg_rate: f64,
}

impl BwReport {
    /// The five messages, in the order perftest exchanges them, for a peer of version
    /// `peer` (iterations are 4 bytes before 5.33).
    pub fn encode(&self, peer: f64) -> [Vec<u8>; 5] {
        let iters = if peer >= 5.33 {
            self.iters.to_be_bytes().to_vec()
        } else {
            (self.iters as u32).to_be_bytes().to_vec()
        };
        [
            self.size.to_be_bytes().to_vec(),
            iters,
            self.bw_peak.to_bits().to_be_bytes().to_vec(),
            self.bw_avg.to_bits().to_be_bytes().to_vec(),
            self.msg_rate.to_bits().to_be_bytes().to_vec(),
        ]
    }

    /// Read the five messages back.
    pub fn decode(m: &[Vec<u8>; 5]) -> Result<BwReport, PerftestError> {
        let u = |b: &[u8]| -> Result<u64, PerftestError> {
            match b.len() {
                8 => Ok(u64::from_be_bytes(b.try_into().unwrap_or_default())),
                4 => Ok(u64::from(u32::from_be_bytes(
                    b.try_into().unwrap_or_default(),
                ))),
                n => Err(err(format!("a report field of {n} bytes"))),
            }
        };
        let f = |b: &[u8]| u(b).map(f64::from_bits);
        Ok(BwReport {
            size: u(&m[0])?,
            iters: u(&m[1])?,
            bw_peak: f(&m[2])?,
            bw_avg: f(&m[3])?,
            msg_rate: f(&m[4])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_string_with_gid_is_perftests_108_bytes() {
        let k = KeyMsg {
            lid: 0,
            out_reads: 0x10,
            qpn: 0x11,
            psn: 0xab_cdef,
            rkey: 0x1234,
            vaddr: 0x5600_0000_1000,
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 12]),
            srqn: 0,
        };
        let m = k.encode();
        assert_eq!(m.len(), KEY_LEN_GID);
        let want = b"0000:0010:000011:abcdef:00001234:0000560000001000:\
00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:0c:00000000:\0";
        assert_eq!(&m[..], &want[..]);
        assert_eq!(KeyMsg::decode(&m).unwrap(), k);
    }

    #[test]
    fn key_string_without_gid_is_59_bytes() {
        let k = KeyMsg {
            lid: 0x12,
            out_reads: 1,
            qpn: 0xFF_FFFF,
            psn: 0,
            rkey: 0xFFFF_FFFF,
            vaddr: u64::MAX,
            gid: None,
            srqn: 7,
        };
        let m = k.encode();
        assert_eq!(
            &m[..],
            b"0012:0001:ffffff:000000:ffffffff:ffffffffffffffff:00000007\0"
        );
        assert_eq!(KeyMsg::decode(&m).unwrap(), k);
    }

    #[test]
    fn bad_key_strings_are_errors() {
        assert!(KeyMsg::decode(&[0u8; 60]).is_err());
        assert!(KeyMsg::decode(&[b'x'; KEY_LEN]).is_err());
        let mut m = KeyMsg {
            lid: 0,
            out_reads: 0,
            qpn: 1,
            psn: 1,
            rkey: 1,
            vaddr: 1,
            gid: None,
            srqn: 0,
        }
        .encode();
        m[10] = b'g';
        assert!(KeyMsg::decode(&m).is_err());
    }

    #[test]
    fn versions_parse_like_atof() {
        assert_eq!(&encode_version(VERSION)[..5], b"6.27\0");
        let t = encode_version_tagged(VERSION, 0x11, 2);
        assert_eq!(parse_version(&t), 6.27, "perftest reads only the version");
        assert_eq!(parse_tag(&t), Some((0x11, 2)));
        assert_eq!(parse_tag(&encode_version(VERSION)), None);
        assert_eq!(parse_features(&t), FEATURES);
        assert_eq!(parse_features(&encode_version(VERSION)), 0);
        // a rocelink from before the features byte
        let mut old = t;
        old[FEATURES_AT] = 0;
        assert_eq!(
            (parse_tag(&old), parse_features(&old)),
            (Some((0x11, 2)), 0)
        );
        assert_eq!(parse_version(&encode_version("6.06")), 6.06);
        assert_eq!(parse_version(b"5.70-beta\0\0"), 5.70);
        assert_eq!(parse_version(b"\0garbage"), 0.0);
        assert_eq!(parse_version(b"x"), 0.0);
    }

    #[test]
    fn mtu_and_sys_data_follow_the_peer_version() {
        assert_eq!(encode_mtu(3, 6.06).unwrap(), b"3\0");
        assert_eq!(encode_mtu(5, 5.2).unwrap(), b"5\0\0\0");
        assert_eq!(encode_mtu(5, 5.0), None);
        assert_eq!(parse_mtu(b"3\0"), Some(3));
        assert_eq!(parse_mtu(b"\0\0"), None);
        assert_eq!((mtu_enum(1024), mtu_bytes(5)), (Some(3), Some(4096)));
        assert_eq!(
            encode_sys_data(4096, 64),
            [[0, 0, 0x10, 0], [0, 0, 0, 0x40]]
        );
    }

    #[test]
    fn bandwidth_report_is_big_endian_fields() {
        let r = BwReport {
            size: 65536,
            iters: 5000,
            bw_peak: 1.5,
            bw_avg: 1.25,
            msg_rate: 0.02,
        };
        let m = r.encode(6.06);
        assert_eq!(m[0], [0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(m[1], [0, 0, 0, 0, 0, 0, 0x13, 0x88]);
        assert_eq!(m[2], [0x3F, 0xF8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(BwReport::decode(&m).unwrap(), r);
        assert_eq!(r.encode(5.0)[1], [0, 0, 0x13, 0x88]);
    }
}
