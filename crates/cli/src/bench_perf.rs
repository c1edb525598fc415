//! `rocelink bench perf`: perftest's six tests with both ends over loopback — two
//! `rocelink perf` processes, server and client, as a user runs them (or, with
//! `--in-process`, the same code on two threads of this process) — each next to the UDP figure it is bounded by,
//! measured in the same run: bandwidth against the UDP ceiling (sendmmsg → recvmmsg, and
//! GSO → GRO), latency against a bare UDP ping-pong of the same datagram size (one way;
//! the round trip for read_lat, whose figure perftest does not halve). Ratios are
//! rocelink over UDP: above 1 is better for bandwidth, worse for latency.

use anyhow::{Context, Result, anyhow};
use rocelink_bench::Spread;
use rocelink_bench::baseline::{udp_ceiling, udp_pingpong};
use rocelink_perftest::perf::LatStats;
use rocelink_perftest::perf::{Kind, PerfConfig, Test, Verb, headline, loopback};
use serde_json::json;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

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
    for t in tests {
        let bw = t.kind == Kind::Bw;
        let mut cfg = PerfConfig::new(t);
        cfg.sizes = vec![if bw { a.bw_size } else { a.lat_size }];
        cfg.iters = (if bw { a.bw_iters } else { a.lat_iters }) as u64;
        if bw {
            cfg.tx_depth = a.tx_depth;
        }
        cfg.check().map_err(|e| anyhow!(e))?;
        let r = measure(a, &cfg, stop)?;
        print_row(a, &cfg, &r);
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

/// What `--runs` runs of one test measured: each figure per run, in run order.
struct Rounds {
    /// rocelink's figure.
    mine: Vec<f64>,
    /// The plain UDP baseline.
    base: Vec<f64>,
    /// The GSO+GRO ceiling (bandwidth only).
    offl: Vec<f64>,
}

impl Rounds {
    /// The median of each figure.
    fn medians(&self) -> (f64, f64, Option<f64>) {
        let m = |v: &[f64]| rocelink_bench::median(v.iter().copied());
        (
            m(&self.mine),
            m(&self.base),
            (!self.offl.is_empty()).then(|| m(&self.offl)),
        )
    }

    /// rocelink's figure over `against`'s, run by run: each ratio is between figures of the
    /// same minute, which the machine's slow and fast periods move together.
    fn ratios(&self, against: &[f64]) -> Vec<f64> {
        self.mine.iter().zip(against).map(|(m, b)| m / b).collect()
    }
}

/// `--runs` runs of `cfg`, each next to its UDP baselines: rocelink's figure, the plain UDP
/// one and (bandwidth) the GSO+GRO one, per run.
fn measure(a: &PerfBenchArgs, cfg: &PerfConfig, stop: &crate::stop::StopFlag) -> Result<Rounds> {
    let (t, pin, flag) = (cfg.test, !a.no_pin, stop.arc());
    let bw = t.kind == Kind::Bw;
    let mut r = Rounds {
        mine: Vec::new(),
        base: Vec::new(),
        offl: Vec::new(),
    };
    for _ in 0..a.runs {
        let h = if a.in_process {
            let (c, _) = loopback(cfg, (a.server_ip, a.client_ip), pin, &flag)
                .with_context(|| format!("perf {} over loopback", t.name()))?;
            headline(&c).ok_or_else(|| anyhow!("{}: no result", t.name()))?
        } else {
            two_processes(a, cfg, pin)
                .with_context(|| format!("perf {} as two processes", t.name()))?
        };
        if bw {
            // perftest's MiB/s; the UDP ceilings come in MB/s
            let mib = |mb: f64| mb * 1e6 / (1 << 20) as f64;
            r.base
                .push(mib(udp_ceiling(pin, Duration::from_secs(2), false)?.0));
            r.offl
                .push(mib(udp_ceiling(pin, Duration::from_secs(2), true)?.0));
        } else {
            // the datagram a message makes: BTH (+ RETH) + payload + ICRC
            let len = a.lat_size + 12 + 16 + 4;
            let s = udp_pingpong(len, a.lat_iters, pin)?;
            // perftest halves WRITE and SEND round trips but reports a READ's whole
            // (one request, one response): hold it against the UDP round trip
            let k = if t.verb == Verb::Read { 2.0 } else { 1.0 };
            r.base.push(k * LatStats::from_samples(s).t_typical);
        }
        // a round counts once all its figures are in
        r.mine.push(h);
        if stop.is_set() {
            break;
        }
    }
    Ok(r)
}

/// One test's row: the medians of the figures, and bandwidth as a share of the ceiling,
/// latency as a multiple of the UDP round trip — the median of the runs' ratios, with
/// their range.
fn print_row(a: &PerfBenchArgs, cfg: &PerfConfig, r: &Rounds) {
    let t = cfg.test;
    let (m, b, o) = r.medians();
    let to_udp = Spread::of(&r.ratios(&r.base));
    let to_offl = o.map(|_| Spread::of(&r.ratios(&r.offl)));
    let unit = if t.kind == Kind::Bw { "MiB/s" } else { "µs" };
    if a.json {
        println!(
            "{}",
            json!({"test": t.name(), "bytes": cfg.sizes[0], "runs": r.mine.len(), "unit": unit,
                   "rocelink": m, "udp": b, "udp_gso_gro": o,
                   "ratio_to_udp": to_udp.median, "ratio_to_udp_gso_gro": to_offl.map(|s| s.median),
                   "rounds": {"rocelink": r.mine, "udp": r.base, "udp_gso_gro": r.offl}})
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

/// A `rocelink perf` server, returned once it says it listens, with the rest of its
/// output to read.
fn start_server(
    mut sc: std::process::Command,
) -> Result<(
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
)> {
    use std::io::BufRead as _;
    use std::process::Stdio;
    let mut srv = sc
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the server")?;
    let mut out = std::io::BufReader::new(srv.stdout.take().context("server output")?);
    let mut text = String::new();
    while !text.contains("Waiting for client") {
        if out.read_line(&mut text)? == 0 {
            let mut err = String::new();
            if let Some(mut e) = srv.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let st = srv.wait()?;
            anyhow::bail!(
                "server {st}: {}",
                culprit(&err)
                    .map(with_hint)
                    .unwrap_or_else(|| text.trim().into())
            );
        }
    }
    Ok((srv, out))
}

/// One run of `cfg` between a `rocelink perf` server and client, each its own process
/// (pinned to CPUs 0 and 1 on request): the client's headline figure (MiB/s average, or
/// t_typical µs).
fn two_processes(a: &PerfBenchArgs, cfg: &PerfConfig, pin: bool) -> Result<f64> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().context("finding this program")?;
    let t = cfg.test;
    let common = |c: &mut Command| {
        c.args(["perf", t.name(), "-p", &a.port.to_string()])
            .args([
                "-s",
                &cfg.sizes[0].to_string(),
                "-n",
                &cfg.iters.to_string(),
            ])
            .args(["--timeout", "30", "--no-control"]);
    };
    let mut sc = Command::new(&exe);
    common(&mut sc);
    sc.args(["--bind", &a.server_ip.to_string()]);
    let (mut srv, mut out) = start_server(sc)?;
    if pin {
        let _ = rocelink_io::net::pin_process(srv.id(), 0);
    }
    let mut cc = Command::new(&exe);
    common(&mut cc);
    let cli = cc
        .args([
            &a.server_ip.to_string(),
            "--bind",
            &a.client_ip.to_string(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the client")?;
    if pin {
        let _ = rocelink_io::net::pin_process(cli.id(), 1);
    }
    let cout = cli.wait_with_output()?;
    // the server's rest, so it never blocks on a full pipe
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    let mut err = String::new();
    if let Some(mut e) = srv.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    let st = srv.wait()?;
    // a server that failed is the culprit (a port another program holds: the client then
    // only sees its connection reset)
    if !st.success() {
        anyhow::bail!(
            "server {st}: {}",
            culprit(&err).map_or_else(|| rest.trim().into(), with_hint)
        );
    }
    if !cout.status.success() {
        let e = String::from_utf8_lossy(&cout.stderr);
        anyhow::bail!("client: {}", culprit(&e).unwrap_or(e.trim()));
    }
    figure_of(&cout.stdout, t.kind)
}

/// `why`, with what to do about a port in use.
fn with_hint(why: &str) -> String {
    if why.contains("in use") {
        format!("{why} (--server-ip and --client-ip choose other loopback addresses)")
    } else {
        why.into()
    }
}

/// The error line of a `rocelink` that failed, out of everything it wrote to stderr (its
/// counters come first).
fn culprit(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("rocelink:"))
        .map(|l| l.trim_start_matches("rocelink: error: ").trim())
}

/// The figure of the client's first JSON row: average bandwidth or typical latency.
fn figure_of(stdout: &[u8], kind: Kind) -> Result<f64> {
    let row: serde_json::Value = String::from_utf8_lossy(stdout)
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .context("no row from the client")?;
    let key = if kind == Kind::Bw {
        "bw_average"
    } else {
        "t_typical"
    };
    row[key]
        .as_f64()
        .with_context(|| format!("the client's row has no {key}: {row}"))
}
