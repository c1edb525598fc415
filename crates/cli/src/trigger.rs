//! `rocelink trigger`: the round trip from a trigger command leaving the host to the last
//! message of its shot taken, one shot at a time, per shot size, as the paper measures it.

use crate::args;
use crate::stop::StopFlag;
use anyhow::{Context, Result};
use rocelink_runtime::Session;
// the `p` quantile of sorted round trips (NaN when empty; printed as "-")
use rocelink_ultrasound::session::round_trip::quantile as pct;
use rocelink_ultrasound::session::round_trip::{RoundTrip, RoundTripConfig, Row};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub(crate) struct TriggerArgs {
    /// The probe's trigger address (port 4792 unless given).
    #[arg(long, default_value = "127.0.0.1:4792", value_parser = crate::shots::trigger_addr)]
    probe: SocketAddr,
    /// Address to receive shots on (default 127.0.0.1, or the next free loopback address).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// RoCE UDP port.
    #[arg(long, default_value_t = 4791)]
    port: u16,
    /// Shot sizes: samples per channel, comma-separated (1 is a single 3-byte message per
    /// 2 channels: about the trigger alone).
    #[arg(long, value_delimiter = ',', default_value = "1,500,1000,2000,4000",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    samples: Vec<u32>,
    /// Channels.
    #[arg(long, default_value = "96", value_parser = clap::value_parser!(u16).range(2..))]
    channels: u16,
    /// Round trips measured per size.
    #[arg(short = 'n', long, default_value = "1000", value_parser = args::usize_in(1, 10_000_000))]
    count: usize,
    /// Round trips first taken and not counted.
    #[arg(long, default_value = "20", value_parser = args::usize_in(0, 1_000_000))]
    warmup: usize,
    /// Longest wait for one shot.
    #[arg(long, default_value = "1", value_parser = args::secs)]
    timeout: Duration,
    /// Check every shot byte for byte against the generator of this seed.
    #[arg(long, value_parser = args::u64_num)]
    verify: Option<u64>,
    /// Draw the round-trip histograms (SVG).
    #[arg(long, value_parser = args::out_file)]
    plot: Option<PathBuf>,
    /// One JSON object per size.
    #[arg(long)]
    json: bool,
}

pub(crate) fn trigger(a: &TriggerArgs) -> Result<ExitCode> {
    let cfg = RoundTripConfig {
        probe: a.probe,
        bind: a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: a.port,
        chosen: a.bind.is_some(),
        count: a.count,
        warmup: a.warmup,
        timeout: a.timeout,
        verify_seed: a.verify,
        ..RoundTripConfig::new(crate::shots::geometries(&a.samples, a.channels)?)
    };
    let stop = StopFlag::install()?;
    let session = RoundTrip::start(cfg)?;
    if !a.json {
        print_header();
    }
    let stopper = session.stopper();
    loop {
        if stop.is_set() {
            stopper.stop();
        }
        match session.next_event(Duration::from_millis(100)) {
            Some(row) => show(a.json, &row),
            None if session.is_finished() => break,
            None => {}
        }
    }
    while let Some(row) = session.next_event(Duration::ZERO) {
        show(a.json, &row);
    }
    let rows = session.wait().context("rocelink trigger")?;
    if let Some(p) = &a.plot {
        plot(p, &rows)?;
        if !a.json {
            println!("plot: {}", p.display());
        }
    }
    let corrupt: u64 = rows.iter().map(|r| r.corrupt).sum();
    Ok(if corrupt > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The table's header.
fn print_header() {
    println!(
        "{:>8} {:>10} {:>6} {:>7} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "samples", "bytes", "msgs", "shots", "lost", "min[us]", "median", "p99", "max", "Gbit/s"
    );
}

/// Every row's round trips as one histogram per shot size.
fn plot(p: &std::path::Path, rows: &[Row]) -> Result<()> {
    let series: Vec<(String, &[f64])> = rows
        .iter()
        .map(|r| (format!("N_s = {}", r.geometry.samples), r.rtt_us.as_slice()))
        .collect();
    crate::plot::histogram(
        p,
        "Trigger to complete shot, round trip (rocelink, software)",
        "round trip [µs]",
        &series,
    )
}

/// A row, and its text histogram unless `json`.
fn show(json: bool, row: &Row) {
    print_row(json, row);
    if !json && !row.rtt_us.is_empty() {
        for l in text_histogram(&row.rtt_us) {
            println!("{l}");
        }
    }
}

fn print_row(json: bool, r: &Row) {
    let (v, g) = (&r.rtt_us, &r.geometry);
    let median = r.quantile(0.5);
    let rate = r.gbps_at_median();
    if json {
        // the row's serialisation
        println!("{}", serde_json::to_value(r).unwrap_or_default());
    } else {
        let f = |x: f64, d: usize| {
            if x.is_finite() {
                format!("{x:.d$}")
            } else {
                "-".into()
            }
        };
        println!(
            "{:>8} {:>10} {:>6} {:>7} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
            g.samples,
            g.bytes(),
            g.messages(),
            v.len(),
            r.lost,
            f(pct(v, 0.0), 1),
            f(median, 1),
            f(pct(v, 0.99), 1),
            f(pct(v, 1.0), 1),
            f(rate, 2)
        );
    }
}

/// A histogram of sorted round trips `v` in text: ten bins spaced evenly on a log scale
/// from the least to the 99.9th percentile, the rest counted above it.
fn text_histogram(v: &[f64]) -> Vec<String> {
    const BINS: usize = 10;
    const WIDTH: usize = 40;
    let (lo, hi) = (pct(v, 0.0).max(1e-3), pct(v, 0.999));
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![format!("    all {} at {lo:.1} µs", v.len())];
    }
    let step = (hi / lo).ln() / BINS as f64;
    let edge = |i: usize| lo * (step * i as f64).exp();
    let mut counts = [0usize; BINS];
    let mut above = 0;
    for &x in v {
        if x > hi {
            above += 1;
            continue;
        }
        let i = (((x.max(lo) / lo).ln() / step) as usize).min(BINS - 1);
        counts[i] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    let mut out: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let bar = "#".repeat((n * WIDTH).div_ceil(most).min(WIDTH));
            format!(
                "    {:>9.1} – {:<9.1} µs {bar:<WIDTH$} {n}",
                edge(i),
                edge(i + 1)
            )
        })
        .collect();
    if above > 0 {
        out.push(format!(
            "    above the 99.9th percentile ({hi:.1} µs): {above}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_histogram_counts_every_shot_once() {
        let mut v: Vec<f64> = (0..1000).map(|i| 20.0 + f64::from(i % 50)).collect();
        v.push(6000.0); // one outlier
        v.sort_by(f64::total_cmp);
        let lines = super::text_histogram(&v);
        let counted: usize = lines
            .iter()
            .filter_map(|l| l.split_whitespace().last()?.parse::<usize>().ok())
            .sum();
        assert_eq!(counted, v.len(), "{lines:#?}");
        assert!(
            lines
                .last()
                .unwrap()
                .contains("above the 99.9th percentile"),
            "{lines:#?}"
        );
    }
}
