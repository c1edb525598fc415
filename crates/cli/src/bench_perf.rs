//! `rocelink bench perf`: the arguments and the table. The runs — perftest's tests over
//! loopback, each next to the UDP figure that bounds it — are `rocelink_bench::perf`'s.

use anyhow::{Context, Result, anyhow};
use rocelink_bench::perf::{Ends, Plan, Rounds, measure};
use rocelink_perftest::perf::{Kind, PerfConfig, Test};
use serde_json::json;
use std::net::IpAddr;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct PerfBenchArgs {
    /// Tests to run (default: all six).
    #[arg(value_parser = crate::perf::parse_test)]
    tests: Vec<Test>,
    /// Bandwidth message size.
    #[arg(long, default_value = "65536", value_parser = crate::args::usize_in(2, 1 << 23))]
    bw_size: usize,
    /// Latency message size.
    #[arg(long, default_value = "2", value_parser = crate::args::usize_in(2, 1 << 23))]
    lat_size: usize,
    /// Iterations per bandwidth run.
    #[arg(long, default_value = "20000", value_parser = crate::args::usize_in(1, 1 << 30))]
    bw_iters: usize,
    /// Iterations per latency run.
    #[arg(long, default_value = "5000", value_parser = crate::args::usize_in(1, 1 << 30))]
    lat_iters: usize,
    /// Send queue depth of the bandwidth tests (perf's -t).
    #[arg(short = 't', long, default_value = "128", value_parser = crate::args::usize_in(1, 8192))]
    tx_depth: usize,
    /// Runs of each: the figures' medians, and each ratio the median of the runs' own
    /// ratios, with their range.
    #[arg(long, default_value = "3", value_parser = crate::args::usize_in(1, 100))]
    runs: usize,
    /// Server and client addresses (RoCE port 4791 on each).
    #[arg(long, default_value = "127.0.0.121")]
    server_ip: IpAddr,
    #[arg(long, default_value = "127.0.0.122")]
    client_ip: IpAddr,
    /// Do not pin the two ends to CPUs 0 and 1.
    #[arg(long)]
    no_pin: bool,
    /// Run both ends as threads of this process instead of two `rocelink perf` processes.
    #[arg(long)]
    in_process: bool,
    /// TCP port of the exchange between the two processes.
    #[arg(long, default_value_t = 18515)]
    port: u16,
    /// One JSON object per test.
    #[arg(long)]
    json: bool,
}

impl PerfBenchArgs {
    /// One test with perf's own defaults for what is not given (`bench write-bw` and
    /// `bench write-lat`).
    pub(crate) fn one(
        test: Test,
        size: Option<usize>,
        iters: Option<usize>,
        tx_depth: usize,
        runs: usize,
        pin: bool,
        json: bool,
    ) -> PerfBenchArgs {
        PerfBenchArgs {
            tests: vec![test],
            bw_size: size.unwrap_or(65_536),
            lat_size: size.unwrap_or(2),
            bw_iters: iters.unwrap_or(20_000),
            lat_iters: iters.unwrap_or(5_000),
            tx_depth,
            runs,
            server_ip: IpAddr::from([127, 0, 0, 121]),
            client_ip: IpAddr::from([127, 0, 0, 122]),
            no_pin: !pin,
            in_process: false,
            port: 18515,
            json,
        }
    }
}

pub(crate) fn run(a: &PerfBenchArgs, stop: &crate::stop::StopFlag) -> Result<ExitCode> {
    let tests: Vec<Test> = if a.tests.is_empty() {
        Test::ALL.to_vec()
    } else {
        a.tests.clone()
    };
    if !a.json {
        println!(
            "{:<10} {:>8} {:>12} {:>14} {:>14} {:>8} {:>10} {:>11}",
            "test", "bytes", "rocelink", "UDP", "UDP GSO+GRO", "× UDP", "× GSO+GRO", "range"
        );
    }
    let ends = if a.in_process {
        Ends::Threads
    } else {
        Ends::Processes {
            exe: std::env::current_exe().context("finding this program")?,
            port: a.port,
        }
    };
    for t in tests {
        let plan = Plan {
            cfg: config(a, t).map_err(|e| anyhow!(e))?,
            runs: a.runs,
            ips: (a.server_ip, a.client_ip),
            pin: !a.no_pin,
            ends: ends.clone(),
        };
        let r = measure(&plan, &stop.stopper()).map_err(|e| {
            let hint = e.address_in_use();
            let e = anyhow::Error::new(e);
            if hint {
                anyhow!("{e:#} (--server-ip and --client-ip choose other loopback addresses)")
            } else {
                e
            }
        })?;
        print_row(a, &plan.cfg, &r);
        if stop.is_set() {
            break;
        }
    }
    if !a.json {
        println!(
            "figures: medians of the runs; ratios: the median of each run's own ratio, and (range) those of the last column"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Test `t` as these arguments set it: one message size, its iterations, its queue depth.
fn config(a: &PerfBenchArgs, t: Test) -> Result<PerfConfig, String> {
    let bw = t.kind == Kind::Bw;
    let mut cfg = PerfConfig::new(t);
    cfg.sizes = vec![if bw { a.bw_size } else { a.lat_size }];
    cfg.iters = (if bw { a.bw_iters } else { a.lat_iters }) as u64;
    if bw {
        cfg.tx_depth = a.tx_depth;
    }
    cfg.check().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// One test's row: the medians of the figures, and bandwidth as a share of the ceiling,
/// latency as a multiple of the UDP round trip — the median of the runs' ratios, with
/// their range.
fn print_row(a: &PerfBenchArgs, cfg: &PerfConfig, r: &Rounds) {
    let t = cfg.test;
    let (m, b, o) = r.medians();
    let to_udp = r.ratio(&r.udp);
    let to_offl = o.map(|_| r.ratio(&r.offload));
    let unit = if t.kind == Kind::Bw { "MiB/s" } else { "µs" };
    if a.json {
        println!(
            "{}",
            json!({"test": t.name(), "bytes": cfg.sizes[0], "runs": r.len(), "unit": unit,
                   "rocelink": m, "udp": b, "udp_gso_gro": o,
                   "ratio_to_udp": to_udp.median, "ratio_to_udp_gso_gro": to_offl.map(|s| s.median),
                   "rounds": {"rocelink": r.mine, "udp": r.udp, "udp_gso_gro": r.offload}})
        );
    } else {
        let head = to_offl.unwrap_or(to_udp);
        println!(
            "{:<10} {:>8} {:>7.1} {unit:<5} {:>9.1} {unit:<5} {:>9} {unit:<5} {:>7.2} {:>10} {:>11}",
            t.name(),
            cfg.sizes[0],
            m,
            b,
            o.map_or("-".to_owned(), |o| format!("{o:.1}")),
            to_udp.median,
            to_offl.map_or("-".to_owned(), |s| format!("{:.2}", s.median)),
            format!("{:.2}–{:.2}", head.min, head.max),
        );
    }
}
