//! Layer-by-layer decoding of one captured frame, for `rocelink decode` and the fuzzers.
//!
//! [`dissect`] never panics: whatever the bytes, it returns what it could read and, in
//! [`Dissection::error`], the first layer it could not.

use crate::hsb::bootp::{self, EnumerationRepr, SetIpRepr};
use crate::hsb::ecb;
use crate::hsb::event::EventRepr;
use crate::hsb::metadata::{self, Endian, ImmLayout, Metadata};
use crate::ib::{IbRepr, Opcode};
use crate::icmpv4::{self, EchoRepr};
use crate::roce::{IpParams, RocePacket};
use crate::{Error, ROCE_V2_PORT, arp, ethernet, hsb, icrc, ipv4, ipv6, pfc, udp};

/// How the capture frames packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II (pcap link type 1).
    Ethernet,
    /// Raw IPv4 or IPv6 (pcap link types 101, 228, 229).
    RawIp,
}

/// Decoder options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Options {
    /// Decode HSB metadata, ECB, BOOTP and event traffic.
    pub hsb: bool,
    /// Byte order of HSB metadata records.
    pub metadata_endian: Endian,
    /// HSB immediate layout.
    pub imm_layout: ImmLayout,
    /// Another UDP port that carries RoCE v2 (0: none).
    pub roce_port: u16,
    /// Recognise RoCE v2 on any UDP port when the BTH parses and the ICRC verifies (HSB
    /// hosts receive on an ephemeral port).
    pub detect_roce: bool,
}

/// What kind of frame this is, at the highest layer decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// RoCE v2 (UDP 4791).
    Roce,
    /// ARP.
    Arp,
    /// ICMPv4.
    Icmp,
    /// Other UDP.
    Udp,
    /// 802.1Qbb PFC.
    Pfc,
    /// Anything else.
    Other,
}

impl Kind {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Roce => "roce",
            Kind::Arp => "arp",
            Kind::Icmp => "icmp",
            Kind::Udp => "udp",
            Kind::Pfc => "pfc",
            Kind::Other => "other",
        }
    }
}

/// Network layer as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpInfo {
    /// Addresses and variant fields.
    pub params: IpParams,
    /// IP protocol / next header.
    pub protocol: u8,
    /// IPv4 header checksum correct (always true for IPv6).
    pub checksum_ok: bool,
}

/// ICMPv4 as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmp {
    /// Echo request or reply.
    Echo(EchoRepr),
    /// Another message type.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
    },
}

/// RoCE v2 transport as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Roce {
    /// Headers.
    pub ib: IbRepr,
    /// ICRC as carried and as computed.
    pub icrc: icrc::Check,
    /// Pad bytes are all zero.
    pub pad_zero: bool,
}

/// HSB traffic (with [`Options::hsb`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hsb {
    /// A 0x2B frame-end packet: the record in the last 128 payload bytes and the immediate.
    Metadata {
        /// The record.
        md: Metadata,
        /// Page from the immediate.
        page: u32,
        /// PSN bits from the immediate.
        imm_psn: u32,
    },
    /// ECB request (to port 8192).
    EcbRequest {
        /// Command byte.
        command: ecb::Command,
        /// Flags.
        flags: u8,
        /// Sequence.
        sequence: u16,
        /// Operations.
        ops: Vec<(u32, Option<u32>)>,
    },
    /// ECB response (from port 8192).
    EcbResponse {
        /// Response command byte.
        command: u8,
        /// Flags.
        flags: u8,
        /// Sequence.
        sequence: u16,
        /// Status.
        status: ecb::Status,
        /// (address, data) pairs.
        ops: Vec<(u32, u32)>,
        /// Latched sequence trailer.
        latched: Option<u16>,
    },
    /// BOOTP enumeration request.
    Enumeration(EnumerationRepr),
    /// BOOTP set-IP reply.
    SetIp(SetIpRepr),
    /// Async event message.
    Event(EventRepr),
}

/// Everything read from one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dissection {
    /// Frame length.
    pub len: usize,
    /// Highest layer decoded.
    pub kind: Kind,
    /// Ethernet header, unless the capture is raw IP.
    pub eth: Option<ethernet::Repr>,
    /// ARP.
    pub arp: Option<arp::Repr>,
    /// PFC.
    pub pfc: Option<pfc::Repr>,
    /// IP layer.
    pub ip: Option<IpInfo>,
    /// ICMPv4.
    pub icmp: Option<Icmp>,
    /// UDP header.
    pub udp: Option<udp::Repr>,
    /// RoCE v2 transport.
    pub roce: Option<Roce>,
    /// HSB decoding.
    pub hsb: Option<Hsb>,
    /// The first layer that could not be read, and why.
    pub error: Option<(&'static str, Error)>,
}

/// Decode one frame.
pub fn dissect(frame: &[u8], link: LinkType, opts: &Options) -> Dissection {
    let mut d = Dissection {
        len: frame.len(),
        kind: Kind::Other,
        eth: None,
        arp: None,
        pfc: None,
        ip: None,
        icmp: None,
        udp: None,
        roce: None,
        hsb: None,
        error: None,
    };
    let net = match link {
        LinkType::RawIp => frame,
        LinkType::Ethernet => match ethernet::Frame::new_checked(frame) {
            Ok(f) => {
                let e = ethernet::Repr::parse(&f);
                d.eth = Some(e);
                let payload = f.payload();
                match e.ethertype {
                    ethernet::ethertype::ARP => {
                        d.kind = Kind::Arp;
                        match arp::Packet::new_checked(payload).and_then(|p| arp::Repr::parse(&p)) {
                            Ok(a) => d.arp = Some(a),
                            Err(err) => d.error = Some(("arp", err)),
                        }
                        return d;
                    }
                    ethernet::ethertype::MAC_CONTROL => {
                        match pfc::Packet::new_checked(payload).and_then(|p| pfc::Repr::parse(&p)) {
                            Ok(p) => {
                                d.kind = Kind::Pfc;
                                d.pfc = Some(p);
                            }
                            Err(err) => d.error = Some(("pfc", err)),
                        }
                        return d;
                    }
                    ethernet::ethertype::IPV4 | ethernet::ethertype::IPV6 => payload,
                    _ => return d,
                }
            }
            Err(err) => {
                d.error = Some(("ethernet", err));
                return d;
            }
        },
    };
    network(net, opts, &mut d);
    d
}

fn network(net: &[u8], opts: &Options, d: &mut Dissection) {
    let (info, l4) = match net.first().map(|b| b >> 4) {
        Some(4) => match ipv4::Packet::new_checked(net) {
            Ok(p) if p.header_len() == ipv4::HEADER_LEN => {
                let info = IpInfo {
                    params: IpParams::from_ipv4(&p),
                    protocol: p.protocol(),
                    checksum_ok: p.verify_checksum(),
                };
                if p.more_frags() || p.frag_offset() != 0 {
                    d.ip = Some(info);
                    d.error = Some(("ipv4", Error::Unsupported));
                    return;
                }
                (info, p.payload())
            }
            Ok(_) => {
                d.error = Some(("ipv4", Error::Unsupported));
                return;
            }
            Err(e) => {
                d.error = Some(("ipv4", e));
                return;
            }
        },
        Some(6) => match ipv6::Packet::new_checked(net) {
            Ok(p) => (
                IpInfo {
                    params: IpParams::from_ipv6(&p),
                    protocol: p.next_header(),
                    checksum_ok: true,
                },
                p.payload(),
            ),
            Err(e) => {
                d.error = Some(("ipv6", e));
                return;
            }
        },
        _ => {
            d.error = Some(("ip", Error::Malformed));
            return;
        }
    };
    d.ip = Some(info);
    match info.protocol {
        ipv4::protocol::ICMP if matches!(info.params, IpParams::V4 { .. }) => {
            d.kind = Kind::Icmp;
            match icmpv4::Packet::new_checked(l4) {
                Ok(p) => {
                    d.icmp = Some(match EchoRepr::parse(&p) {
                        Ok(e) => Icmp::Echo(e),
                        Err(Error::Malformed) => {
                            d.error = Some(("icmp", Error::Malformed));
                            Icmp::Other {
                                msg_type: p.msg_type(),
                                code: p.code(),
                            }
                        }
                        Err(_) => Icmp::Other {
                            msg_type: p.msg_type(),
                            code: p.code(),
                        },
                    })
                }
                Err(e) => d.error = Some(("icmp", e)),
            }
        }
        ipv4::protocol::UDP => transport(net, l4, opts, d),
        _ => {}
    }
}

fn transport(net: &[u8], l4: &[u8], opts: &Options, d: &mut Dissection) {
    let u = match udp::Packet::new_checked(l4) {
        Ok(u) => u,
        Err(e) => {
            d.error = Some(("udp", e));
            return;
        }
    };
    let ur = udp::Repr::parse(&u);
    d.udp = Some(ur);
    d.kind = Kind::Udp;
    // HSB data packets go from the device's data port to whatever port the host programmed
    let hsb_data = opts.hsb && ur.src_port == hsb::DATA_SOURCE_PORT;
    let named = ur.dst_port == ROCE_V2_PORT
        || (opts.roce_port != 0 && ur.dst_port == opts.roce_port)
        || hsb_data;
    // elsewhere, only what proves itself RoCE: a BTH that parses and an ICRC that verifies
    let detected = !named
        && opts.detect_roce
        && RocePacket::parse_port(net, None)
            .ok()
            .and_then(|p| p.icrc_check().ok())
            .is_some_and(|c| c.received == c.computed);
    if named || detected {
        d.kind = Kind::Roce;
        match RocePacket::parse_port(net, None) {
            Ok(p) => {
                let ib = IbRepr::parse(&p.ib);
                let check = match p.icrc_check() {
                    Ok(c) => c,
                    Err(e) => {
                        d.error = Some(("icrc", e));
                        return;
                    }
                };
                d.roce = Some(Roce {
                    ib,
                    icrc: check,
                    pad_zero: p.ib.pad().iter().all(|&b| b == 0),
                });
                if opts.hsb && ib.bth.opcode == Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE {
                    let payload = p.ib.payload();
                    if let (Some(imm), Some(rec)) = (
                        ib.immdt,
                        payload
                            .len()
                            .checked_sub(metadata::RECORD_LEN)
                            .map(|s| &payload[s..]),
                    ) {
                        match Metadata::parse(rec, opts.metadata_endian) {
                            Ok(md) => {
                                let (imm_psn, page) = opts.imm_layout.decode(imm);
                                d.hsb = Some(Hsb::Metadata { md, page, imm_psn });
                            }
                            Err(e) => d.error = Some(("hsb_metadata", e)),
                        }
                    }
                }
            }
            Err(e) => d.error = Some(("ib", e)),
        }
        return;
    }
    if opts.hsb {
        hsb_udp(&ur, u.payload(), d);
    }
}

fn hsb_udp(ur: &udp::Repr, payload: &[u8], d: &mut Dissection) {
    let ports = (ur.src_port, ur.dst_port);
    let result = if ports.1 == hsb::CONTROL_PORT {
        ecb::Request::new_checked(payload).map(|r| Hsb::EcbRequest {
            command: r.command(),
            flags: r.flags(),
            sequence: r.sequence(),
            ops: r.ops().collect(),
        })
    } else if ports.0 == hsb::CONTROL_PORT {
        ecb::Response::new_checked(payload).map(|r| Hsb::EcbResponse {
            command: r.command(),
            flags: r.flags(),
            sequence: r.sequence(),
            status: r.status(),
            ops: (0..r.op_count()).filter_map(|i| r.op(i)).collect(),
            latched: r.latched_sequence(),
        })
    } else if ports.1 == hsb::BOOTP_HOST_PORT || ports.1 == hsb::BOOTP_DEVICE_PORT {
        bootp::Packet::new_checked(payload).and_then(|p| match p.op() {
            1 => EnumerationRepr::parse(&p).map(Hsb::Enumeration),
            2 => SetIpRepr::parse(&p).map(Hsb::SetIp),
            _ => Err(Error::Malformed),
        })
    } else if ports.0 == hsb::EVENT_SOURCE_PORT {
        EventRepr::parse(payload).map(Hsb::Event)
    } else {
        return;
    };
    match result {
        Ok(h) => d.hsb = Some(h),
        Err(e) => d.error = Some(("hsb", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::{BthRepr, RethRepr};
    use crate::roce::RoceRepr;
    use core::net::Ipv4Addr;

    fn hsb_metadata_frame() -> Vec<u8> {
        metadata_frame_to(ROCE_V2_PORT)
    }

    fn metadata_frame_to(dst_port: u16) -> Vec<u8> {
        let md = Metadata {
            psn: 0x1005,
            crc: 0x1234_5678,
            bytes_written: 4096,
            frame_number: 3,
            ..Default::default()
        };
        let mut rec = [0u8; 128];
        md.emit(&mut rec, Endian::Big);
        let repr = RoceRepr {
            ip: IpParams::v4(
                Ipv4Addr::new(192, 168, 0, 2),
                Ipv4Addr::new(192, 168, 0, 101),
            ),
            src_port: hsb::DATA_SOURCE_PORT,
            dst_port,
            ib: IbRepr {
                bth: BthRepr {
                    opcode: Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                    dest_qp: 0xCAF0,
                    psn: 0x1005,
                    ..Default::default()
                },
                reth: Some(RethRepr {
                    va: 4096,
                    rkey: 0xBEEF,
                    dma_len: 128,
                }),
                immdt: Some(ImmLayout::Psn20Page12.encode(0x1005, 1)),
                payload_len: 128,
                ..Default::default()
            },
        };
        let mut frame = vec![0u8; 14 + repr.buffer_len()];
        ethernet::Repr {
            dst: crate::bytes::Mac([2, 0, 0, 0, 0, 1]),
            src: crate::bytes::Mac([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ethertype: ethernet::ethertype::IPV4,
        }
        .emit(&mut frame);
        repr.emit(&mut frame[14..], &rec).unwrap();
        frame
    }

    #[test]
    fn metadata_packet() {
        let f = hsb_metadata_frame();
        assert_eq!(f.len(), 206);
        let d = dissect(
            &f,
            LinkType::Ethernet,
            &Options {
                hsb: true,
                ..Default::default()
            },
        );
        assert_eq!(d.kind, Kind::Roce);
        assert!(d.roce.unwrap().icrc.ok());
        match d.hsb {
            Some(Hsb::Metadata { md, page, imm_psn }) => {
                assert_eq!(
                    (md.crc, md.frame_number, page, imm_psn),
                    (0x1234_5678, 3, 1, 0x1005)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(d.error, None);
        let plain = dissect(&f, LinkType::Ethernet, &Options::default());
        assert_eq!(plain.hsb, None);
    }

    #[test]
    fn roce_on_another_port_is_recognised_by_its_icrc_or_by_name() {
        let f = metadata_frame_to(40_001);
        let detect = Options {
            detect_roce: true,
            ..Default::default()
        };
        let named = Options {
            roce_port: 40_001,
            ..Default::default()
        };
        for opts in [detect, named] {
            let d = dissect(&f, LinkType::Ethernet, &opts);
            assert_eq!(d.kind, Kind::Roce, "{opts:?}");
            assert!(d.roce.unwrap().icrc.ok());
        }
        assert_eq!(
            dissect(&f, LinkType::Ethernet, &Options::default()).kind,
            Kind::Udp
        );
        // one flipped payload bit: no longer proven RoCE by detection, still RoCE by name
        let mut bad = f.clone();
        let n = bad.len() - 20;
        bad[n] ^= 1;
        assert_eq!(dissect(&bad, LinkType::Ethernet, &detect).kind, Kind::Udp);
        let d = dissect(&bad, LinkType::Ethernet, &named);
        assert!(d.kind == Kind::Roce && !d.roce.unwrap().icrc.ok());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let f = hsb_metadata_frame();
        let opts = Options {
            hsb: true,
            ..Default::default()
        };
        for n in 0..f.len() {
            let d = dissect(&f[..n], LinkType::Ethernet, &opts);
            assert!(d.error.is_some() || d.roce.is_none(), "len {n}");
        }
        for n in 0..f.len() - 14 {
            let _ = dissect(&f[14..14 + n], LinkType::RawIp, &opts);
        }
    }
}
