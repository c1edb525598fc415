//! `rocelink bench scale`: N camera streams at once, one sender and one receiver per stream,
//! each on CPUs of its own — the bare UDP sink, then rocelink's verified receiver — and
//! the goodput per receiver CPU as N grows (`rocelink_bench::scale`).

use anyhow::{Result, bail};
use rocelink_bench::StreamConfig;
use rocelink_bench::scale::{ScaleResult, cpus, scale};
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  rocelink bench scale                    # N = 1, 2 (a 2-core machine shares CPUs at N = 2)\n  rocelink bench scale --streams 1,2,4,8  # a 16-core machine: one CPU pair per stream\n  rocelink bench scale --rate 6.5 --payload 1408 --frame 10406576"
)]
pub(crate) struct ScaleArgs {
    /// Streams at once, comma-separated (each a sender and a receiver, on CPUs 2i and 2i+1).
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=64))]
    streams: Vec<u32>,
    /// Payload bytes per data packet (a multiple of 128).
    #[arg(long, default_value = "4096", value_parser = crate::args::usize_in(128, 8064))]
    payload: usize,
    /// Frame size.
    #[arg(long, default_value = "1048576", value_parser = crate::args::frame_size)]
    frame: usize,
    /// Seconds per receiver and N.
    #[arg(long, default_value = "3", value_parser = crate::args::secs_f64)]
    seconds: f64,
    /// Paced rate per stream in Gbit/s (default: unpaced).
    #[arg(long, value_parser = crate::args::rate)]
    rate: Option<f64>,
    /// JSON output (one object).
    #[arg(long)]
    json: bool,
}

fn row(s: &ScaleResult, r: &ScaleResult) -> serde_json::Value {
    json!({"streams": r.streams, "sink_gbps": s.gbps, "sink_gbps_per_cpu": s.gbps_per_cpu,
        "rocelink_gbps": r.gbps, "rocelink_gbps_per_cpu": r.gbps_per_cpu,
        "per_cpu_ratio": r.gbps_per_cpu / s.gbps_per_cpu.max(1e-9),
        "sink_loss": s.loss, "rocelink_loss": r.loss, "frames_damaged": r.damaged})
}

pub(crate) fn run(a: &ScaleArgs) -> Result<ExitCode> {
    if !a.payload.is_multiple_of(128) {
        bail!("--payload {}: a multiple of 128", a.payload);
    }
    let base = StreamConfig {
        payload: a.payload,
        frame: a.frame,
        seconds: a.seconds,
        rate_gbps: a.rate,
        ..StreamConfig::default()
    };
    let n: Vec<usize> = a.streams.iter().map(|&n| n as usize).collect();
    let cores = cpus();
    let rows: Vec<_> = scale(&base, &n)?.iter().map(|(s, r)| row(s, r)).collect();
    if a.json {
        println!(
            "{}",
            json!({"cpus": cores, "payload": a.payload, "frame": a.frame, "rows": rows})
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{cores} CPUs; {}-byte payloads, {}-byte frames, {} s per run",
        a.payload, a.frame, a.seconds
    );
    println!("streams  sink Gbit/s  per CPU  rocelink Gbit/s  per CPU  ratio  loss  damaged");
    for r in &rows {
        let shared = if r["streams"].as_u64().unwrap_or(0) as usize * 2 > cores {
            "  (CPUs shared)"
        } else {
            ""
        };
        println!(
            "{:>7}  {:>11.1}  {:>7.1}  {:>15.1}  {:>7.1}  {:>5.2}  {:>4.1}%  {:>7}{shared}",
            r["streams"],
            r["sink_gbps"].as_f64().unwrap_or(0.0),
            r["sink_gbps_per_cpu"].as_f64().unwrap_or(0.0),
            r["rocelink_gbps"].as_f64().unwrap_or(0.0),
            r["rocelink_gbps_per_cpu"].as_f64().unwrap_or(0.0),
            r["per_cpu_ratio"].as_f64().unwrap_or(0.0),
            r["rocelink_loss"].as_f64().unwrap_or(0.0) * 100.0,
            r["frames_damaged"]
        );
    }
    Ok(ExitCode::SUCCESS)
}
