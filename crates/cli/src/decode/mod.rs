//! `rocelink decode`: a dissector that, unlike Wireshark, verifies the ICRC.

mod human;
mod json;

use anyhow::{Context, Result};
pub(crate) use human::to_human;
pub(crate) use json::to_json;
use rocelink_io::pcap::PcapReader;
use rocelink_wire::dissect::{Dissection, LinkType, Options, dissect};
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};
use serde_json::{Value, json};
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
    let opts = options(args);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut tally = Tally::default();
    for (index, rec) in reader.enumerate() {
        let rec = rec.with_context(|| format!("{}", args.file.display()))?;
        let d = match rec.network() {
            Some((link, off)) => dissect(&rec.data[off..], link, &opts),
            None => dissect(&[], LinkType::RawIp, &opts),
        };
        tally.add(&d);
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
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
    }
    out.flush()?;
    tally.report(args);
    Ok(if tally.icrc_failures > 0 && args.strict {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The dissector's options from the flags.
fn options(args: &Args) -> Options {
    Options {
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
    }
}

/// What a capture held.
#[derive(Debug, Default)]
struct Tally {
    packets: u64,
    roce: u64,
    hsb: u64,
    icrc_failures: u64,
    undecoded: u64,
}

impl Tally {
    fn add(&mut self, d: &Dissection) {
        self.packets += 1;
        self.roce += u64::from(d.roce.is_some());
        self.hsb += u64::from(d.hsb.is_some() && d.roce.is_none());
        self.icrc_failures += u64::from(d.roce.is_some_and(|r| !r.icrc.ok()));
        self.undecoded += u64::from(d.kind == rocelink_wire::dissect::Kind::Udp && d.hsb.is_none());
    }

    /// The summary on stderr.
    fn report(&self, args: &Args) {
        let Tally {
            packets,
            roce,
            hsb,
            icrc_failures,
            undecoded,
        } = *self;
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
        }
    }
}
