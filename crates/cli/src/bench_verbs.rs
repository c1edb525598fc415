//! `rocelink bench verbs`: the arguments and the table. The runs — perftest over
//! `librocelink_verbs.so` against `rocelink perf`, and the idle cost of the library's
//! progress thread — are `rocelink_bench::verbs`'.

use anyhow::{Context, Result, anyhow};
use rocelink_bench::verbs::{VerbsPlan, idle_cost, measure};
use rocelink_perftest::perf::{Kind, PerfConfig, Test};
use serde_json::json;
use std::net::IpAddr;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct VerbsBenchArgs {
    /// Tests to run (default: write_bw, send_bw, write_lat).
    #[arg(value_parser = crate::perf::parse_test)]
    tests: Vec<Test>,
    /// Bandwidth message size.
    #[arg(long, default_value = "65536", value_parser = crate::args::usize_in(2, 1 << 23))]
    bw_size: usize,
    /// Iterations per bandwidth run.
    #[arg(long, default_value = "20000", value_parser = crate::args::usize_in(1, 1 << 30))]
    bw_iters: usize,
    /// Iterations per latency run.
    #[arg(long, default_value = "5000", value_parser = crate::args::usize_in(1, 1 << 30))]
    lat_iters: usize,
    /// Runs of each, alternating: the medians, and each ratio the median of the runs' own.
    #[arg(long, default_value = "5", value_parser = crate::args::usize_in(1, 100))]
    runs: usize,
    /// Server and client addresses.
    #[arg(long, default_value = "127.0.0.123")]
    server_ip: IpAddr,
    #[arg(long, default_value = "127.0.0.124")]
    client_ip: IpAddr,
    /// Do not pin the servers to CPU 0 and the clients to CPU 1.
    #[arg(long)]
    no_pin: bool,
    /// Seconds to watch a program over the library that waits with nothing to do.
    #[arg(long, default_value = "3", value_parser = crate::args::secs_f64)]
    idle: f64,
    /// Do not measure the idle cost.
    #[arg(long)]
    no_idle: bool,
    /// TCP port of the exchanges.
    #[arg(long, default_value_t = 18516)]
    port: u16,
    /// One JSON object per test (and one for the idle cost).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &VerbsBenchArgs, stop: &crate::stop::StopFlag) -> Result<ExitCode> {
    let rocelink = std::env::current_exe().context("finding this program")?;
    let library = crate::verbs::library()?;
    let tests: Vec<Test> = if a.tests.is_empty() {
        ["write_bw", "send_bw", "write_lat"]
            .iter()
            .filter_map(|t| crate::perf::parse_test(t).ok())
            .collect()
    } else {
        a.tests.clone()
    };
    if !a.json {
        println!(
            "{:<10} {:>8} {:>16} {:>16} {:>8} {:>11}",
            "test", "bytes", "rocelink perf", "perftest+verbs", "ratio", "range"
        );
    }
    for t in tests {
        let plan = VerbsPlan {
            cfg: config(a, t).map_err(|e| anyhow!(e))?,
            runs: a.runs,
            ips: (a.server_ip, a.client_ip),
            pin: !a.no_pin,
            rocelink: rocelink.clone(),
            library: library.clone(),
            port: a.port,
        };
        let r = measure(&plan, &stop.stopper())?;
        let s = r.ratio();
        let m = |v: &[f64]| rocelink_bench::median(v.iter().copied());
        let unit = if t.kind == Kind::Bw { "MiB/s" } else { "µs" };
        if a.json {
            println!(
                "{}",
                json!({"test": t.name(), "bytes": plan.cfg.sizes[0], "unit": unit, "runs": r.verbs.len(),
                       "rocelink_perf": m(&r.rocelink), "perftest_verbs": m(&r.verbs),
                       "ratio": s.median, "ratio_min": s.min, "ratio_max": s.max,
                       "rounds": {"rocelink_perf": r.rocelink, "perftest_verbs": r.verbs}})
            );
        } else {
            println!(
                "{:<10} {:>8} {:>10.1} {unit:<5} {:>10.1} {unit:<5} {:>8.2} {:>11}",
                t.name(),
                plan.cfg.sizes[0],
                m(&r.rocelink),
                m(&r.verbs),
                s.median,
                format!("{:.2}–{:.2}", s.min, s.max)
            );
        }
        if stop.is_set() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if !a.no_idle {
        let c = idle_cost(&library, a.server_ip, a.port, a.idle)?;
        if a.json {
            println!(
                "{}",
                json!({"idle_seconds": c.seconds, "idle_cpu_seconds": c.cpu_seconds, "idle_switches": c.switches})
            );
        } else {
            println!(
                "idle: a program waiting over the library used {:.3} CPU-s and woke {} times in {:.1} s",
                c.cpu_seconds, c.switches, c.seconds
            );
        }
    }
    if !a.json {
        println!(
            "figures: medians of the runs; ratio: the median of each run's own (perftest+verbs over rocelink perf), and its range"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn config(a: &VerbsBenchArgs, t: Test) -> Result<PerfConfig, String> {
    let bw = t.kind == Kind::Bw;
    let mut cfg = PerfConfig::new(t);
    cfg.sizes = vec![if bw { a.bw_size } else { 2 }];
    cfg.iters = (if bw { a.bw_iters } else { a.lat_iters }) as u64;
    cfg.check().map_err(|e| e.to_string())?;
    Ok(cfg)
}
