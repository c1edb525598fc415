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

    /// Hash the BTH's first 8 bytes (opcode through destination QP: what every packet of
    /// a flow to one QP shares), its variant byte masked; right after
    /// [`IcrcHasher::prefix`]. Continue with the BTH's last 4 bytes (AckReq and PSN).
    #[inline]
    pub fn update_bth_head(&mut self, head: &[u8; 8]) {
        let mut b = *head;
        b[4] = 0xFF;
        self.crc.update(&b);
    }

    /// Hash the BTH (its variant byte masked, as [`IcrcHasher::update_bth`]) and the
    /// extended headers after it; right after [`IcrcHasher::prefix`]. Headers of the usual
    /// size go to the CRC in one piece: two short updates cost more than the masked copy.
    #[inline]
    pub fn update_headers(&mut self, bth: &[u8; BTH_LEN], ext: &[u8]) {
        // the RETH alone, and with an ImmDt: buffers of a known size (no call to memset or
        // memmove per packet)
        match ext.len() {
            16 => self.update_masked::<{ BTH_LEN + 16 }>(bth, ext),
            20 => self.update_masked::<{ BTH_LEN + 20 }>(bth, ext),
            n if n <= 64 - BTH_LEN => self.update_masked::<64>(bth, ext),
            _ => {
                self.update_bth(bth);
                self.crc.update(ext);
            }
        }
    }

    /// [`IcrcHasher::update_headers`] through an `N`-byte buffer (`ext` fits in it).
    #[inline]
    fn update_masked<const N: usize>(&mut self, bth: &[u8; BTH_LEN], ext: &[u8]) {
        let mut b = [0u8; N];
        b[..BTH_LEN].copy_from_slice(bth);
        b[4] = 0xFF;
        let n = BTH_LEN + ext.len();
        b[BTH_LEN..n].copy_from_slice(ext);
        self.crc.update(&b[..n]);
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
    let u = socket_udp_header(src, dst, ib_len)?;
    let udp_len = udp::HEADER_LEN + ib_len;
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

pub use combine::{Combiner, TABLE_AFTER};
pub use recover::recover_ipv4_ident;

mod combine;
mod recover;

/// Payloads up to this many bytes are hashed twice by [`check_socket_pieces`] instead of
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
    let pieces = Pieces {
        headers: &ib_with_trailer[..payload.start],
        payload: &ib_with_trailer[payload.clone()],
        tail: &ib_with_trailer[payload.end..],
    };
    check_socket_pieces(src, dst, net_header, pieces, comb)
}

/// A received InfiniBand packet in three places: what the kernel put in a header buffer,
/// the payload where it landed (in a registered region, say), and the pad bytes with the
/// ICRC.
#[derive(Debug, Clone, Copy)]
pub struct Pieces<'a> {
    /// BTH and extended headers.
    pub headers: &'a [u8],
    /// The payload.
    pub payload: &'a [u8],
    /// Pad bytes, then the 4-byte ICRC.
    pub tail: &'a [u8],
}

/// [`check_socket_split`] for a packet in [`Pieces`]: the ICRC check, and the plain CRC-32
/// of the payload from the same single pass over it.
pub fn check_socket_pieces(
    src: SocketAddr,
    dst: SocketAddr,
    net_header: &[u8],
    p: Pieces<'_>,
    comb: &mut Combiner,
) -> Result<(Check, u32)> {
    let n = p.headers.len() + p.payload.len() + p.tail.len();
    let prefix = IcrcHasher::prefix(net_header, &socket_udp_header(src, dst, n)?)?;
    check_pieces(prefix, p, comb)
}

/// The UDP header of an `ib_len`-byte RoCE datagram from `src` to `dst` as the ICRC covers
/// it (the checksum is masked anyway).
pub fn socket_udp_header(src: SocketAddr, dst: SocketAddr, ib_len: usize) -> Result<[u8; 8]> {
    if udp::HEADER_LEN + ib_len > usize::from(u16::MAX) {
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
    Ok(u)
}

/// [`check_socket_pieces`] from the hash of the IP and UDP headers ([`IcrcHasher::prefix`]),
/// which every packet of a flow with the same length shares, so a receiver can keep it.
#[inline]
pub fn check_pieces(mut h: IcrcHasher, p: Pieces<'_>, comb: &mut Combiner) -> Result<(Check, u32)> {
    if p.headers.len() < BTH_LEN || p.tail.len() < ICRC_LEN {
        return Err(Error::Truncated);
    }
    let bth: &[u8; BTH_LEN] = p.headers[..BTH_LEN]
        .try_into()
        .map_err(|_| Error::Malformed)?;
    h.update_headers(bth, &p.headers[BTH_LEN..]);
    let (pad, t) = p.tail.split_at(p.tail.len() - ICRC_LEN);
    let received = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    // a reset clone, not `crc32fast::hash`: that detects the CPU's CRC code every call
    let mut ph = h.crc.clone();
    ph.reset();
    ph.update(p.payload);
    let pcrc = ph.finalize();
    if p.payload.len() <= SMALL {
        // hashing a small payload twice is cheaper than joining the CRCs
        h.update(p.payload);
        h.update(pad);
        return Ok((
            Check {
                received,
                computed: h.finalize(),
            },
            pcrc,
        ));
    }
    let head = h.finalize();
    let mut c = comb.combine(head, pcrc, p.payload.len());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_in_one_piece_hash_as_bth_then_extensions() {
        let ip = socket_ipv4_header(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 99);
        let udp = [0xC0, 0x00, 0x12, 0xB7, 0x00, 99, 0x00, 0x00];
        let bth = [0x2A, 0, 0xFF, 0xFF, 0x77, 0, 0, 0x11, 0x80, 0, 0, 1];
        // none, RETH-sized, RETH + ImmDt, the largest in one piece, and past it
        for n in [0, 16, 20, 52, 53, 200] {
            let ext: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let mut a = IcrcHasher::prefix(&ip, &udp).unwrap();
            a.update_bth(&bth);
            a.update(&ext);
            let mut b = IcrcHasher::prefix(&ip, &udp).unwrap();
            b.update_headers(&bth, &ext);
            assert_eq!(a.finalize(), b.finalize(), "{n} extension bytes");
        }
    }

    #[test]
    fn bth_head_then_the_rest_hashes_as_the_whole_bth() {
        let ip = socket_ipv4_header(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 99);
        let udp = [0xC0, 0x00, 0x12, 0xB7, 0x00, 99, 0x00, 0x00];
        // the variant byte set: masked either way
        let bth = [0x64, 0, 0xFF, 0xFF, 0xC0, 0, 0, 0x11, 0, 0, 0, 7];
        let mut a = IcrcHasher::prefix(&ip, &udp).unwrap();
        a.update_bth(&bth);
        let mut b = IcrcHasher::prefix(&ip, &udp).unwrap();
        b.update_bth_head(bth[..8].try_into().unwrap());
        b.update(&bth[8..]);
        assert_eq!(a.finalize(), b.finalize());
    }

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
            // the same packet in three buffers (the payload copied elsewhere)
            let elsewhere = ib[28..28 + plen].to_vec();
            let pieces = Pieces {
                headers: &ib[..28],
                payload: &elsewhere,
                tail: &ib[28 + plen..],
            };
            let (c2, p2) =
                check_socket_pieces(s, d, &ip, pieces, &mut Combiner::default()).unwrap();
            assert_eq!((c2, p2), (c, p));
            if plen > 0 {
                let mut other = elsewhere.clone();
                other[plen / 2] ^= 0x80;
                let bad = Pieces {
                    payload: &other,
                    ..pieces
                };
                let c3 = check_socket_pieces(s, d, &ip, bad, &mut Combiner::default());
                assert!(!c3.unwrap().0.ok(), "plen {plen}");
            }
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
