//! `decode`'s text: one indented line per layer.

use rocelink_wire::dissect::{Dissection, Hsb, Icmp, IpInfo, Roce};
use rocelink_wire::roce::IpParams;
use rocelink_wire::{arp, ethernet, pfc, udp};
use std::fmt::Write as _;

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// One indented line per layer.
pub(crate) fn to_human(index: usize, d: &Dissection) -> String {
    let mut lines = vec![(0, format!("#{index} {} bytes", d.len))];
    let mut depth = 1;
    if let Some(e) = &d.eth {
        lines.push((depth, eth_line(e)));
        depth += 1;
    }
    if let Some(a) = &d.arp {
        lines.push((depth, arp_line(a)));
    }
    if let Some(p) = &d.pfc {
        lines.push((depth, pfc_line(p)));
    }
    if let Some(ip) = &d.ip {
        lines.push((depth, ip_line(ip)));
        depth += 1;
    }
    if let Some(i) = &d.icmp {
        lines.push((depth, icmp_line(i)));
    }
    if let Some(u) = &d.udp {
        lines.push((depth, udp_line(u)));
        depth += 1;
    }
    if let Some(r) = &d.roce {
        lines.push((depth, bth_line(r)));
        depth += 1;
        lines.extend(roce_lines(r).into_iter().map(|l| (depth, l)));
    }
    if let Some(h) = &d.hsb {
        lines.push((depth, hsb_human(h)));
    }
    if let Some((layer, e)) = d.error {
        lines.push((depth, format!("[{layer}: {e}]")));
    }
    let mut s = String::new();
    for (depth, text) in lines {
        let _ = writeln!(s, "{}{text}", "  ".repeat(depth));
    }
    s
}

fn eth_line(e: &ethernet::Repr) -> String {
    let vlan = e
        .vlan
        .map(|v| format!(" vlan {} pcp {}", v.vid, v.pcp))
        .unwrap_or_default();
    format!(
        "Ethernet {} > {} type {:#06x}{vlan}",
        e.src, e.dst, e.ethertype
    )
}

fn arp_line(a: &arp::Repr) -> String {
    format!(
        "ARP op {} {} ({}) > {} ({})",
        u16::from(a.operation),
        a.spa,
        a.sha,
        a.tpa,
        a.tha
    )
}

/// "PFC: class 0 pause 65535 quanta (3.4 ms at 10 Gbit/s), class 3 resume".
fn pfc_line(p: &pfc::Repr) -> String {
    let classes: Vec<String> = (0..8)
        .filter(|c| p.class_enable & (1 << c) != 0)
        .map(|c| match p.quanta[c] {
            0 => format!("class {c} resume"),
            q => format!(
                "class {c} pause {q} quanta ({:.1} µs at 10 Gbit/s)",
                f64::from(q) * 512.0 / 10e3
            ),
        })
        .collect();
    if classes.is_empty() {
        return "PFC: no class enabled".into();
    }
    format!("PFC: {}", classes.join(", "))
}

fn ip_line(ip: &IpInfo) -> String {
    let head = match ip.params {
        IpParams::V4 {
            dscp,
            ecn,
            ttl,
            ident,
            dont_frag,
            ..
        } => format!(
            "IPv4 dscp {dscp}{} ecn {ecn} ttl {ttl} id {ident}{}{}",
            // a class selector other than the default: the service level it carries
            match rocelink_ims::levels::sl_of_dscp(dscp) {
                Some(sl) if sl > 0 => format!(" (SL{sl})"),
                _ => String::new(),
            },
            if dont_frag { " DF" } else { "" },
            if ip.checksum_ok { "" } else { " BAD-CHECKSUM" }
        ),
        IpParams::V6 {
            traffic_class,
            flow_label,
            hop_limit,
            ..
        } => format!("IPv6 tc {traffic_class:#04x} flow {flow_label:#x} hlim {hop_limit}"),
    };
    format!(
        "{head} {} > {} proto {}",
        ip.params.src(),
        ip.params.dst(),
        ip.protocol
    )
}

fn icmp_line(i: &Icmp) -> String {
    match i {
        Icmp::Echo(e) => format!(
            "ICMP echo {} id {} seq {}",
            if e.request { "request" } else { "reply" },
            e.ident,
            e.seq
        ),
        Icmp::Other { msg_type, code } => format!("ICMP type {msg_type} code {code}"),
    }
}

fn udp_line(u: &udp::Repr) -> String {
    format!(
        "UDP {} > {} payload {}",
        u.src_port, u.dst_port, u.payload_len
    )
}

fn bth_line(r: &Roce) -> String {
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
    format!(
        "BTH {} qp {:#x} psn {} pkey {:#06x} pad {} tver {}{flags}",
        b.opcode, b.dest_qp, b.psn, b.pkey, b.pad_count, b.tver
    )
}

/// The extended headers, the payload and the ICRC.
fn roce_lines(r: &Roce) -> Vec<String> {
    let ib = &r.ib;
    let mut v = Vec::new();
    if let Some(x) = ib.deth {
        v.push(format!("DETH qkey {:#x} src_qp {:#x}", x.qkey, x.src_qp));
    }
    if let Some(x) = ib.reth {
        v.push(format!(
            "RETH va {} rkey {:#x} len {}",
            hex(x.va),
            x.rkey,
            x.dma_len
        ));
    }
    if let Some(x) = ib.atomic_eth {
        v.push(format!(
            "AtomicETH va {} rkey {:#x} swap/add {:#x} compare {:#x}",
            hex(x.va),
            x.rkey,
            x.swap_add,
            x.compare
        ));
    }
    if let Some(x) = ib.aeth {
        v.push(format!(
            "AETH syndrome {:#04x} ({:?}) msn {}",
            x.syndrome,
            x.kind(),
            x.msn
        ));
    }
    if let Some(x) = ib.atomic_ack {
        v.push(format!("AtomicAckETH {x:#x}"));
    }
    if let Some(x) = ib.immdt {
        v.push(format!("ImmDt {x:#010x}"));
    }
    if let Some(x) = ib.ieth {
        v.push(format!("IETH rkey {x:#x}"));
    }
    v.push(format!(
        "payload {} bytes{}",
        ib.payload_len,
        if r.pad_zero { "" } else { " (pad not zero)" }
    ));
    v.push(if r.icrc.ok() {
        format!("ICRC {:#010x} ok", r.icrc.received)
    } else {
        format!(
            "ICRC {:#010x} BAD (computed {:#010x})",
            r.icrc.received, r.icrc.computed
        )
    });
    v
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
