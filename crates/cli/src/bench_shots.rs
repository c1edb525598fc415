//! `rocelink bench shots`: frame rate and bandwidth against trigger frequency per shot size,
//! RoCE UD against plain UDP in the same run (`rocelink_bench::shots`), the paper's Table I
//! and, with `--plot`, its Fig. 5 and 6.

use anyhow::Result;
use rocelink_bench::shots::{self, Ends, Point, Proto};
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
    let mut points = Vec::new();
    for &g in &geos {
        for &p in protos {
            for &khz in &a.khz {
                let hz = khz * 1000.0;
                let pt = match p {
                    Proto::Roce => shots::roce(g, hz, a.seconds, ends)?,
                    Proto::Udp => shots::udp(g, hz, a.seconds, ends)?,
                };
                print_point(a.json, &pt);
                points.push(pt);
            }
        }
    }
    table(a.json, &geos, protos, &points);
    if let Some(path) = &a.plot {
        plot(path, &geos, protos, &points)?;
        if !a.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_point(json: bool, p: &Point) {
    if json {
        println!(
            "{}",
            json!({"proto": p.proto.name(), "samples": p.geometry.samples, "channels": p.geometry.channels,
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

/// The best point of `proto` for `g` (highest bandwidth).
fn best<'a>(points: &'a [Point], g: &Geometry, proto: Proto) -> Option<&'a Point> {
    points
        .iter()
        .filter(|p| p.proto == proto && p.geometry == *g)
        .max_by(|a, b| a.gbps().total_cmp(&b.gbps()))
}

/// Table I: the highest frame rate and data rate per shot size.
fn table(json: bool, geos: &[Geometry], protos: &[Proto], points: &[Point]) {
    if !json {
        println!();
        println!(
            "Maximum frame rate and data rate (one link, {} channels):",
            geos[0].channels
        );
        print!("{:<22}", "shot size (N_s)");
        for g in geos {
            print!(" {:>10}", g.samples);
        }
        println!();
    }
    for &proto in protos {
        let rows: Vec<Option<&Point>> = geos.iter().map(|g| best(points, g, proto)).collect();
        if json {
            for p in rows.iter().flatten() {
                println!(
                    "{}",
                    json!({"table": true, "proto": proto.name(), "samples": p.geometry.samples,
                           "max_frame_rate_hz": p.frame_rate(), "max_gbps": p.gbps(),
                           "at_trigger_hz": p.trigger_hz,
                           "receiver_gbit_per_cpu_s": p.cost.rx_gbit_per_cpu(),
                           "sender_busy": p.cost.tx_busy})
                );
            }
            continue;
        }
        print!("{:<22}", format!("{} FR [kHz]", proto.name()));
        for p in &rows {
            print!(" {:>10.2}", p.map_or(0.0, |p| p.frame_rate() / 1000.0));
        }
        println!();
        print!("{:<22}", format!("{} BW [Gbit/s]", proto.name()));
        for p in &rows {
            print!(" {:>10.2}", p.map_or(0.0, |p| p.gbps()));
        }
        println!();
        print!("{:<22}", "  receiver Gbit/CPU-s");
        for p in &rows {
            print!(" {:>10.2}", p.map_or(0.0, |p| p.cost.rx_gbit_per_cpu()));
        }
        println!();
        print!("{:<22}", "  sender busy");
        for p in &rows {
            print!(" {:>9.0}%", p.map_or(0.0, |p| p.cost.tx_busy * 100.0));
        }
        println!();
    }
    if !json && protos.len() == 2 {
        print!("{:<22}", "RoCE / UDP");
        for g in geos {
            let r = best(points, g, Proto::Roce).map_or(0.0, Point::gbps);
            let u = best(points, g, Proto::Udp).map_or(0.0, Point::gbps);
            print!(" {:>9.2}x", if u > 0.0 { r / u } else { 0.0 });
        }
        println!();
        print!("{:<22}", "receiver per CPU");
        for g in geos {
            let per = |p| best(points, g, p).map_or(0.0, |p| p.cost.rx_gbit_per_cpu());
            let (r, u) = (per(Proto::Roce), per(Proto::Udp));
            print!(" {:>9.2}x", if u > 0.0 { r / u } else { 0.0 });
        }
        println!();
    }
}

fn plot(
    path: &std::path::Path,
    geos: &[Geometry],
    protos: &[Proto],
    points: &[Point],
) -> Result<()> {
    let series = |y: &dyn Fn(&Point) -> f64| -> Vec<crate::plot::Series> {
        let mut v = Vec::new();
        for &proto in protos {
            for g in geos {
                let pts = points
                    .iter()
                    .filter(|p| p.proto == proto && p.geometry == *g)
                    .map(|p| (p.trigger_hz / 1000.0, y(p)))
                    .collect();
                v.push((format!("{} N_s={}", proto.name(), g.samples), pts));
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
