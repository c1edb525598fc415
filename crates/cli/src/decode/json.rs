//! `decode --json`: one object per packet (keys in the manual's "decode --json").

use rocelink_wire::dissect::{Dissection, Hsb, Icmp, IpInfo, Roce};
use rocelink_wire::ethernet;
use rocelink_wire::ib::AethKind;
use rocelink_wire::roce::IpParams;
use serde_json::{Map, Value, json};

/// The JSON object of one packet.
pub(crate) fn to_json(index: usize, d: &Dissection) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("index".into(), json!(index));
    m.insert("len".into(), json!(d.len));
    m.insert("kind".into(), json!(d.kind.name()));
    if let Some(e) = &d.eth {
        eth_json(&mut m, e);
    }
    if let Some(a) = &d.arp {
        m.insert(
            "arp".into(),
            json!({"op": u16::from(a.operation), "sha": a.sha.to_string(), "spa": a.spa.to_string(),
                   "tha": a.tha.to_string(), "tpa": a.tpa.to_string()}),
        );
    }
    if let Some(p) = &d.pfc {
        m.insert(
            "pfc".into(),
            json!({"class_enable": p.class_enable, "quanta": p.quanta,
                   "classes": (0..8usize).filter(|c| p.class_enable & (1 << c) != 0)
                       .map(|c| json!({"class": c, "quanta": p.quanta[c], "pause": p.quanta[c] > 0}))
                       .collect::<Vec<_>>()}),
        );
    }
    if let Some(ip) = &d.ip {
        ip_json(&mut m, ip);
    }
    if let Some(i) = &d.icmp {
        let v = match i {
            Icmp::Echo(e) => {
                json!({"type": if e.request { 8 } else { 0 }, "code": 0, "ident": e.ident, "seq": e.seq})
            }
            Icmp::Other { msg_type, code } => json!({"type": msg_type, "code": code}),
        };
        m.insert("icmp".into(), v);
    }
    if let Some(u) = &d.udp {
        m.insert("src_port".into(), json!(u.src_port));
        m.insert("dst_port".into(), json!(u.dst_port));
        m.insert("udp_checksum".into(), json!(u.checksum));
    }
    if let Some(r) = &d.roce {
        bth_json(&mut m, r);
        ext_json(&mut m, r);
    }
    if let Some(h) = &d.hsb {
        let (k, v) = hsb_json(h);
        m.insert(k.into(), v);
    }
    if let Some((layer, e)) = d.error {
        m.insert("error".into(), json!(format!("{layer}: {e}")));
    }
    m
}

fn eth_json(m: &mut Map<String, Value>, e: &ethernet::Repr) {
    m.insert("src_mac".into(), json!(e.src.to_string()));
    m.insert("dst_mac".into(), json!(e.dst.to_string()));
    m.insert("ethertype".into(), json!(e.ethertype));
    if let Some(v) = e.vlan {
        m.insert(
            "vlan".into(),
            json!({"pcp": v.pcp, "dei": v.dei, "vid": v.vid}),
        );
    }
}

fn ip_json(m: &mut Map<String, Value>, ip: &IpInfo) {
    m.insert("src_ip".into(), json!(ip.params.src().to_string()));
    m.insert("dst_ip".into(), json!(ip.params.dst().to_string()));
    m.insert("ip_protocol".into(), json!(ip.protocol));
    let fields = match ip.params {
        IpParams::V4 {
            dscp,
            ecn,
            ttl,
            ident,
            dont_frag,
            ..
        } => json!({"ip_version": 4, "dscp": dscp, "sl": rocelink_ims::levels::sl_of_dscp(dscp),
                    "ecn": ecn, "ttl": ttl, "ip_id": ident,
                    "df": dont_frag, "ip_checksum_ok": ip.checksum_ok}),
        IpParams::V6 {
            traffic_class,
            flow_label,
            hop_limit,
            ..
        } => json!({"ip_version": 6, "dscp": traffic_class >> 2, "ecn": traffic_class & 3,
                    "flow_label": flow_label, "ttl": hop_limit}),
    };
    if let Value::Object(f) = fields {
        m.extend(f);
    }
}

fn bth_json(m: &mut Map<String, Value>, r: &Roce) {
    let b = &r.ib.bth;
    let v = json!({"opcode": b.opcode.0, "opcode_name": b.opcode.name(), "se": b.solicited,
                   "migreq": b.migreq, "pad_count": b.pad_count, "tver": b.tver, "pkey": b.pkey,
                   "fecn": b.fecn, "becn": b.becn, "dest_qp": b.dest_qp, "ack_req": b.ack_req,
                   "resv7": b.resv7, "psn": b.psn});
    if let Value::Object(f) = v {
        m.extend(f);
    }
}

/// The extended headers, the payload and the ICRC.
fn ext_json(m: &mut Map<String, Value>, r: &Roce) {
    let ib = &r.ib;
    m.insert(
        "reth".into(),
        ib.reth.map_or(
            Value::Null,
            |x| json!({"va": x.va, "rkey": x.rkey, "dma_len": x.dma_len}),
        ),
    );
    m.insert(
        "aeth".into(),
        ib.aeth.map_or(Value::Null, |x| {
            let kind = match x.kind() {
                AethKind::Ack { .. } => "ack".to_string(),
                AethKind::RnrNak { .. } => "rnr_nak".to_string(),
                AethKind::Nak(c) => format!("nak_{}", c.name()),
                AethKind::Reserved(_) => "reserved".to_string(),
            };
            json!({"syndrome": x.syndrome, "msn": x.msn, "type": kind})
        }),
    );
    m.insert(
        "deth".into(),
        ib.deth
            .map_or(Value::Null, |x| json!({"qkey": x.qkey, "src_qp": x.src_qp})),
    );
    m.insert("immdt".into(), json!(ib.immdt));
    m.insert("ieth".into(), json!(ib.ieth));
    if let Some(a) = ib.atomic_eth {
        m.insert(
            "atomic_eth".into(),
            json!({"va": a.va, "rkey": a.rkey, "swap_add": a.swap_add, "compare": a.compare}),
        );
    }
    if let Some(a) = ib.atomic_ack {
        m.insert("atomic_ack".into(), json!(a));
    }
    m.insert("payload_len".into(), json!(ib.payload_len));
    m.insert("pad_zero".into(), json!(r.pad_zero));
    m.insert("icrc".into(), json!(r.icrc.received));
    m.insert("icrc_computed".into(), json!(r.icrc.computed));
    m.insert("icrc_ok".into(), json!(r.icrc.ok()));
}

fn hsb_json(h: &Hsb) -> (&'static str, Value) {
    match h {
        Hsb::Metadata { md, page, imm_psn } => (
            "hsb_metadata",
            json!({"flags": md.flags, "psn": md.psn, "crc": md.crc, "sof_s": md.sof_s, "sof_ns": md.sof_ns,
                   "bytes_written": md.bytes_written, "frame_number": md.frame_number, "meta_s": md.meta_s,
                   "meta_ns": md.meta_ns, "page": page, "imm_psn": imm_psn}),
        ),
        Hsb::EcbRequest {
            command,
            flags,
            sequence,
            ops,
        } => (
            "ecb",
            json!({"direction": "request", "command": command.0, "command_name": command.name(), "flags": flags,
                   "sequence": sequence,
                   "ops": ops.iter().map(|(a, d)| json!({"address": a, "data": d})).collect::<Vec<_>>()}),
        ),
        Hsb::EcbResponse {
            command,
            flags,
            sequence,
            status,
            ops,
            latched,
        } => (
            "ecb",
            json!({"direction": "response", "command": command, "flags": flags, "sequence": sequence,
                   "status": status.0, "status_name": status.name(),
                   "ops": ops.iter().map(|(a, d)| json!({"address": a, "data": d})).collect::<Vec<_>>(),
                   "latched_sequence": latched}),
        ),
        Hsb::Enumeration(e) => (
            "bootp",
            json!({"op": 1, "xid": e.xid, "mac": e.mac.to_string(), "ciaddr": e.ciaddr.map(|a| a.to_string()),
                   "data_plane": e.vendor.data_plane, "hsb_ip_version": e.vendor.hsb_ip_version,
                   "fpga_crc": e.vendor.fpga_crc, "compat_id": e.vendor.compat_id,
                   "uuid": e.vendor.uuid_string(), "serial_number": e.vendor.serial_string(),
                   "tx_packet_count": e.vendor.tx_packet_count}),
        ),
        Hsb::SetIp(s) => (
            "bootp",
            json!({"op": 2, "xid": s.xid, "mac": s.mac().to_string(), "yiaddr": s.yiaddr.to_string(),
                   "siaddr": s.siaddr.to_string()}),
        ),
        Hsb::Event(e) => (
            "hsb_event",
            json!({"interrupt_active": e.interrupt_active, "interrupt_state": e.interrupt_state,
                   "seconds": e.seconds, "nanoseconds": e.nanoseconds}),
        ),
        _ => ("hsb", json!({})),
    }
}
