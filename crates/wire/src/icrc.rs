//! The RoCE v2 invariant CRC (ICRC).
//!
//! CRC-32 (IEEE 802.3 / zlib) over: 8 bytes of 0xFF (a masked LRH), the IP header with its
//! variant fields set to ones (IPv4: ToS, TTL, header checksum; IPv6: traffic class, flow
//! label, hop limit), the UDP header with its checksum set to ones, the BTH with byte 4
//! (FECN, BECN, resv6) set to ones, then every extended header, the payload and the pad
//! bytes. The trailer carries the value least-significant byte first. Masking is done on a
//! stack copy of the headers; the payload is hashed in place, never copied.
//!
//! ```
//! use rocelink_wire::icrc;
//! // the check value of this CRC is CRC-32("123456789")
//! assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
//! # let _ = icrc::IcrcHasher::new(&[0x45; 20][..], &[0; 8], &[0; 12]);
//! ```

use crate::ib::{BTH_LEN, ICRC_LEN};
use crate::{Error, Result, ipv4, ipv6, udp};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const LRH_STANDIN: [u8; 8] = [0xFF; 8];
const MAX_MASKED: usize = 8 + ipv6::HEADER_LEN + udp::HEADER_LEN + BTH_LEN;

/// Incremental ICRC: masked headers first, then any number of payload slices.
#[derive(Debug, Clone)]
pub struct IcrcHasher {
    crc: crc32fast::Hasher,
}

impl IcrcHasher {
    /// Start with the IP header as on the wire (20-byte IPv4 without options, or the
    /// 40-byte IPv6 fixed header), the 8-byte UDP header and the 12-byte BTH.
    pub fn new(ip_header: &[u8], udp_header: &[u8], bth: &[u8]) -> Result<IcrcHasher> {
        let bth: &[u8; BTH_LEN] = bth.try_into().map_err(|_| Error::Malformed)?;
        let mut h = IcrcHasher::prefix(ip_header, udp_header)?;
        h.update_bth(bth);
        Ok(h)
    }

    /// The state after the masked LRH stand-in, IP and UDP headers only: every packet of a
    /// flow with the same length shares it, so a receiver can compute it once and clone it.
    /// Continue with [`IcrcHasher::update_bth`].
    pub fn prefix(ip_header: &[u8], udp_header: &[u8]) -> Result<IcrcHasher> {
        if udp_header.len() != udp::HEADER_LEN {
            return Err(Error::Malformed);
        }
        let mut buf = [0u8; MAX_MASKED];
        buf[..8].copy_from_slice(&LRH_STANDIN);
        let ip_len = ip_header.len();
        let ip = &mut buf[8..8 + ip_len.min(ipv6::HEADER_LEN)];
        match (ip_len, ip_header.first().map(|b| b >> 4)) {
            (ipv4::HEADER_LEN, Some(4)) => {
                ip.copy_from_slice(ip_header);
                ip[1] = 0xFF; // ToS
                ip[8] = 0xFF; // TTL
                ip[10] = 0xFF; // header checksum
                ip[11] = 0xFF;
            }
            (ipv6::HEADER_LEN, Some(6)) => {
                ip.copy_from_slice(ip_header);
                ip[0] = 0x6F; // version kept, traffic class + flow label to ones
                ip[1] = 0xFF;
                ip[2] = 0xFF;
                ip[3] = 0xFF;
                ip[7] = 0xFF; // hop limit
            }
            _ => return Err(Error::Unsupported),
        }
        let mut off = 8 + ip_len;
        buf[off..off + 8].copy_from_slice(udp_header);
        buf[off + 6] = 0xFF;
        buf[off + 7] = 0xFF;
        off += 8;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&buf[..off]);
        Ok(IcrcHasher { crc })
    }

    /// Hash the BTH with its variant byte (FECN, BECN, reserved) masked; right after
    /// [`IcrcHasher::prefix`].
    #[inline]
    pub fn update_bth(&mut self, bth: &[u8; BTH_LEN]) {
        let mut b = *bth;
        b[4] = 0xFF;
        self.crc.update(&b);
    }

    /// Hash the next covered bytes (extended headers, payload, pad).
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
    }

    /// The ICRC value (write it with `to_le_bytes`).
    #[inline]
    pub fn finalize(self) -> u32 {
        self.crc.finalize()
    }
}

/// ICRC of `ib` = BTH … pad (everything after the UDP header up to, not including, the
/// ICRC trailer).
pub fn compute(ip_header: &[u8], udp_header: &[u8], ib: &[u8]) -> Result<u32> {
    if ib.len() < BTH_LEN {
        return Err(Error::Truncated);
    }
    let mut h = IcrcHasher::new(ip_header, udp_header, &ib[..BTH_LEN])?;
    h.update(&ib[BTH_LEN..]);
    Ok(h.finalize())
}

/// Outcome of an ICRC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Check {
    /// What the packet carries.
    pub received: u32,
    /// What the bytes hash to.
    pub computed: u32,
}

impl Check {
    /// True when they match.
    pub fn ok(&self) -> bool {
        cfg!(fuzzing) || self.received == self.computed
    }
}

/// Check `ib_with_trailer` = BTH … pad, ICRC.
pub fn check(ip_header: &[u8], udp_header: &[u8], ib_with_trailer: &[u8]) -> Result<Check> {
    let n = ib_with_trailer.len();
    if n < BTH_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    let computed = compute(ip_header, udp_header, &ib_with_trailer[..n - ICRC_LEN])?;
    let t = &ib_with_trailer[n - ICRC_LEN..];
    Ok(Check {
        received: u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
        computed,
    })
}

/// Compute and write the trailer of `ib_with_trailer` (its last four bytes).
pub fn fill(ip_header: &[u8], udp_header: &[u8], ib_with_trailer: &mut [u8]) -> Result<u32> {
    let n = ib_with_trailer.len();
    if n < BTH_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    let v = compute(ip_header, udp_header, &ib_with_trailer[..n - ICRC_LEN])?;
    ib_with_trailer[n - ICRC_LEN..].copy_from_slice(&v.to_le_bytes());
    Ok(v)
}

/// The 20-byte IPv4 header Linux emits for an unconnected UDP socket bound to an explicit
/// source with `IP_PMTUDISC_DO`: ID 0, DF, protocol UDP (ToS/TTL/checksum are masked by the
/// ICRC, so their values here do not matter). `udp_len` is the UDP length (header + payload).
pub fn socket_ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, udp_len: usize) -> [u8; 20] {
    let mut h = [0u8; 20];
    let mut r = ipv4::Repr::new(src, dst, ipv4::protocol::UDP, udp_len);
    r.ident = 0;
    r.dont_frag = true;
    r.emit(&mut h);
    h
}

/// The 40-byte IPv6 header for a UDP datagram of `udp_len` bytes (traffic class, flow
/// label and hop limit are masked by the ICRC, so zero/64 here does not matter).
pub fn socket_ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, udp_len: usize) -> [u8; 40] {
    let mut h = [0u8; 40];
    ipv6::Repr {
        src,
        dst,
        next_header: ipv4::protocol::UDP,
        payload_len: udp_len,
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 64,
    }
    .emit(&mut h);
    h
}

/// Hasher for a datagram sent from `src` to `dst` through a UDP socket whose kernel builds
/// the IP header (IPv4: ID 0 and DF, as with an unconnected socket and `IP_PMTUDISC_DO`).
/// `ib_len` is BTH … ICRC; `bth` the 12 BTH bytes. Mixed address families: `Unsupported`.
pub fn socket_hasher(
    src: SocketAddr,
    dst: SocketAddr,
    ib_len: usize,
    bth: &[u8],
) -> Result<IcrcHasher> {
    let udp_len = udp::HEADER_LEN + ib_len;
    if udp_len > usize::from(u16::MAX) {
        return Err(Error::Malformed);
    }
    let mut u = [0u8; 8];
    udp::Repr {
        src_port: src.port(),
        dst_port: dst.port(),
        payload_len: ib_len,
        checksum: 0,
    }
    .emit(&mut u);
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            IcrcHasher::new(&socket_ipv4_header(s, d, udp_len), &u, bth)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            IcrcHasher::new(&socket_ipv6_header(s, d, udp_len), &u, bth)
        }
        _ => Err(Error::Unsupported),
    }
}

/// Check `ib_with_trailer` (BTH … ICRC) as received on a UDP socket from `src` at `dst`,
/// assuming the IPv4 header had ID 0 and DF (exact for IPv6).
pub fn check_socket(src: SocketAddr, dst: SocketAddr, ib_with_trailer: &[u8]) -> Result<Check> {
    let n = ib_with_trailer.len();
    if n < BTH_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    let mut h = socket_hasher(src, dst, n, &ib_with_trailer[..BTH_LEN])?;
    h.update(&ib_with_trailer[BTH_LEN..n - ICRC_LEN]);
    let t = &ib_with_trailer[n - ICRC_LEN..];
    Ok(Check {
        received: u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
        computed: h.finalize(),
    })
}

/// Compute and write the trailer of `ib_with_trailer` for a UDP-socket send (see
/// [`socket_hasher`]).
pub fn fill_socket(src: SocketAddr, dst: SocketAddr, ib_with_trailer: &mut [u8]) -> Result<u32> {
    let c = check_socket(src, dst, ib_with_trailer)?;
    let n = ib_with_trailer.len();
    ib_with_trailer[n - ICRC_LEN..].copy_from_slice(&c.computed.to_le_bytes());
    Ok(c.computed)
}

/// Joins CRC-32 values: `crc(A ‖ B)` from `crc(A)`, `crc(B)` and `len(B)` (zlib's
/// `crc32_combine`), caching `x^(8·len)`. Lets a receiver hash a payload once and use the
/// result both in the ICRC and in a running CRC of the data (e.g. an HSB frame CRC).
///
/// Multiplying by a fixed `x^(8·len)` is linear in the other operand, so once one length
/// dominates (a majority vote reaches [`TABLE_AFTER`]) the combiner builds four 256-entry
/// tables for it
/// and a combine costs four lookups instead of a 32-step multiply. A stream of equal-sized
/// packets with the odd other size (a metadata packet) keeps its table.
#[derive(Debug, Clone, Default)]
pub struct Combiner {
    len: usize,
    x: u32,
    cand: usize,
    run: u32,
    table: Option<Box<(usize, [[u32; 256]; 4])>>,
}

/// Vote margin of one length after which [`Combiner`] builds its tables.
pub const TABLE_AFTER: u32 = 64;

impl Combiner {
    /// `crc(A ‖ B)`.
    pub fn combine(&mut self, crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
        if len_b == 0 {
            return crc_a;
        }
        if let Some(t) = &self.table
            && t.0 == len_b
        {
            let [t0, t1, t2, t3] = &t.1;
            let a = crc_a.to_le_bytes();
            return t0[usize::from(a[0])]
                ^ t1[usize::from(a[1])]
                ^ t2[usize::from(a[2])]
                ^ t3[usize::from(a[3])]
                ^ crc_b;
        }
        if len_b != self.len || self.x == 0 {
            self.x = x8nmodp(len_b);
            self.len = len_b;
        }
        // majority vote: the dominant length gets the table, odd sizes in between do not
        // stop it from getting there
        if len_b == self.cand {
            self.run += 1;
        } else if self.run == 0 {
            (self.cand, self.run) = (len_b, 1);
        } else {
            self.run -= 1;
        }
        if self.run >= TABLE_AFTER && len_b == self.cand {
            self.run = 0;
            let mut t = Box::new((len_b, [[0u32; 256]; 4]));
            for (i, row) in t.1.iter_mut().enumerate() {
                for (v, e) in row.iter_mut().enumerate() {
                    *e = multmodp(self.x, (v as u32) << (8 * i));
                }
            }
            self.table = Some(t);
        }
        multmodp(self.x, crc_a) ^ crc_b
    }
}

/// Payloads up to this many bytes are hashed twice by [`check_socket_split`] instead of
/// having their CRC joined (a join without a table costs about as much as hashing 512 bytes).
const SMALL: usize = 512;

/// ICRC check of `ib_with_trailer` received from `src` at `dst` (see [`check_socket`]),
/// also returning the plain CRC-32 of the payload (`payload` = the byte range of the packet's
/// payload within `ib_with_trailer`), computed in the same single pass over the payload.
pub fn check_socket_split(
    src: SocketAddr,
    dst: SocketAddr,
    ib_with_trailer: &[u8],
    net_header: &[u8],
    payload: core::ops::Range<usize>,
    comb: &mut Combiner,
) -> Result<(Check, u32)> {
    let n = ib_with_trailer.len();
    if n < BTH_LEN + ICRC_LEN
        || payload.start < BTH_LEN
        || payload.end > n - ICRC_LEN
        || payload.start > payload.end
    {
        return Err(Error::Truncated);
    }
    let mut u = [0u8; 8];
    udp::Repr {
        src_port: src.port(),
        dst_port: dst.port(),
        payload_len: n,
        checksum: 0,
    }
    .emit(&mut u);
    let mut h = IcrcHasher::new(net_header, &u, &ib_with_trailer[..BTH_LEN])?;
    h.update(&ib_with_trailer[BTH_LEN..payload.start]);
    let t = &ib_with_trailer[n - ICRC_LEN..];
    let received = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    let pcrc = crc32fast::hash(&ib_with_trailer[payload.clone()]);
    if payload.len() <= SMALL {
        // hashing a small payload twice is cheaper than joining the CRCs
        h.update(&ib_with_trailer[payload.start..n - ICRC_LEN]);
        return Ok((
            Check {
                received,
                computed: h.finalize(),
            },
            pcrc,
        ));
    }
    let head = h.finalize();
    let pad = &ib_with_trailer[payload.end..n - ICRC_LEN];
    let mut c = comb.combine(head, pcrc, payload.len());
    if !pad.is_empty() {
        c = Combiner::default().combine(c, crc32fast::hash(pad), pad.len());
    }
    Ok((
        Check {
            received,
            computed: c,
        },
        pcrc,
    ))
}

/// Reflected CRC-32 polynomial.
const POLY: u32 = 0xEDB8_8320;

/// `a * b mod P` in the reflected representation (bit 31 is x^0).
fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        if m == 0 {
            break;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `x^(8 n) mod P`: the effect of appending `n` zero bytes.
fn x8nmodp(mut n: usize) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut sq = 1u32 << 23; // x^8
    while n != 0 {
        if n & 1 != 0 {
            p = multmodp(sq, p);
        }
        sq = multmodp(sq, sq);
        n >>= 1;
    }
    p
}

/// CRC register after `bytes` from a zero register, no final XOR.
fn crc_raw0(bytes: &[u8]) -> u32 {
    let mut c = 0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
        }
    }
    c
}

/// For an IPv4 packet received through a UDP socket, the IPv4 Identification is unknown.
/// Given the check made assuming ID 0 ([`check_socket`]) over `ib_len` bytes (BTH … ICRC),
/// find the ID that makes the ICRC correct, if any. The CRC is linear in the ID, so this is
/// a 16-unknown linear system; a random corruption passes with probability 2⁻¹⁶, so this
/// is a weaker check than an exact one and callers must report it as such.
pub fn recover_ipv4_ident(check: &Check, ib_len: usize) -> Option<u16> {
    if ib_len < BTH_LEN + ICRC_LEN {
        return None;
    }
    let target = check.received ^ check.computed;
    if target == 0 {
        return Some(0);
    }
    // ICRC input: 8 (LRH) + 20 (IPv4) + 8 (UDP) + BTH … pad; the ID is at bytes 12..14.
    let total = 8 + ipv4::HEADER_LEN + udp::HEADER_LEN + ib_len - ICRC_LEN;
    let shift = x8nmodp(total - 14);
    // basis: the CRC change caused by each ID bit
    let mut rows: [(u32, u16); 16] = [(0, 0); 16];
    for (j, row) in rows.iter_mut().enumerate() {
        let id = 1u16 << j;
        *row = (multmodp(shift, crc_raw0(&id.to_be_bytes())), id);
    }
    // Gaussian elimination over GF(2): reduce the target by the basis
    let mut t = (target, 0u16);
    let mut basis: Vec<(u32, u16)> = Vec::with_capacity(16);
    for mut r in rows {
        for b in &basis {
            if r.0 & top_bit(b.0) != 0 {
                r = (r.0 ^ b.0, r.1 ^ b.1);
            }
        }
        if r.0 != 0 {
            for b in basis.iter_mut() {
                if b.0 & top_bit(r.0) != 0 {
                    *b = (b.0 ^ r.0, b.1 ^ r.1);
                }
            }
            basis.push(r);
        }
    }
    for b in &basis {
        if t.0 & top_bit(b.0) != 0 {
            t = (t.0 ^ b.0, t.1 ^ b.1);
        }
    }
    (t.0 == 0).then_some(t.1)
}

fn top_bit(v: u32) -> u32 {
    1u32 << (31 - v.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrh_seed_matches_rxe() {
        // rxe seeds crc32_le with 0xDEBB20E3 = crc32_le(~0, 8 x 0xFF) (no final inversion)
        let mut h = crc32fast::Hasher::new();
        h.update(&LRH_STANDIN);
        assert_eq!(!h.finalize(), 0xDEBB_20E3);
    }

    #[test]
    fn masked_fields_do_not_change_the_crc() {
        let ip = socket_ipv4_header(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            8 + 12 + 4,
        );
        let udp = [0xC0, 0x00, 0x12, 0xB7, 0x00, 24, 0x00, 0x00];
        let bth = [0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x11, 0x80, 0, 0, 1];
        let a = compute(&ip, &udp, &bth).unwrap();
        let mut ip2 = ip;
        ip2[1] = 0xB9; // DSCP/ECN
        ip2[8] = 3; // TTL
        ip2[10] = 0x12; // checksum
        let mut udp2 = udp;
        udp2[6] = 0xAB; // UDP checksum
        let mut bth2 = bth;
        bth2[4] = 0xC0; // FECN + BECN
        assert_eq!(compute(&ip2, &udp2, &bth2).unwrap(), a);
        // an unmasked field (IPv4 identification) changes it
        let mut ip3 = ip;
        ip3[5] = 1;
        assert_ne!(compute(&ip3, &udp, &bth).unwrap(), a);
        // so does the PSN and the AckReq bit
        let mut bth3 = bth;
        bth3[8] = 0;
        assert_ne!(compute(&ip, &udp, &bth3).unwrap(), a);
    }

    #[test]
    fn fill_then_check() {
        let ip = socket_ipv4_header(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 8 + 12 + 3 + 1 + 4);
        let udp = [0x30, 0x00, 0x12, 0xB7, 0, 28, 0, 0];
        let mut ib = [
            0x24, 0x10, 0xFF, 0xFF, 0, 0, 0, 7, 0, 0, 0, 9, b'x', b'y', b'z', 0, 0, 0, 0, 0,
        ];
        let v = fill(&ip, &udp, &mut ib).unwrap();
        assert!(check(&ip, &udp, &ib).unwrap().ok());
        assert_eq!(check(&ip, &udp, &ib).unwrap().received, v);
        ib[13] ^= 1;
        assert!(!check(&ip, &udp, &ib).unwrap().ok());
    }

    #[test]
    fn socket_form_matches_full_datagram() {
        use crate::ib::{BthRepr, IbRepr, Opcode};
        use crate::roce::{IpParams, RocePacket, RoceRepr};
        for (s, d) in [
            (
                "10.0.0.1:49152".parse::<SocketAddr>().unwrap(),
                "10.0.0.2:4791".parse::<SocketAddr>().unwrap(),
            ),
            (
                "[fd00::1]:49152".parse().unwrap(),
                "[fd00::2]:4791".parse().unwrap(),
            ),
        ] {
            let ip = match (s.ip(), d.ip()) {
                (IpAddr::V4(a), IpAddr::V4(b)) => IpParams::v4(a, b),
                (IpAddr::V6(a), IpAddr::V6(b)) => IpParams::v6(a, b),
                _ => unreachable!(),
            };
            let r = RoceRepr {
                ip,
                src_port: s.port(),
                dst_port: d.port(),
                ib: IbRepr {
                    bth: BthRepr {
                        opcode: Opcode::RC_SEND_ONLY,
                        ..Default::default()
                    },
                    payload_len: 7,
                    ..Default::default()
                },
            };
            let mut full = vec![0u8; r.buffer_len()];
            r.emit(&mut full, b"payload").unwrap();
            let p = RocePacket::parse(&full).unwrap();
            let c = check_socket(s, d, p.ib.bytes()).unwrap();
            assert!(c.ok());
            let mut ib = p.ib.bytes().to_vec();
            let n = ib.len();
            ib[n - 4..].fill(0);
            fill_socket(s, d, &mut ib).unwrap();
            assert_eq!(ib, p.ib.bytes());
        }
    }

    #[test]
    fn recovers_an_unknown_ipv4_ident() {
        use crate::ib::{BthRepr, IbRepr, Opcode};
        use crate::roce::{IpParams, RocePacket, RoceRepr};
        let (s, d) = (
            "10.0.0.1:49152".parse::<SocketAddr>().unwrap(),
            "10.0.0.2:4791".parse::<SocketAddr>().unwrap(),
        );
        let (mut wrong, mut tried) = (0, 0);
        for (i, ident) in [0u16, 1, 0x1234, 0xFFFF, 0x8000, 77]
            .into_iter()
            .enumerate()
        {
            let mut ip = IpParams::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
            if let IpParams::V4 { ident: id, .. } = &mut ip {
                *id = ident;
            }
            let plen = 1 + i * 700;
            let r = RoceRepr {
                ip,
                src_port: 49152,
                dst_port: 4791,
                ib: IbRepr {
                    bth: BthRepr {
                        opcode: Opcode::RC_SEND_ONLY,
                        psn: 5,
                        ..Default::default()
                    },
                    payload_len: plen,
                    ..Default::default()
                },
            };
            let mut full = vec![0u8; r.buffer_len()];
            r.emit(&mut full, &vec![0x3C; plen]).unwrap();
            let ib = RocePacket::parse(&full).unwrap().ib.bytes().to_vec();
            let c = check_socket(s, d, &ib).unwrap();
            assert_eq!(c.ok(), ident == 0);
            assert_eq!(recover_ipv4_ident(&c, ib.len()), Some(ident));
            // corrupt a payload byte: some ID might still fit (2^-16), almost never
            for flip in 0..64 {
                let mut bad = ib.clone();
                let at = 12 + (flip * 7) % (ib.len() - 16);
                bad[at] ^= 1 << (flip % 8);
                let cb = check_socket(s, d, &bad).unwrap();
                tried += 1;
                if recover_ipv4_ident(&cb, bad.len()).is_some() {
                    wrong += 1;
                }
            }
        }
        assert!(wrong <= 1, "{wrong} of {tried} corruptions passed");
    }

    #[test]
    fn split_check_equals_one_pass_and_combiner_joins() {
        let (s, d) = (
            "10.0.0.1:49152".parse::<SocketAddr>().unwrap(),
            "10.0.0.2:4791".parse::<SocketAddr>().unwrap(),
        );
        for plen in [0usize, 1, 3, 100, 511, 512, 513, 1022, 4096] {
            let mut ib = vec![0x2A, 0, 0xFF, 0xFF, 0, 0, 0, 7, 0, 0, 0, 9];
            ib.extend_from_slice(&[1u8; 16]); // RETH
            ib.extend((0..plen).map(|i| i as u8));
            let pad = (4 - plen % 4) % 4;
            ib[1] = (pad as u8) << 4;
            ib.extend(std::iter::repeat_n(0u8, pad + 4));
            fill_socket(s, d, &mut ib).unwrap();
            let ip = match (s.ip(), d.ip()) {
                (IpAddr::V4(a), IpAddr::V4(b)) => socket_ipv4_header(a, b, 8 + ib.len()),
                _ => unreachable!(),
            };
            let (c, p) =
                check_socket_split(s, d, &ib, &ip, 28..28 + plen, &mut Combiner::default())
                    .unwrap();
            assert!(c.ok(), "plen {plen}");
            assert_eq!(p, crc32fast::hash(&ib[28..28 + plen]));
            let mut bad = ib.clone();
            let at = 30.min(bad.len() - 5);
            bad[at] ^= 1;
            assert!(
                !check_socket_split(s, d, &bad, &ip, 28..28 + plen, &mut Combiner::default())
                    .unwrap()
                    .0
                    .ok()
            );
        }
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut comb = Combiner::default();
        let mut acc = 0u32;
        for chunk in data.chunks(1408) {
            acc = comb.combine(acc, crc32fast::hash(chunk), chunk.len());
        }
        assert_eq!(acc, crc32fast::hash(&data));
        // past TABLE_AFTER repeats the table path takes over, also across other sizes
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13 + i / 7) as u8).collect();
        let mut acc = 0u32;
        let mut at = 0;
        for k in 0.. {
            let n = if k % 50 == 49 { 77 } else { 1024 };
            if at + n > data.len() {
                break;
            }
            let chunk = &data[at..at + n];
            acc = comb.combine(acc, crc32fast::hash(chunk), n);
            at += n;
            assert_eq!(acc, crc32fast::hash(&data[..at]), "after {k} pieces");
        }
        assert!(comb.table.is_some(), "table built");
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            IcrcHasher::new(&[0x45; 24], &[0; 8], &[0; 12]).unwrap_err(),
            Error::Unsupported
        );
        assert_eq!(
            IcrcHasher::new(&[0x65; 20], &[0; 8], &[0; 12]).unwrap_err(),
            Error::Unsupported
        );
        assert_eq!(
            IcrcHasher::new(&[0x45; 20], &[0; 7], &[0; 12]).unwrap_err(),
            Error::Malformed
        );
        assert_eq!(
            check(&[0x45; 20], &[0; 8], &[0; 15]).unwrap_err(),
            Error::Truncated
        );
    }
}
