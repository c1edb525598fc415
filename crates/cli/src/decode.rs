//! `rocelink decode`: a dissector that, unlike Wireshark, verifies the ICRC.

use anyhow::{Context, Result};
use rocelink_io::pcap::PcapReader;
use rocelink_wire::dissect::{Dissection, Hsb, Icmp, LinkType, Options, dissect};
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};
use rocelink_wire::ib::AethKind;
use rocelink_wire::roce::IpParams;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Capture file (pcap or pcapng; Ethernet, raw IP or Linux cooked link type).
    file: PathBuf,
    /// One JSON object per packet, per line.
    #[arg(long)]
    json: bool,
    /// Decode Holoscan Sensor Bridge traffic: 0x2B metadata, ECB (8192), BOOTP (12267/12268), events (8432).
    #[arg(long)]
    hsb: bool,
    /// Read HSB metadata records little-endian (the dataplane document's layout) instead of
    /// big-endian (what devices send).
    #[arg(long)]
    metadata_le: bool,
    /// HSB immediate layout: `psn20-page12` (IP ≥ 0x2602) or `psn24-buf8` (0x2510).
    #[arg(long, default_value = "psn20-page12", value_parser = ["psn20-page12", "psn24-buf8"])]
    imm_layout: String,
    /// Exit with status 1 if any ICRC fails.
    #[arg(long)]
    strict: bool,
    /// Also decode this UDP destination port as RoCE v2 (besides 4791).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    roce_port: Option<u16>,
    /// Decode only the named ports as RoCE (by default a datagram on any port whose BTH
    /// parses and whose ICRC verifies is RoCE v2).
    #[arg(long)]
    no_detect: bool,
}

pub(crate) fn run(args: &Args) -> Result<ExitCode> {
    let f = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let reader = PcapReader::new(std::io::BufReader::new(f))
        .with_context(|| format!("{}", args.file.display()))?;
    let opts = Options {
        hsb: args.hsb,
        metadata_endian: if args.metadata_le {
            Endian::Little
        } else {
            Endian::Big
        },
        imm_layout: if args.imm_layout == "psn24-buf8" {
            ImmLayout::Psn24Buf8
        } else {
            ImmLayout::Psn20Page12
        },
        roce_port: args.roce_port.unwrap_or(0),
        detect_roce: !args.no_detect,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut icrc_failures = 0u64;
    let mut undecoded = 0u64;
    let (mut packets, mut roce, mut hsb) = (0u64, 0u64, 0u64);
    for (index, rec) in reader.enumerate() {
        let rec = rec.with_context(|| format!("{}", args.file.display()))?;
        let d = match rec.network() {
            Some((link, off)) => dissect(&rec.data[off..], link, &opts),
            None => dissect(&[], LinkType::RawIp, &opts),
        };
        packets += 1;
        roce += u64::from(d.roce.is_some());
        hsb += u64::from(d.hsb.is_some() && d.roce.is_none());
        if d.roce.is_some_and(|r| !r.icrc.ok()) {
            icrc_failures += 1;
        }
        if d.kind == rocelink_wire::dissect::Kind::Udp && d.hsb.is_none() {
            undecoded += 1;
        }
        let r = if args.json {
            let mut v = to_json(index, &d);
            v.insert("len".into(), json!(rec.data.len()));
            v.insert("ts_ns".into(), json!(rec.ts_ns));
            if rec.network().is_none() {
                v.insert("linktype".into(), json!(rec.linktype));
            }
            writeln!(out, "{}", Value::Object(v))
        } else {
            out.write_all(to_human(index, &d).as_bytes())
        };
        if let Err(e) = r {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e.into());
        }
    }
    out.flush()?;
    eprintln!(
        "rocelink decode: {packets} packets: {roce} RoCE v2 ({} ICRC verified, {icrc_failures} failed), {hsb} HSB control{}, {undecoded} UDP undecoded, {} other",
        roce - icrc_failures,
        if args.hsb {
            ""
        } else {
            " (--hsb decodes them)"
        },
        packets - roce - hsb - undecoded
    );
    if undecoded > 0 {
        eprintln!(
            "rocelink: {undecoded} UDP datagram(s) left undecoded (not RoCE v2 on 4791{}, and not proven RoCE by their ICRC{})",
            args.roce_port
                .map(|p| format!(" or {p}"))
                .unwrap_or_default(),
            if args.hsb {
                ", nor HSB control"
            } else {
                "; --hsb decodes HSB control traffic"
            }
        );
    }
    if icrc_failures > 0 {
        eprintln!("rocelink: {icrc_failures} packet(s) failed ICRC verification");
        if args.strict {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// The JSON object of one packet (keys documented in README "decode --json").
pub(crate) fn to_json(index: usize, d: &Dissection) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("index".into(), json!(index));
    m.insert("len".into(), json!(d.len));
    m.insert("kind".into(), json!(d.kind.name()));
    if let Some(e) = &d.eth {
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
            json!({"class_enable": p.class_enable, "quanta": p.quanta}),
        );
    }
    if let Some(ip) = &d.ip {
        m.insert("src_ip".into(), json!(ip.params.src().to_string()));
        m.insert("dst_ip".into(), json!(ip.params.dst().to_string()));
        m.insert("ip_protocol".into(), json!(ip.protocol));
        match ip.params {
            IpParams::V4 {
                dscp,
                ecn,
                ttl,
                ident,
                dont_frag,
                ..
            } => {
                m.insert("ip_version".into(), json!(4));
                m.insert("dscp".into(), json!(dscp));
                m.insert("ecn".into(), json!(ecn));
                m.insert("ttl".into(), json!(ttl));
                m.insert("ip_id".into(), json!(ident));
                m.insert("df".into(), json!(dont_frag));
                m.insert("ip_checksum_ok".into(), json!(ip.checksum_ok));
            }
            IpParams::V6 {
                traffic_class,
                flow_label,
                hop_limit,
                ..
            } => {
                m.insert("ip_version".into(), json!(6));
                m.insert("dscp".into(), json!(traffic_class >> 2));
                m.insert("ecn".into(), json!(traffic_class & 3));
                m.insert("flow_label".into(), json!(flow_label));
                m.insert("ttl".into(), json!(hop_limit));
            }
        }
    }
    if let Some(i) = &d.icmp {
        match i {
            Icmp::Echo(e) => m.insert(
                "icmp".into(),
                json!({"type": if e.request { 8 } else { 0 }, "code": 0, "ident": e.ident, "seq": e.seq}),
            ),
            Icmp::Other { msg_type, code } => m.insert("icmp".into(), json!({"type": msg_type, "code": code})),
        };
    }
    if let Some(u) = &d.udp {
        m.insert("src_port".into(), json!(u.src_port));
        m.insert("dst_port".into(), json!(u.dst_port));
        m.insert("udp_checksum".into(), json!(u.checksum));
    }
    if let Some(r) = &d.roce {
        let b = &r.ib.bth;
        m.insert("opcode".into(), json!(b.opcode.0));
        m.insert("opcode_name".into(), json!(b.opcode.name()));
        m.insert("se".into(), json!(b.solicited));
        m.insert("migreq".into(), json!(b.migreq));
        m.insert("pad_count".into(), json!(b.pad_count));
        m.insert("tver".into(), json!(b.tver));
        m.insert("pkey".into(), json!(b.pkey));
        m.insert("fecn".into(), json!(b.fecn));
        m.insert("becn".into(), json!(b.becn));
        m.insert("dest_qp".into(), json!(b.dest_qp));
        m.insert("ack_req".into(), json!(b.ack_req));
        m.insert("resv7".into(), json!(b.resv7));
        m.insert("psn".into(), json!(b.psn));
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
    if let Some(h) = &d.hsb {
        let (k, v) = hsb_json(h);
        m.insert(k.into(), v);
    }
    if let Some((layer, e)) = d.error {
        m.insert("error".into(), json!(format!("{layer}: {e}")));
    }
    m
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

/// `(address, data)` pairs as `0xADDR=0xDATA` (an address alone where no data word came),
/// at most four and a count.
fn ops_human<D: Into<Option<u32>> + Copy>(ops: &[(u32, D)], arrow: &str) -> String {
    let mut v: Vec<String> = ops
        .iter()
        .take(4)
        .map(|&(a, d)| match d.into() {
            Some(d) => format!("{a:#x}{arrow}{d:#x}"),
            None => format!("{a:#x}"),
        })
        .collect();
    if ops.len() > 4 {
        v.push(format!("… ({} in all)", ops.len()));
    }
    v.join(" ")
}

/// An HSB layer as one line of words, as the other layers print.
fn hsb_human(h: &Hsb) -> String {
    match h {
        Hsb::Metadata { md, page, imm_psn } => format!(
            "HSB metadata frame {} psn {} crc {:#010x} bytes {} page {page} imm psn {imm_psn} sof {}.{:09} meta {}.{:09} flags {:#x}",
            md.frame_number,
            md.psn,
            md.crc,
            md.bytes_written,
            md.sof_s,
            md.sof_ns,
            md.meta_s,
            md.meta_ns,
            md.flags
        ),
        Hsb::EcbRequest {
            command,
            flags,
            sequence,
            ops,
        } => format!(
            "ECB {} request seq {sequence} flags {flags:#x}: {}",
            command.name().unwrap_or("?"),
            ops_human(ops, if command.is_read() { "=" } else { "←" })
        ),
        Hsb::EcbResponse {
            command,
            sequence,
            status,
            ops,
            latched,
            ..
        } => format!(
            "ECB response {command:#04x} seq {sequence} {} (latched {}): {}",
            status.name().unwrap_or("?"),
            latched.map_or("-".to_owned(), |l| l.to_string()),
            ops_human(ops, "=")
        ),
        Hsb::Enumeration(e) => format!(
            "BOOTP announcement MAC {} HSB IP {:#06x} FPGA CRC {:#x} data plane {} serial {}",
            e.mac,
            e.vendor.hsb_ip_version,
            e.vendor.fpga_crc,
            e.vendor.data_plane,
            e.vendor.serial_string()
        ),
        Hsb::SetIp(x) => format!(
            "BOOTP set-IP MAC {} -> {} (host {})",
            x.mac(),
            x.yiaddr,
            x.siaddr
        ),
        Hsb::Event(e) => format!(
            "HSB event active {:#x} state {:#x} at {}.{:09}",
            e.interrupt_active, e.interrupt_state, e.seconds, e.nanoseconds
        ),
        _ => "HSB (unknown)".to_owned(),
    }
}

/// One indented line per layer.
pub(crate) fn to_human(index: usize, d: &Dissection) -> String {
    let mut s = String::new();
    let mut depth = 0usize;
    let mut line = |depth: usize, text: String| {
        let _ = writeln!(s, "{}{}", "  ".repeat(depth), text);
    };
    line(depth, format!("#{index} {} bytes", d.len));
    depth += 1;
    if let Some(e) = &d.eth {
        let vlan = e
            .vlan
            .map(|v| format!(" vlan {} pcp {}", v.vid, v.pcp))
            .unwrap_or_default();
        line(
            depth,
            format!(
                "Ethernet {} > {} type {:#06x}{vlan}",
                e.src, e.dst, e.ethertype
            ),
        );
        depth += 1;
    }
    if let Some(a) = &d.arp {
        line(
            depth,
            format!(
                "ARP op {} {} ({}) > {} ({})",
                u16::from(a.operation),
                a.spa,
                a.sha,
                a.tpa,
                a.tha
            ),
        );
    }
    if let Some(p) = &d.pfc {
        line(
            depth,
            format!(
                "PFC class-enable {:#04x} quanta {:?}",
                p.class_enable, p.quanta
            ),
        );
    }
    if let Some(ip) = &d.ip {
        let extra = match ip.params {
            IpParams::V4 {
                dscp,
                ecn,
                ttl,
                ident,
                dont_frag,
                ..
            } => format!(
                "IPv4 dscp {dscp} ecn {ecn} ttl {ttl} id {ident}{}{}",
                if dont_frag { " DF" } else { "" },
                if ip.checksum_ok { "" } else { " BAD-CHECKSUM" }
            ),
            IpParams::V6 {
                traffic_class,
                flow_label,
                hop_limit,
                ..
            } => {
                format!("IPv6 tc {traffic_class:#04x} flow {flow_label:#x} hlim {hop_limit}")
            }
        };
        line(
            depth,
            format!(
                "{extra} {} > {} proto {}",
                ip.params.src(),
                ip.params.dst(),
                ip.protocol
            ),
        );
        depth += 1;
    }
    if let Some(i) = &d.icmp {
        line(
            depth,
            match i {
                Icmp::Echo(e) => format!(
                    "ICMP echo {} id {} seq {}",
                    if e.request { "request" } else { "reply" },
                    e.ident,
                    e.seq
                ),
                Icmp::Other { msg_type, code } => format!("ICMP type {msg_type} code {code}"),
            },
        );
    }
    if let Some(u) = &d.udp {
        line(
            depth,
            format!(
                "UDP {} > {} payload {}",
                u.src_port, u.dst_port, u.payload_len
            ),
        );
        depth += 1;
    }
    if let Some(r) = &d.roce {
        let b = &r.ib.bth;
        let mut flags = String::new();
        for (on, name) in [
            (b.solicited, " SE"),
            (b.migreq, " M"),
            (b.fecn, " FECN"),
            (b.becn, " BECN"),
            (b.ack_req, " A"),
        ] {
            if on {
                flags.push_str(name);
            }
        }
        if b.resv7 != 0 {
            flags.push_str(&format!(" resv7 {:#x}", b.resv7));
        }
        line(
            depth,
            format!(
                "BTH {} qp {:#x} psn {} pkey {:#06x} pad {} tver {}{flags}",
                b.opcode, b.dest_qp, b.psn, b.pkey, b.pad_count, b.tver
            ),
        );
        depth += 1;
        let ib = &r.ib;
        if let Some(x) = ib.deth {
            line(
                depth,
                format!("DETH qkey {:#x} src_qp {:#x}", x.qkey, x.src_qp),
            );
        }
        if let Some(x) = ib.reth {
            line(
                depth,
                format!("RETH va {} rkey {:#x} len {}", hex(x.va), x.rkey, x.dma_len),
            );
        }
        if let Some(x) = ib.atomic_eth {
            line(
                depth,
                format!(
                    "AtomicETH va {} rkey {:#x} swap/add {:#x} compare {:#x}",
                    hex(x.va),
                    x.rkey,
                    x.swap_add,
                    x.compare
                ),
            );
        }
        if let Some(x) = ib.aeth {
            line(
                depth,
                format!(
                    "AETH syndrome {:#04x} ({:?}) msn {}",
                    x.syndrome,
                    x.kind(),
                    x.msn
                ),
            );
        }
        if let Some(x) = ib.atomic_ack {
            line(depth, format!("AtomicAckETH {x:#x}"));
        }
        if let Some(x) = ib.immdt {
            line(depth, format!("ImmDt {x:#010x}"));
        }
        if let Some(x) = ib.ieth {
            line(depth, format!("IETH rkey {x:#x}"));
        }
        line(
            depth,
            format!(
                "payload {} bytes{}",
                ib.payload_len,
                if r.pad_zero { "" } else { " (pad not zero)" }
            ),
        );
        line(
            depth,
            if r.icrc.ok() {
                format!("ICRC {:#010x} ok", r.icrc.received)
            } else {
                format!(
                    "ICRC {:#010x} BAD (computed {:#010x})",
                    r.icrc.received, r.icrc.computed
                )
            },
        );
    }
    if let Some(h) = &d.hsb {
        line(depth, hsb_human(h));
    }
    if let Some((layer, e)) = d.error {
        line(depth, format!("[{layer}: {e}]"));
    }
    s
}
