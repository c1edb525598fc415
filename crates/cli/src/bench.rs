//! `rocelink bench stream`.

use anyhow::Result;
use rocelink_bench::{StreamConfig, StreamResult};
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub(crate) enum BenchCmd {
    /// Receive-path throughput: a bare UDP sink, HSB's recv()-per-packet receiver and
    /// rocelink's verified HSB receiver, against the same sender, in one run.
    Stream(StreamArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct StreamArgs {
    /// Payload bytes per data packet (multiple of 128).
    #[arg(long, default_value_t = 4096)]
    payload: usize,
    /// Frame size.
    #[arg(long, default_value_t = 1 << 20)]
    frame: usize,
    /// Seconds per receiver.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Paced rate in Gbit/s (default: unpaced).
    #[arg(long)]
    rate: Option<f64>,
    /// Send without UDP GSO.
    #[arg(long)]
    no_gso: bool,
    /// Receive without UDP GRO.
    #[arg(long)]
    no_gro: bool,
    /// Do not pin sender (CPU 0) and receiver (CPU 1).
    #[arg(long)]
    no_pin: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: &BenchCmd) -> Result<ExitCode> {
    let BenchCmd::Stream(a) = cmd;
    let cfg = StreamConfig {
        payload: a.payload,
        frame: a.frame,
        seconds: a.seconds,
        rate_gbps: a.rate,
        gso: !a.no_gso,
        gro: !a.no_gro,
        pin: !a.no_pin,
        ..StreamConfig::default()
    };
    let r = rocelink_bench::stream(&cfg)?;
    let by = |n: &str| r.iter().find(|x| x.name == n).map_or(0.0, |x| x.gbps);
    let (sink, recv1, ours) = (by("sink"), by("recv1"), by("rocelink"));
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    if a.json {
        let row = |x: &StreamResult| {
            json!({"name": x.name, "gbps": x.gbps, "pps": x.pps, "loss": x.loss, "cpu_percent": x.cpu_percent,
                   "sent": x.sent, "received": x.received, "frames_good": x.frames.0, "frames_damaged": x.frames.1})
        };
        println!(
            "{}",
            json!({"payload": a.payload, "frame": a.frame, "seconds": a.seconds, "rate_gbps": a.rate, "gso": !a.no_gso, "gro": !a.no_gro,
                   "results": r.iter().map(row).collect::<Vec<_>>(),
                   "ratio_rocelink_to_sink": ratio(ours, sink), "ratio_rocelink_to_recv1": ratio(ours, recv1)})
        );
    } else {
        println!(
            "payload {} B, frame {} B, {} s each, {}, GSO {}, GRO {}",
            a.payload,
            a.frame,
            a.seconds,
            a.rate
                .map_or("unpaced".to_string(), |r| format!("{r} Gbit/s")),
            if a.no_gso { "off" } else { "on" },
            if a.no_gro { "off" } else { "on" }
        );
        println!(
            "{:<10} {:>10} {:>12} {:>8} {:>8} {:>14}",
            "receiver", "Gbit/s", "pkts/s", "loss", "CPU %", "frames ok/bad"
        );
        for x in &r {
            println!(
                "{:<10} {:>10.2} {:>12.0} {:>7.2}% {:>8.1} {:>14}",
                x.name,
                x.gbps,
                x.pps,
                x.loss * 100.0,
                x.cpu_percent,
                if x.name == "sink" {
                    "-".to_string()
                } else {
                    format!("{}/{}", x.frames.0, x.frames.1)
                }
            );
        }
        println!(
            "rocelink / sink = {:.2}x, rocelink / recv1 = {:.2}x",
            ratio(ours, sink),
            ratio(ours, recv1)
        );
    }
    Ok(ExitCode::SUCCESS)
}
