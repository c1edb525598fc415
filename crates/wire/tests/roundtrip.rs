//! Property tests: for every `Repr`, parse(emit(r)) == r; and no parser panics on any bytes.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::{bootp, ecb, event, metadata};
use rocelink_wire::ib::{self, BthRepr, IbPacket, IbRepr, Opcode};
use rocelink_wire::ims;
use rocelink_wire::roce::{IpParams, RocePacket, RoceRepr};
use rocelink_wire::{arp, dissect, ethernet, icmpv4, ipv4, ipv6, pfc, udp};
use std::net::{Ipv4Addr, Ipv6Addr};

fn mac() -> impl Strategy<Value = Mac> {
    any::<[u8; 6]>().prop_map(Mac)
}
fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}
fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn defined_opcode() -> impl Strategy<Value = Opcode> {
    any::<u8>().prop_filter_map("defined", |o| Opcode(o).headers().map(|_| Opcode(o)))
}

fn bth() -> impl Strategy<Value = BthRepr> {
    (
        defined_opcode(),
        any::<[bool; 6]>(),
        0u8..4,
        any::<u16>(),
        0u32..1 << 24,
        0u32..1 << 24,
        0u8..0x80,
    )
        .prop_map(
            |(opcode, f, pad_count, pkey, dest_qp, psn, resv7)| BthRepr {
                opcode,
                solicited: f[0],
                migreq: f[1],
                pad_count,
                tver: 0,
                pkey,
                fecn: f[2],
                becn: f[3],
                dest_qp,
                ack_req: f[4],
                resv7,
                psn,
            },
        )
}

/// An IbRepr whose optional headers are exactly those of its opcode.
fn ib_repr() -> impl Strategy<Value = IbRepr> {
    (
        bth(),
        any::<(u64, u32, u32)>(),
        any::<(u8, u32)>(),
        any::<(u32, u32)>(),
        any::<(u64, u64, u32)>(),
        0usize..600,
    )
        .prop_map(
            |(bth, (va, rkey, len), (syn, msn), (qkey, sqp), (x, y, z), plen)| {
                let set = bth.opcode.headers().expect("defined opcode");
                let has = |h| set.has(h);
                let payload_len = if has(ib::HeaderSet::PAYLOAD) { plen } else { 0 };
                let mut bth = bth;
                bth.pad_count = ib::pad_for(payload_len);
                IbRepr {
                    bth,
                    rdeth: has(ib::HeaderSet::RDETH).then_some(z & 0xFF_FFFF),
                    deth: has(ib::HeaderSet::DETH).then_some(ib::DethRepr {
                        qkey,
                        src_qp: sqp & 0xFF_FFFF,
                    }),
                    reth: has(ib::HeaderSet::RETH).then_some(ib::RethRepr {
                        va,
                        rkey,
                        dma_len: len,
                    }),
                    atomic_eth: has(ib::HeaderSet::ATOMIC_ETH).then_some(ib::AtomicEthRepr {
                        va,
                        rkey,
                        swap_add: x,
                        compare: y,
                    }),
                    aeth: has(ib::HeaderSet::AETH).then_some(ib::AethRepr {
                        syndrome: syn,
                        msn: msn & 0xFF_FFFF,
                    }),
                    atomic_ack: has(ib::HeaderSet::ATOMIC_ACK_ETH).then_some(x),
                    immdt: has(ib::HeaderSet::IMMDT).then_some(z),
                    ieth: has(ib::HeaderSet::IETH).then_some(rkey),
                    payload_len,
                }
            },
        )
}

proptest! {
    #[test]
    fn ethernet_round_trip(dst in mac(), src in mac(), tag in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)), et in any::<u16>()) {
        prop_assume!(et != ethernet::ethertype::VLAN);
        let r = ethernet::Repr { dst, src, vlan: tag.map(|(pcp, dei, vid)| ethernet::VlanTag { pcp, dei, vid }), ethertype: et };
        let mut b = vec![0u8; r.buffer_len() + 4];
        r.emit(&mut b);
        prop_assert_eq!(ethernet::Repr::parse(&ethernet::Frame::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn arp_round_trip(op in 1u16..3, sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let r = arp::Repr { operation: op.into(), sha, spa, tha, tpa };
        let mut b = [0u8; 28];
        r.emit(&mut b);
        prop_assert_eq!(arp::Repr::parse(&arp::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_round_trip(src in v4(), dst in v4(), protocol in any::<u8>(), plen in 0usize..2000, dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(), df in any::<bool>(), ttl in any::<u8>()) {
        let r = ipv4::Repr { src, dst, protocol, payload_len: plen, dscp, ecn, ident, dont_frag: df, ttl };
        let mut b = vec![0u8; 20 + plen];
        r.emit(&mut b);
        let p = ipv4::Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(ipv4::Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn ipv6_round_trip(src in v6(), dst in v6(), nh in any::<u8>(), plen in 0usize..2000, tc in any::<u8>(), fl in 0u32..1 << 20, hl in any::<u8>()) {
        let r = ipv6::Repr { src, dst, next_header: nh, payload_len: plen, traffic_class: tc, flow_label: fl, hop_limit: hl };
        let mut b = vec![0u8; 40 + plen];
        r.emit(&mut b);
        prop_assert_eq!(ipv6::Repr::parse(&ipv6::Packet::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn udp_round_trip(s in any::<u16>(), d in any::<u16>(), plen in 0usize..2000, c in any::<u16>()) {
        let r = udp::Repr { src_port: s, dst_port: d, payload_len: plen, checksum: c };
        let mut b = vec![0u8; 8 + plen];
        r.emit(&mut b);
        prop_assert_eq!(udp::Repr::parse(&udp::Packet::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn icmp_round_trip(req in any::<bool>(), ident in any::<u16>(), seq in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let r = icmpv4::EchoRepr { request: req, ident, seq, data_len: data.len() };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b, &data);
        prop_assert_eq!(icmpv4::EchoRepr::parse(&icmpv4::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn pfc_round_trip(cev in any::<u8>(), quanta in any::<[u16; 8]>()) {
        let r = pfc::Repr { class_enable: cev, quanta };
        let mut b = [0u8; 20];
        r.emit(&mut b);
        prop_assert_eq!(pfc::Repr::parse(&pfc::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn bth_round_trip(r in bth()) {
        let mut b = [0u8; 12];
        r.emit(&mut ib::Bth::new_unchecked(&mut b[..]));
        prop_assert_eq!(BthRepr::parse(&ib::Bth::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn ib_packet_round_trip(r in ib_repr(), fill in any::<u8>()) {
        let payload = vec![fill; r.payload_len];
        let mut b = vec![0xA5u8; r.buffer_len()];
        r.emit(&mut b, &payload);
        let p = IbPacket::new_checked(&b[..]).unwrap();
        prop_assert_eq!(IbRepr::parse(&p), r);
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert!(p.pad().iter().all(|&x| x == 0));
    }

    #[test]
    fn roce_round_trip_and_icrc(ib in ib_repr(), v6_ in any::<bool>(), a in v4(), b in v4(), c in v6(), d in v6(), sport in any::<u16>(), flip in any::<usize>()) {
        let ip = if v6_ { IpParams::v6(c, d) } else { IpParams::v4(a, b) };
        let r = RoceRepr { ip, src_port: sport, dst_port: 4791, ib };
        let payload: Vec<u8> = (0..ib.payload_len).map(|i| i as u8).collect();
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, &payload).unwrap();
        let p = RocePacket::parse(&buf).unwrap();
        prop_assert!(p.icrc_check().unwrap().ok());
        prop_assert_eq!(IbRepr::parse(&p.ib), ib);
        prop_assert_eq!(p.ip, ip);
        // flip one bit anywhere after the IP header's masked fields: the ICRC catches it
        let ip_len = ip.header_len();
        let masked: &[usize] = if v6_ { &[0, 1, 2, 3, 7, 46, 47, 52] } else { &[1, 8, 10, 11, 26, 27, 32] };
        let at = ip_len + 8 + flip % (buf.len() - ip_len - 8);
        prop_assume!(!masked.contains(&at));
        let mut bad = buf.clone();
        bad[at] ^= 1 << (flip % 8);
        if let Ok(p) = RocePacket::parse(&bad) {
            prop_assert!(!p.icrc_check().unwrap().ok());
        }
    }

    #[test]
    fn metadata_round_trip(md in any::<(u32, u32, u32, u64, u32, u64, u32, u64, u32)>(), le in any::<bool>()) {
        let m = metadata::Metadata { flags: md.0, psn: md.1 & 0xFF_FFFF, crc: md.2, sof_s: md.3, sof_ns: md.4, bytes_written: md.5, frame_number: md.6, meta_s: md.7, meta_ns: md.8 };
        let e = if le { metadata::Endian::Little } else { metadata::Endian::Big };
        let mut b = [0u8; 128];
        m.emit(&mut b, e);
        prop_assert_eq!(metadata::Metadata::parse(&b, e).unwrap(), m);
    }

    #[test]
    fn immediate_round_trip(psn in 0u32..1 << 24, page in 0u32..4096, buf in 0u32..4) {
        let l = metadata::ImmLayout::Psn20Page12;
        prop_assert_eq!(l.decode(l.encode(psn, page)), (psn & 0xF_FFFF, page));
        let o = metadata::ImmLayout::Psn24Buf8;
        prop_assert_eq!(o.decode(o.encode(psn, buf)), (psn, buf));
    }

    #[test]
    fn ecb_round_trip(cmd in prop::sample::select(vec![0x04u8, 0x09, 0x14, 0x19]), flags in 0u8..4, seq in any::<u16>(), ops in proptest::collection::vec(any::<(u32, u32)>(), 1..20), four in any::<bool>(), status in any::<u8>()) {
        let command = ecb::Command(cmd);
        let ops = if cmd & 0x0F == 4 { ops[..1].to_vec() } else { ops };
        let mut out = Vec::new();
        ecb::RequestHeader { command, flags, sequence: seq }.emit(&ops, &mut out);
        let r = ecb::Request::new_checked(&out[..]).unwrap();
        prop_assert_eq!((r.command(), r.flags(), r.sequence(), r.op_count()), (command, flags, seq, ops.len()));
        for (i, (a, d)) in ops.iter().enumerate() {
            let want = if command.is_read() { if command == ecb::Command::RD_DWORD { None } else { Some(0) } } else { Some(*d) };
            prop_assert_eq!(r.op(i), Some((*a, want)));
        }
        let mut resp = Vec::new();
        let t = if four { ecb::Trailer::Four } else { ecb::Trailer::Two };
        ecb::ResponseHeader { command: command.response(), flags, sequence: seq, status: ecb::Status(status) }.emit(&ops, seq, t, &mut resp);
        let p = ecb::Response::new_checked(&resp[..]).unwrap();
        prop_assert_eq!(p.status(), ecb::Status(status));
        prop_assert_eq!(p.latched_sequence(), Some(seq));
        prop_assert_eq!((0..p.op_count()).filter_map(|i| p.op(i)).collect::<Vec<_>>(), ops);
    }

    #[test]
    fn bootp_round_trip(xid in any::<u32>(), secs in any::<u16>(), flags in any::<u16>(), ci in v4(), m in mac(), dp in any::<u8>(), compat in any::<u16>(), uuid in any::<[u8; 16]>(), cnt in 0u32..1 << 24, serial in any::<[u8; 7]>(), ver in any::<u16>(), crc in any::<u16>(), ptp_s in 0u64..1 << 48, ptp_ns in any::<u32>(), seq in any::<u16>(), st in any::<u8>(), tl in any::<u8>(), y in v4(), s in v4()) {
        prop_assume!(!ci.is_unspecified());
        let e = bootp::EnumerationRepr { xid, secs, flags, ciaddr: Some(ci), mac: m, vendor: bootp::VendorV2 { tag_len: tl, data_plane: dp, compat_id: compat, uuid, tx_packet_count: cnt, serial, hsb_ip_version: ver, fpga_crc: crc, ptp_s, ptp_ns, bootp_seq: seq, status: st } };
        let mut b = [0u8; 300];
        e.emit(&mut b);
        let p = bootp::Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(bootp::EnumerationRepr::parse(&p).unwrap(), e);
        let r = bootp::SetIpRepr::answering(&p, y, s);
        let mut o = [0u8; 300];
        r.emit(&mut o);
        prop_assert_eq!(bootp::SetIpRepr::parse(&bootp::Packet::new_checked(&o[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn event_round_trip(a in any::<u32>(), s in any::<u32>(), sec in 0u64..1 << 48, ns in any::<u32>()) {
        let e = event::EventRepr { interrupt_active: a, interrupt_state: s, seconds: sec, nanoseconds: ns };
        let mut b = [0u8; 18];
        e.emit(&mut b);
        prop_assert_eq!(event::EventRepr::parse(&b).unwrap(), e);
    }

    #[test]
    fn ims_round_trip(m in 0u8..8, w in any::<(u8, u8, u32, u32, u32, u64, u32)>(), nack in any::<bool>(), ev in 0u32..1 << 12, va in any::<u64>()) {
        let s = ims::StatusRepr { major: w.0, minor: w.1, method: ims::Method::from_code(m).unwrap(), lid: w.2, qpn: w.3, qkey_or_qpnd: w.4, va: w.5, rkey: w.6 };
        let mut b = [0u8; 28];
        s.emit(&mut b);
        prop_assert_eq!(ims::StatusRepr::parse(&b).unwrap(), s);
        let a = ims::AckRepr { kind: if nack { ims::AckType::Nack } else { ims::AckType::Ack }, events: ims::Events(ev), va };
        let mut c = [0u8; 16];
        a.emit(&mut c);
        prop_assert_eq!(ims::AckRepr::parse(&c).unwrap(), a);
    }

    #[test]
    fn ims_image_round_trip(cols in 1usize..8, rows in 1usize..40, six in any::<bool>(), va in any::<u64>(), seed in any::<u64>()) {
        let depth = if six { ims::PixelDepth::Six } else { ims::PixelDepth::Four };
        let g = ims::ImageGeometry { columns: cols, rows };
        let max = if six { 64 } else { 16 };
        let px: Vec<u8> = (0..cols * rows).map(|i| ((seed >> (i % 57)) as usize + i) as u8 % max).collect();
        let mut out = vec![0u8; g.encoded_len(depth)];
        ims::image::encode(&px, g, depth, va, &mut out).unwrap();
        let d = ims::image::decode(&out, g, depth).unwrap();
        prop_assert!(d.crc_ok);
        prop_assert_eq!(d.va, va);
        prop_assert_eq!(d.pixels, px);
    }

    #[test]
    fn nothing_panics_on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..400)) {
        for link in [dissect::LinkType::Ethernet, dissect::LinkType::RawIp] {
            let _ = dissect::dissect(&b, link, &dissect::Options { hsb: true, ..Default::default() });
        }
        let _ = RocePacket::parse(&b);
        if let Ok(p) = IbPacket::new_checked(&b[..]) { let _ = IbRepr::parse(&p); let _ = p.payload(); let _ = p.pad(); }
        if let Ok(r) = ecb::Request::new_checked(&b[..]) { let _ = r.ops().count(); }
        if let Ok(r) = ecb::Response::new_checked(&b[..]) { let _ = r.latched_sequence(); for i in 0..=r.op_count() { let _ = r.op(i); } }
        let _ = metadata::Metadata::parse(&b, metadata::Endian::Big);
        let _ = ims::StatusRepr::parse(&b);
        let _ = ims::AckRepr::parse(&b);
        let _ = ims::image::decode(&b, ims::ImageGeometry { columns: 3, rows: 5 }, ims::PixelDepth::Four);
        let _ = rocelink_wire::ib::grh::parse(&b);
    }
}
