//! A whole RoCE v2 datagram at the IP layer: IPv4 or IPv6, UDP, IB transport packet, ICRC.
//!
//! ```
//! use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
//! use rocelink_wire::roce::{IpParams, RocePacket, RoceRepr};
//! use std::net::Ipv4Addr;
//!
//! let repr = RoceRepr {
//!     ip: IpParams::v4(Ipv4Addr::new(192, 168, 0, 2), Ipv4Addr::new(192, 168, 0, 101)),
//!     src_port: 12288,
//!     dst_port: 4791,
//!     ib: IbRepr {
//!         bth: BthRepr { opcode: Opcode::UC_RDMA_WRITE_ONLY, dest_qp: 0xCAF0, psn: 1, ..Default::default() },
//!         reth: Some(RethRepr { va: 0, rkey: 0xBEEF, dma_len: 4 }),
//!         payload_len: 4,
//!         ..Default::default()
//!     },
//! };
//! let mut buf = vec![0; repr.buffer_len()];
//! repr.emit(&mut buf, b"data").unwrap();
//! let pkt = RocePacket::parse(&buf).unwrap();
//! assert!(pkt.icrc_check().unwrap().ok());
//! assert_eq!(pkt.ib.payload(), b"data");
//! ```

use crate::ib::{IbPacket, IbRepr, pad_for};
use crate::{Error, ROCE_V2_PORT, Result, icrc, ipv4, ipv6, udp};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Network-layer parameters of a RoCE v2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpParams {
    /// IPv4.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
        /// DSCP.
        dscp: u8,
        /// ECN.
        ecn: u8,
        /// TTL.
        ttl: u8,
        /// Identification (covered by the ICRC).
        ident: u16,
        /// Don't fragment.
        dont_frag: bool,
    },
    /// IPv6.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
        /// Traffic class.
        traffic_class: u8,
        /// Flow label.
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
    },
}

impl IpParams {
    /// IPv4 as rxe and HSB send it: ToS 0, ID 0, DF, TTL 64.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr) -> IpParams {
        IpParams::V4 {
            src,
            dst,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            ident: 0,
            dont_frag: true,
        }
    }
    /// IPv6 with traffic class 0, flow label 0, hop limit 64.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr) -> IpParams {
        IpParams::V6 {
            src,
            dst,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        }
    }
    /// The fields of a checked IPv4 view.
    pub fn from_ipv4<T: AsRef<[u8]>>(p: &ipv4::Packet<T>) -> IpParams {
        IpParams::V4 {
            src: p.src(),
            dst: p.dst(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ttl: p.ttl(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        }
    }
    /// The fields of a checked IPv6 view.
    pub fn from_ipv6<T: AsRef<[u8]>>(p: &ipv6::Packet<T>) -> IpParams {
        IpParams::V6 {
            src: p.src(),
            dst: p.dst(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
        }
    }
    /// Source address.
    pub fn src(&self) -> IpAddr {
        match *self {
            IpParams::V4 { src, .. } => src.into(),
            IpParams::V6 { src, .. } => src.into(),
        }
    }
    /// Destination address.
    pub fn dst(&self) -> IpAddr {
        match *self {
            IpParams::V4 { dst, .. } => dst.into(),
            IpParams::V6 { dst, .. } => dst.into(),
        }
    }
    /// IP header length.
    pub fn header_len(&self) -> usize {
        match self {
            IpParams::V4 { .. } => ipv4::HEADER_LEN,
            IpParams::V6 { .. } => ipv6::HEADER_LEN,
        }
    }
}

/// A RoCE v2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceRepr {
    /// Network layer.
    pub ip: IpParams,
    /// UDP source port (flow entropy).
    pub src_port: u16,
    /// UDP destination port (4791).
    pub dst_port: u16,
    /// Transport packet.
    pub ib: IbRepr,
}

impl RoceRepr {
    /// Bytes from the IP header to the end of the ICRC.
    pub fn buffer_len(&self) -> usize {
        self.ip.header_len() + udp::HEADER_LEN + self.padded_ib().buffer_len()
    }

    /// The IB repr with the pad count that `payload_len` needs.
    fn padded_ib(&self) -> IbRepr {
        let mut ib = self.ib;
        ib.bth.pad_count = pad_for(ib.payload_len);
        ib
    }

    /// Write the datagram (IP, UDP with checksum 0, IB, pad, ICRC) into
    /// `buf[..buffer_len()]`. `payload` must be `ib.payload_len` bytes; the BTH pad count
    /// is set from it. Too large for the IP length field: [`Error::Malformed`].
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<()> {
        if payload.len() != self.ib.payload_len {
            return Err(Error::Malformed);
        }
        let ib = self.padded_ib();
        let ib_len = ib.buffer_len();
        let udp_len = udp::HEADER_LEN + ib_len;
        let total = self.ip.header_len() + udp_len;
        if buf.len() < total {
            return Err(Error::Truncated);
        }
        let ip_len = self.ip.header_len();
        match self.ip {
            IpParams::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl,
                ident,
                dont_frag,
            } => {
                if total > usize::from(u16::MAX) {
                    return Err(Error::Malformed);
                }
                ipv4::Repr {
                    src,
                    dst,
                    protocol: ipv4::protocol::UDP,
                    payload_len: udp_len,
                    dscp,
                    ecn,
                    ident,
                    dont_frag,
                    ttl,
                }
                .emit(&mut buf[..ip_len]);
            }
            IpParams::V6 {
                src,
                dst,
                traffic_class,
                flow_label,
                hop_limit,
            } => {
                if udp_len > usize::from(u16::MAX) {
                    return Err(Error::Malformed);
                }
                ipv6::Repr {
                    src,
                    dst,
                    next_header: ipv4::protocol::UDP,
                    payload_len: udp_len,
                    traffic_class,
                    flow_label,
                    hop_limit,
                }
                .emit(&mut buf[..ip_len]);
            }
        }
        let (ip_hdr, rest) = buf[..total].split_at_mut(ip_len);
        let (udp_hdr, ib_buf) = rest.split_at_mut(udp::HEADER_LEN);
        udp::Repr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            payload_len: ib_len,
            checksum: 0,
        }
        .emit(udp_hdr);
        ib.emit(ib_buf, payload);
        icrc::fill(ip_hdr, udp_hdr, ib_buf)?;
        Ok(())
    }
}

/// A parsed RoCE v2 datagram, borrowing the bytes.
#[derive(Debug, Clone)]
pub struct RocePacket<'a> {
    /// Network-layer fields.
    pub ip: IpParams,
    /// The IP header bytes as received.
    pub ip_header: &'a [u8],
    /// UDP header meaning.
    pub udp: udp::Repr,
    /// The UDP header bytes.
    pub udp_header: &'a [u8],
    /// The IB transport packet (BTH … ICRC).
    pub ib: IbPacket<&'a [u8]>,
}

impl<'a> RocePacket<'a> {
    /// Parse an IPv4 or IPv6 datagram carrying UDP to port 4791. Not UDP/4791, IPv4
    /// options or fragments: [`Error::Unsupported`]. The IPv4 header checksum is not
    /// checked here (the ICRC does not cover it); see [`ipv4::Packet::verify_checksum`].
    pub fn parse(ip: &'a [u8]) -> Result<RocePacket<'a>> {
        Self::parse_port(ip, Some(ROCE_V2_PORT))
    }

    /// As [`RocePacket::parse`], accepting any UDP destination port when `port` is `None`
    /// (HSB devices send RoCE packets to whatever port the host programmed).
    pub fn parse_port(ip: &'a [u8], port: Option<u16>) -> Result<RocePacket<'a>> {
        let (params, ip_header, l4, proto) = match ip.first().map(|b| b >> 4) {
            Some(4) => {
                let p = ipv4::Packet::new_checked(ip)?;
                if p.header_len() != ipv4::HEADER_LEN || p.more_frags() || p.frag_offset() != 0 {
                    return Err(Error::Unsupported);
                }
                (
                    IpParams::from_ipv4(&p),
                    p.header(),
                    p.payload(),
                    p.protocol(),
                )
            }
            Some(6) => {
                let p = ipv6::Packet::new_checked(ip)?;
                (
                    IpParams::from_ipv6(&p),
                    p.header(),
                    p.payload(),
                    p.next_header(),
                )
            }
            Some(_) => return Err(Error::Malformed),
            None => return Err(Error::Truncated),
        };
        if proto != ipv4::protocol::UDP {
            return Err(Error::Unsupported);
        }
        let u = udp::Packet::new_checked(l4)?;
        let udp = udp::Repr::parse(&u);
        if port.is_some_and(|p| udp.dst_port != p) {
            return Err(Error::Unsupported);
        }
        let ib = IbPacket::new_checked(u.payload())?;
        Ok(RocePacket {
            ip: params,
            ip_header,
            udp,
            udp_header: &l4[..udp::HEADER_LEN],
            ib,
        })
    }

    /// Verify the ICRC against the headers as received.
    pub fn icrc_check(&self) -> Result<icrc::Check> {
        icrc::check(self.ip_header, self.udp_header, self.ib.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::{BthRepr, DethRepr, Opcode};

    fn ud(ip: IpParams, payload_len: usize) -> RoceRepr {
        RoceRepr {
            ip,
            src_port: 0xC123,
            dst_port: ROCE_V2_PORT,
            ib: IbRepr {
                bth: BthRepr {
                    opcode: Opcode::UD_SEND_ONLY,
                    dest_qp: 0x12,
                    psn: 0xFFFFFF,
                    ..Default::default()
                },
                deth: Some(DethRepr {
                    qkey: 0x1111_1111,
                    src_qp: 0x34,
                }),
                payload_len,
                ..Default::default()
            },
        }
    }

    #[test]
    fn emit_parse_v4_and_v6_with_pad() {
        for ip in [
            IpParams::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            IpParams::v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
        ] {
            let r = ud(ip, 5);
            let mut buf = vec![0xA5; r.buffer_len()];
            r.emit(&mut buf, b"hello").unwrap();
            let p = RocePacket::parse(&buf).unwrap();
            assert!(p.icrc_check().unwrap().ok());
            assert_eq!(p.ib.payload(), b"hello");
            assert_eq!(p.ib.pad(), &[0, 0, 0]);
            let parsed = IbRepr::parse(&p.ib);
            assert_eq!(parsed.bth.pad_count, 3);
            assert_eq!(parsed.deth, r.ib.deth);
            assert_eq!(p.ip, ip);
            // flip one payload bit: ICRC must fail
            let at = buf.len() - 6;
            buf[at] ^= 0x40;
            assert!(!RocePacket::parse(&buf).unwrap().icrc_check().unwrap().ok());
        }
    }

    #[test]
    fn wrong_payload_len_and_port() {
        let r = ud(IpParams::v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST), 4);
        let mut buf = vec![0; r.buffer_len()];
        assert_eq!(r.emit(&mut buf, b"abc"), Err(Error::Malformed));
        r.emit(&mut buf, b"abcd").unwrap();
        buf[20 + 3] = 0x00; // dst port 4791 -> 4608
        assert_eq!(RocePacket::parse(&buf).unwrap_err(), Error::Unsupported);
    }
}
