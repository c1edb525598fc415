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
use core::net::Ipv4Addr;

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
        if udp_header.len() != udp::HEADER_LEN || bth.len() != BTH_LEN {
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
        buf[off..off + BTH_LEN].copy_from_slice(bth);
        buf[off + 4] = 0xFF;
        off += BTH_LEN;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&buf[..off]);
        Ok(IcrcHasher { crc })
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
