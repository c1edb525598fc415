//! `rocelink perf TEST [SERVER]`: perftest's `ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_write_lat`, `ib_read_lat` and `ib_send_lat` on rocelink's transport, with perftest's
//! options, exchange (TCP 18515) and output, so either side may be perftest itself.

use crate::perf_report::Report;
use crate::stats::{CounterArgs, Counters};
use anyhow::{Context, Result, anyhow, bail};
use rocelink_perftest::perf::session::{Peer, PerfEvent, PerfSession, PerfSessionConfig};
use rocelink_perftest::perf::{Kind, MAX_QPS, Outcome, PerfConfig, PerfError, Test};
use rocelink_runtime::BackendChoice;
use rocelink_runtime::Session;
use rocelink_transport::{Mtu, QpType};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conn {
    #[value(name = "RC", alias = "rc")]
    Rc,
    #[value(name = "UC", alias = "uc")]
    Uc,
    #[value(name = "UD", alias = "ud")]
    Ud,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The test: write_bw, read_bw, send_bw, write_lat, read_lat or send_lat.
    #[arg(value_parser = parse_test)]
    test: Test,
    /// Server to connect to; without it, wait for a client.
    server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Message size in bytes (default 65536 for bandwidth, 2 for latency).
    #[arg(short = 's', long, value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    size: Option<u64>,
    /// Every size from 2 to 2^23 bytes.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Coyote's sweep: every power of two from this size (both sides give the same range).
    #[arg(long, value_parser = parse_pow2, requires = "max_size")]
    min_size: Option<usize>,
    /// Coyote's sweep: up to this size (a power of two).
    #[arg(long, value_parser = parse_pow2, requires = "min_size")]
    max_size: Option<usize>,
    /// Plot the rows against the message size (SVG): bandwidth, or latency.
    #[arg(long, value_name = "FILE.svg", value_parser = crate::args::out_file)]
    plot: Option<PathBuf>,
    /// Iterations (default 5000 for write_bw, 1000 otherwise).
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iters: Option<u64>,
    /// Run each size for this many seconds instead of a number of iterations (bandwidth).
    #[arg(short = 'D', long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: Option<u64>,
    /// Measure a -D run only after this many seconds and until this many before its end
    /// (default: a quarter of the duration, as perftest).
    #[arg(short = 'f', long, value_parser = clap::value_parser!(u64).range(0..=43_200))]
    margin: Option<u64>,
    /// Path MTU (256..4096; the smaller of both sides is used). Default: the port's active
    /// MTU as Linux rxe derives it from the interface's (1024 at 1500, 4096 at 9000 and on
    /// loopback).
    #[arg(short = 'm', long)]
    mtu: Option<usize>,
    /// Send queue depth (default 128 for bandwidth, 1 for latency).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..=8192))]
    tx_depth: Option<u64>,
    /// Receive queue depth (SEND tests).
    #[arg(short = 'r', long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=8192))]
    rx_depth: u64,
    /// Outstanding READs this side accepts as responder.
    #[arg(short = 'o', long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    outs: u16,
    /// Connection type.
    #[arg(short = 'c', long, value_enum, default_value = "RC")]
    connection: Conn,
    /// Number of QPs (bandwidth tests): each runs the iterations, posted round robin;
    /// #iterations counts them all.
    #[arg(short = 'q', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_QPS as u64))]
    qp: u64,
    /// Run until Ctrl-C, printing a row every -D seconds (default 5; bandwidth tests).
    #[arg(long = "run_infinitely", alias = "run-infinitely")]
    run_infinitely: bool,
    /// Also write the report as perftest's JSON file (see --out_json_file).
    #[arg(long = "out_json", alias = "out-json")]
    out_json: bool,
    /// The file --out_json writes (replaced after each row, as perftest does).
    #[arg(long = "out_json_file", alias = "out-json-file", default_value = "perftest_out.json", value_parser = crate::args::out_file)]
    out_json_file: PathBuf,
    /// Bandwidth in Gb/sec instead of MiB/sec.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    report_gbits: bool,
    /// Device (accepted for compatibility: rocelink's device is the bound address).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Port of the device (accepted for compatibility).
    #[arg(short = 'i', long = "ib-port")]
    ib_port: Option<u32>,
    /// GID index (accepted for compatibility: the GID is the bound IP).
    #[arg(short = 'x', long = "gid-index")]
    gid_index: Option<i32>,
    /// Do not fail on CPU frequency differences (accepted: rocelink measures with the
    /// monotonic clock).
    #[arg(short = 'F', long = "CPU-freq")]
    cpu_freq: bool,
    /// Local IP for RoCE and TCP (default: the address the peer is reached from / at).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// UDP port of RoCE v2 (4791; change only between two rocelink processes).
    #[arg(long, default_value_t = 4791)]
    roce_port: u16,
    /// Send and receive RoCE through an AF_XDP socket on this interface (root): the
    /// steering program takes UDP --roce-port, the kernel keeps the rest (perftest's TCP
    /// exchange, ARP); every ICRC is checked over the IPv4 header as received.
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    #[command(flatten)]
    pfc: crate::args::PfcArgs,
    /// Seconds to wait for the peer at each exchange step.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// Send packet by packet (sendmmsg) instead of segmented runs (UDP GSO).
    #[arg(long)]
    no_gso: bool,
    /// Print each result row (and the counters) as one JSON line instead of perftest's text.
    #[arg(long)]
    json: bool,
    /// Print the network counters at exit (Coyote's table, on stderr), as `rocelink stats`
    /// does for a running process. Without it the counters are printed only when the test
    /// fails (they say why).
    #[arg(long)]
    counters: bool,
    /// Only the result rows: no test block, no address lines.
    #[arg(long, conflicts_with = "json")]
    quiet: bool,
    #[command(flatten)]
    counter_args: CounterArgs,
}

fn parse_pow2(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(v) if v.is_power_of_two() && v <= 1 << 23 => Ok(v),
        _ => Err(format!("{s:?} is not a power of two in 1..=8388608")),
    }
}

pub(crate) fn parse_test(s: &str) -> Result<Test, String> {
    Test::parse(s).ok_or_else(|| {
        format!("unknown test {s:?}: write_bw, read_bw, send_bw, write_lat, read_lat or send_lat")
    })
}

fn config(a: &Args) -> Result<PerfConfig> {
    let mut c = PerfConfig::new(a.test);
    c.conn = match a.connection {
        Conn::Rc => QpType::Rc,
        Conn::Uc => QpType::Uc,
        Conn::Ud => QpType::Ud,
    };
    if let Some(sizes) = sizes(a)? {
        c.sizes = sizes;
    }
    if let Some(n) = a.iters {
        c.iters = n;
    }
    timing(a, &mut c)?;
    if let Some(m) = a.mtu {
        c.mtu = Mtu::from_bytes(m)
            .filter(|m| m.bytes() <= 4096)
            .ok_or_else(|| anyhow!("MTU must be 256, 512, 1024, 2048 or 4096"))?;
    }
    if let Some(t) = a.tx_depth {
        c.tx_depth = t as usize;
    }
    c.rx_depth = a.rx_depth as usize;
    c.out_reads = a.outs;
    c.roce_port = a.roce_port;
    c.timeout = Duration::from_secs(a.timeout);
    c.gso = !a.no_gso;
    c.qps = a.qp as usize;
    c.check().map_err(|e| anyhow!(e))?;
    Ok(c)
}

/// The message sizes `-a`, `-s` or `--min-size/--max-size` ask for (`None`: the default).
fn sizes(a: &Args) -> Result<Option<Vec<usize>>> {
    let sweep = a.min_size.zip(a.max_size);
    let given = [a.all, a.size.is_some(), sweep.is_some()];
    if given.iter().filter(|&&x| x).count() > 1 {
        bail!("-a, -s and --min-size/--max-size exclude each other");
    }
    if a.all {
        return Ok(Some(PerfConfig::all_sizes()));
    }
    if let Some(s) = a.size {
        return Ok(Some(vec![s as usize]));
    }
    let Some((lo, hi)) = sweep else {
        return Ok(None);
    };
    if lo > hi {
        bail!("--min-size {lo} is larger than --max-size {hi}");
    }
    let mut v: Vec<usize> = PerfConfig::all_sizes()
        .into_iter()
        .chain([1])
        .filter(|s| (lo..=hi).contains(s))
        .collect();
    v.sort_unstable();
    Ok(Some(v))
}

/// `-D`, `-f`, `--run_infinitely` (and what they exclude).
fn timing(a: &Args, c: &mut PerfConfig) -> Result<()> {
    if let Some(d) = a.duration {
        if a.test.kind == Kind::Lat {
            bail!("-D is supported for bandwidth tests only");
        }
        c.duration = Some(Duration::from_secs(d));
    }
    c.infinite = a.run_infinitely;
    if let Some(m) = a.margin {
        if a.duration.is_none() {
            bail!("-f (margin) needs -D (a timed run)");
        }
        c.margin = Some(Duration::from_secs(m));
    }
    if a.run_infinitely && a.plot.is_some() {
        bail!("--plot needs a run that ends: not with --run_infinitely");
    }
    Ok(())
}

pub(crate) fn run(a: &Args, stop: &crate::stop::StopFlag) -> Result<ExitCode> {
    let cfg = config(a)?;
    let counters = Counters::start(&format!("perf {}", cfg.test.name()), &a.counter_args)?;
    let session = PerfSession::start(session_config(a, &cfg)?, Some(counters.board.clone()))?;
    if a.server.is_none() && !a.json {
        println!("\n************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    let report = Report {
        cfg: cfg.clone(),
        gbits: a.report_gbits,
        json: a.json,
        gid_index: a.gid_index,
        device: a.ib_dev.clone(),
        out_json: a.out_json.then(|| a.out_json_file.clone()),
        client: a.server.is_some(),
    };
    follow(&session, stop, &report, a.quiet);
    // the session leaves its counters on the board also when the test failed: they say
    // why (retransmissions, refusals)
    let sum = match session.wait() {
        Ok(s) => s,
        // Ctrl-C before anyone came: nothing ran, nothing to report
        Err(e @ PerfError::NoPeer) => {
            eprintln!("rocelink perf: {e}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            counters.print(false, false);
            return Err(e).context(format!("perf {}", cfg.test.name()));
        }
    };
    report.rows(&sum.outcome, sum.peer_closed);
    if stop.is_set() && !cfg.infinite {
        eprintln!("rocelink perf: stopped early (Ctrl-C): the rows cover what completed");
    } else if let Outcome::Lat(rows) = &sum.outcome
        && let Some(last) = rows.last()
        && cfg.duration.is_none()
        && last.iters < cfg.iters
    {
        eprintln!(
            "rocelink perf: the peer left after {} of {} iterations: the row covers what completed",
            last.iters, cfg.iters
        );
    }
    if let (Some(x), Some(path)) = (&sum.addresses, &report.out_json)
        && let Some(text) = report.perftest_json(x, &sum.outcome)
    {
        rocelink_io::file::write_atomic(path, text.as_bytes()).context("--out_json")?;
    }
    if let Some(path) = &a.plot {
        report.plot(path, &sum.outcome)?;
    }
    if let Some(x) = &sum.xdp
        && !a.json
    {
        eprintln!("rocelink perf: {}", crate::sinks::xdp_summary(x));
        crate::sinks::pfc_lines("perf", x);
    }
    if a.json || a.counters {
        counters.print(a.json, false);
    }
    Ok(ExitCode::SUCCESS)
}

/// The session's settings from the flags.
fn session_config(a: &Args, cfg: &PerfConfig) -> Result<PerfSessionConfig> {
    let peer = match &a.server {
        Some(server) => Peer::Server(
            (server.as_str(), a.port)
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve {server}"))?
                .next()
                .ok_or_else(|| anyhow!("no address for {server}"))?,
        ),
        None => Peer::Listen(SocketAddr::new(
            a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            a.port,
        )),
    };
    Ok(PerfSessionConfig {
        test: cfg.clone(),
        peer,
        bind: a.bind,
        backend: BackendChoice::xdp_or_socket(a.xdp.as_deref()).with_pfc(a.pfc.config()),
        link_mtu: a.mtu.is_none(),
    })
}

/// Until the test ends: Ctrl-C passed on, the address lines and each period's row printed.
fn follow(session: &PerfSession, stop: &crate::stop::StopFlag, report: &Report, quiet: bool) {
    loop {
        if stop.is_set() {
            session.stopper().stop();
        }
        match session.next_event(Duration::from_millis(50)) {
            Some(PerfEvent::Addresses(x)) if !report.json && !quiet => report.header(&x),
            Some(PerfEvent::Row(r)) => report.bw_row(&r),
            Some(_) => {}
            None if session.is_finished() => return,
            None => {}
        }
    }
}
