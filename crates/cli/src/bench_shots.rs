//! `rocelink bench shots`: frame rate and bandwidth against trigger frequency per shot size,
//! RoCE UD against plain UDP in the same run (`rocelink_bench::shots`), the paper's Table I
//! and, with `--plot`, its Fig. 5 and 6.

use anyhow::Result;
use rocelink_bench::shots::rounds::{self, Figure, Plan, Rounds};
use rocelink_bench::shots::{Ends, Point, Proto};
use rocelink_ultrasound::Geometry;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct ShotsArgs {
    /// Shot sizes: samples per channel (N_s), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000,4000",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    samples: Vec<u32>,
    /// Channels (one link of the paper's probe: 96).
    #[arg(long, default_value = "96", value_parser = clap::value_parser!(u16).range(2..))]
    channels: u16,
    /// Trigger frequencies in kHz, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64", value_parser = crate::args::rate)]
    khz: Vec<f64>,
    /// Seconds measured per point.
    #[arg(long, default_value = "0.5", value_parser = crate::args::secs_f64)]
    seconds: f64,
    /// RoCE only (no plain-UDP baseline).
    #[arg(long)]
    no_udp: bool,
    /// Do not pin the sender and receiver to CPUs 0 and 1.
    #[arg(long)]
    no_pin: bool,
    /// The RoCE host copies every message from a receive buffer instead of having the
    /// kernel put it straight into its posted receive (the A/B of the landing receive).
    #[arg(long)]
    copy: bool,
    /// Rounds of every point, RoCE and UDP alternating: the table gives medians, and each
    /// ratio the median of the rounds' own with its range.
    #[arg(long, default_value = "3", value_parser = crate::args::usize_in(1, 100))]
    runs: usize,
    /// Draw frame rate and bandwidth against trigger frequency (SVG).
    #[arg(long, value_parser = crate::args::out_file)]
    plot: Option<PathBuf>,
    /// One JSON object per point, then the table's rows.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &ShotsArgs) -> Result<ExitCode> {
    let geos = crate::shots::geometries(&a.samples, a.channels)?;
    let ends = Ends {
        probe: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        host: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        pin: !a.no_pin,
        land: !a.copy,
    };
    let protos: &[Proto] = if a.no_udp {
        &[Proto::Roce]
    } else {
        &[Proto::Roce, Proto::Udp]
    };
    if !a.json {
        println!(
            "{:<8} {:>6} {:>8} {:>10} {:>10} {:>9} {:>8} {:>10}",
            "", "N_s", "f [kHz]", "FR [kHz]", "BW Gbit/s", "triggers", "missed", "incomplete"
        );
    }
    // Ctrl-C ends the run after the point under way; the table holds the rounds completed
    let stop = crate::stop::StopFlag::install()?;
    let plan = Plan {
        geometries: geos.clone(),
        protos: protos.to_vec(),
        trigger_hz: a.khz.iter().map(|k| k * 1000.0).collect(),
        seconds: a.seconds,
        runs: a.runs,
        ends,
    };
    let rounds = rounds::measure(&plan, &stop.stopper(), &mut |round, p| {
        print_point(a.json, round, p)
    })?;
    if stop.is_set() {
        eprintln!(
            "rocelink bench shots: stopped (Ctrl-C) after {} complete round(s)",
            rounds.len()
        );
        if rounds.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    table(a.json, &geos, protos, &rounds);
    if let Some(path) = &a.plot {
        plot(path, &geos, protos, &rounds)?;
        if !a.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_point(json: bool, round: usize, p: &Point) {
    if json {
        println!(
            "{}",
            json!({"round": round, "proto": p.proto.name(), "samples": p.geometry.samples, "channels": p.geometry.channels,
                   "shot_bytes": p.geometry.bytes(), "trigger_hz": p.trigger_hz, "seconds": p.seconds,
                   "frame_rate_hz": p.frame_rate(), "gbps": p.gbps(), "triggers": p.triggers,
                   "missed": p.missed, "complete": p.complete, "incomplete": p.incomplete,
                   "receiver_cpu_s": p.cost.rx_cpu, "receiver_gbit_per_cpu_s": p.cost.rx_gbit_per_cpu(),
                   "sender_busy": p.cost.tx_busy})
        );
    } else {
        println!(
            "{:<8} {:>6} {:>8.1} {:>10.2} {:>10.2} {:>9} {:>8} {:>10}",
            p.proto.name(),
            p.geometry.samples,
            p.trigger_hz / 1000.0,
            p.frame_rate() / 1000.0,
            p.gbps(),
            p.triggers,
            p.missed,
            p.incomplete
        );
    }
}

fn gbps(p: &Point) -> f64 {
    p.gbps()
}
fn khz(p: &Point) -> f64 {
    p.frame_rate() / 1000.0
}
fn rx_per_cpu(p: &Point) -> f64 {
    p.cost.rx_gbit_per_cpu()
}
fn tx_busy(p: &Point) -> f64 {
    p.cost.tx_busy
}

/// Table I: the highest frame rate and data rate per shot size (medians over the rounds
/// of each round's best), with what the ends spent, and RoCE over UDP round by round.
fn table(json: bool, geos: &[Geometry], protos: &[Proto], rounds: &Rounds) {
    let med = |g: &Geometry, proto, y| rounds.median(g, proto, y);
    if json {
        for &proto in protos {
            for g in geos {
                if rounds.per_round(g, proto, gbps).is_empty() {
                    continue;
                }
                let mut row = json!({"table": true, "proto": proto.name(), "samples": g.samples,
                       "rounds": rounds.len(),
                       "max_frame_rate_hz": med(g, proto, khz) * 1000.0, "max_gbps": med(g, proto, gbps),
                       "receiver_gbit_per_cpu_s": med(g, proto, rx_per_cpu),
                       "sender_busy": med(g, proto, tx_busy)});
                if proto == Proto::Roce && protos.len() == 2 {
                    row["ratio_to_udp"] = json!(rounds.ratio(g, gbps).median);
                    row["receiver_per_cpu_ratio_to_udp"] =
                        json!(rounds.ratio(g, rx_per_cpu).median);
                }
                println!("{row}");
            }
        }
        return;
    }
    println!();
    println!(
        "Maximum frame rate and data rate (one link, {} channels; medians of {} round(s)):",
        geos[0].channels,
        rounds.len()
    );
    let line = |label: String, v: &dyn Fn(&Geometry) -> String| {
        print!("{label:<22}");
        for g in geos {
            print!(" {:>18}", v(g));
        }
        println!();
    };
    line("shot size (N_s)".into(), &|g| g.samples.to_string());
    for &proto in protos {
        let n = proto.name();
        line(format!("{n} FR [kHz]"), &|g| {
            format!("{:.2}", med(g, proto, khz))
        });
        line(format!("{n} BW [Gbit/s]"), &|g| {
            format!("{:.2}", med(g, proto, gbps))
        });
        line("  receiver Gbit/CPU-s".into(), &|g| {
            format!("{:.2}", med(g, proto, rx_per_cpu))
        });
        line("  sender busy".into(), &|g| {
            format!("{:.0}%", med(g, proto, tx_busy) * 100.0)
        });
    }
    if protos.len() == 2 {
        let ratio = |y: Figure| move |g: &Geometry| rounds.ratio(g, y).show(rounds.len());
        line("RoCE / UDP".into(), &ratio(gbps));
        line("receiver per CPU".into(), &ratio(rx_per_cpu));
    }
}

/// Frame rate and bandwidth against the trigger frequency: each point the median over the
/// rounds.
fn plot(
    path: &std::path::Path,
    geos: &[Geometry],
    protos: &[Proto],
    rounds: &Rounds,
) -> Result<()> {
    let series = |y: &dyn Fn(&Point) -> f64| -> Vec<crate::plot::Series> {
        let mut v = Vec::new();
        for &proto in protos {
            for g in geos {
                let name = format!("{} N_s={}", proto.name(), g.samples);
                v.push((name, rounds.curve(g, proto, y)));
            }
        }
        v
    };
    crate::plot::panels(
        path,
        &[
            (
                "Frame rate against trigger frequency (rocelink, loopback)",
                "trigger frequency f_ext [kHz]",
                "frame rate [kHz]",
                series(&|p| p.frame_rate() / 1000.0),
            ),
            (
                "Bandwidth against trigger frequency",
                "trigger frequency f_ext [kHz]",
                "bandwidth [Gbit/s]",
                series(&|p| p.gbps()),
            ),
        ],
    )
}
