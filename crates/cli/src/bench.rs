//! `rocelink bench stream` and `rocelink bench record`.

use anyhow::{Context, Result};
use rocelink_bench::Spread;
use rocelink_bench::{StreamConfig, StreamReport, StreamResult};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub(crate) enum BenchCmd {
    /// Receive-path throughput: a bare UDP sink, HSB's recv()-per-packet receiver and
    /// rocelink's verified HSB receiver, against the same sender, in one run.
    Stream(StreamArgs),
    /// Recording write rate: rocelink's recorder against `dd oflag=direct conv=fsync` on
    /// the same disk, alternating, medians.
    Record(RecordArgs),
    /// RC RDMA WRITE bandwidth over loopback against the UDP ceiling of the same run:
    /// `bench perf write_bw`.
    WriteBw(RcArgs),
    /// RC RDMA WRITE latency over loopback against a bare UDP ping-pong of the same run:
    /// `bench perf write_lat`.
    WriteLat(RcArgs),
    /// perftest's six tests with both ends over loopback, each next to the UDP figure
    /// bounding it, measured in the same run (medians of --runs).
    Perf(crate::bench_perf::PerfBenchArgs),
    /// Ultrasound shots: frame rate and bandwidth against trigger frequency per shot size,
    /// RoCE UD against plain UDP in the same run (the paper's Table I, Fig. 5 and 6).
    Shots(crate::bench_shots::ShotsArgs),
    /// N camera streams at once, each a sender and a verified receiver on CPUs of their
    /// own, against the bare UDP sink on the same N streams: goodput per receiver CPU as N
    /// grows.
    Scale(crate::bench_scale::ScaleArgs),
    /// perftest's own programs over librocelink_verbs.so against `rocelink perf` running
    /// the same test, run by run; and what the library's progress thread costs while its
    /// program waits.
    Verbs(crate::bench_verbs::VerbsBenchArgs),
}

/// Where `bench stream` runs its sender and receivers (`--backend`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamBackend {
    /// Over loopback (127.0.77.x).
    Loopback,
    /// Over a veth pair between two namespaces made for the run (root): the socket
    /// receivers and rocelink's AF_XDP receiver on the same stream, the machine's softirq
    /// time counted.
    Xdp,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RcArgs {
    /// Message size in bytes (default: 65536 for write-bw, 2 for write-lat).
    #[arg(short = 's', long, value_parser = crate::args::usize_in(2, 1 << 23))]
    size: Option<usize>,
    /// Messages (default: 20000 for write-bw, 5000 for write-lat).
    #[arg(short = 'n', long, value_parser = crate::args::usize_in(1, 1 << 30))]
    iters: Option<usize>,
    /// WRITEs in flight (write-bw).
    #[arg(short = 't', long, default_value = "128", value_parser = crate::args::usize_in(1, 8192))]
    tx_depth: usize,
    /// Runs (medians reported).
    #[arg(long, default_value = "1", value_parser = crate::args::usize_in(1, 100))]
    runs: usize,
    /// Do not pin the two ends to CPUs 0 and 1.
    #[arg(long)]
    no_pin: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `bench write-bw` / `write-lat`: `bench perf` of that one test.
fn rc_test(test: &str, a: &RcArgs) -> Result<ExitCode> {
    let t = crate::perf::parse_test(test).map_err(anyhow::Error::msg)?;
    let b = crate::bench_perf::PerfBenchArgs::one(
        t, a.size, a.iters, a.tx_depth, a.runs, !a.no_pin, a.json,
    );
    let stop = crate::stop::StopFlag::install()?;
    crate::bench_perf::run(&b, &stop)
}

#[derive(clap::Args, Debug)]
pub(crate) struct RecordArgs {
    /// Directory on the disk to measure (files are created there and removed).
    #[arg(long, default_value = "target/bench-record")]
    dir: PathBuf,
    /// Frame size in bytes (dd block size).
    #[arg(long, default_value = "2611376", value_parser = crate::args::frame_size)]
    frame: usize,
    /// Frames per run.
    #[arg(long, default_value = "400", value_parser = crate::args::usize_in(1, 1 << 24))]
    frames: usize,
    /// Runs of each.
    #[arg(long, default_value = "3", value_parser = crate::args::usize_in(1, 1000))]
    runs: usize,
    /// Recorder writes in flight (I/O threads).
    #[arg(long, default_value = "4", value_parser = crate::args::usize_in(1, 64))]
    in_flight: usize,
    /// Recorder queue length in frames.
    #[arg(long, default_value = "8", value_parser = crate::args::usize_in(1, 1024))]
    queue: usize,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

fn record(a: &RecordArgs) -> Result<ExitCode> {
    use rocelink_bench::record::{RecordBenchConfig, median_mbps};
    let stop = crate::stop::StopFlag::install()?;
    let runs = match rocelink_bench::record::record(&RecordBenchConfig {
        dir: a.dir.clone(),
        frame: a.frame,
        frames: a.frames,
        runs: a.runs,
        in_flight: a.in_flight,
        queue: a.queue,
        stop: stop.stopper(),
    }) {
        Err(rocelink_bench::BenchError::Stopped) => {
            eprintln!("rocelink: bench record: stopped before a round completed");
            return Ok(ExitCode::from(130));
        }
        r => r?,
    };
    if runs.len() < 2 * a.runs {
        eprintln!(
            "rocelink: bench record: stopped after {} of {} rounds",
            runs.len() / 2,
            a.runs
        );
    }
    let (dd, rec) = (median_mbps(&runs, "dd"), median_mbps(&runs, "recorder"));
    let ratio = if dd > 0.0 { rec / dd } else { 0.0 };
    if a.json {
        let rows: Vec<_> = runs
            .iter()
            .map(|r| json!({"name": r.name, "bytes": r.bytes, "seconds": r.seconds, "mb_per_s": r.mbps(), "direct": r.direct, "refused": r.refused}))
            .collect();
        println!(
            "{}",
            json!({"frame": a.frame, "frames": a.frames, "runs": rows, "dd_mb_per_s": dd, "recorder_mb_per_s": rec, "ratio_recorder_to_dd": ratio})
        );
    } else {
        println!(
            "{} frames of {} B per run, {} runs, in {}",
            a.frames,
            a.frame,
            a.runs,
            a.dir.display()
        );
        for r in &runs {
            println!(
                "{:<9} {:>9.1} MB/s  {:>6.2} s  {}{}",
                r.name,
                r.mbps(),
                r.seconds,
                if r.direct { "O_DIRECT" } else { "buffered" },
                if r.name == "recorder" {
                    format!(", {} offers refused (writer busy)", r.refused)
                } else {
                    String::new()
                }
            );
        }
        println!("median: dd {dd:.1} MB/s, recorder {rec:.1} MB/s, recorder / dd = {ratio:.2}x");
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct StreamArgs {
    /// Payload bytes per data packet (multiple of 128).
    #[arg(long, default_value = "4096", value_parser = crate::args::usize_in(128, 8064))]
    payload: usize,
    /// Frame size.
    #[arg(long, default_value = "1048576", value_parser = crate::args::frame_size)]
    frame: usize,
    /// Seconds per receiver.
    #[arg(long, default_value = "3", value_parser = crate::args::secs_f64)]
    seconds: f64,
    /// Rounds of every receiver, alternating (each receiver's medians reported, and each
    /// ratio's median and range over the rounds).
    #[arg(long, default_value = "1", value_parser = crate::args::usize_in(1, 50))]
    runs: usize,
    /// Paced rate in Gbit/s (default: unpaced).
    #[arg(long, value_parser = crate::args::rate)]
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
    /// Also search each receiver's no-loss rate: bisect the paced rate between 0 and 1.1×
    /// the best unpaced goodput, `--steps` probes of `--seconds` each, keeping the highest
    /// rate with no datagram lost and no frame damaged; ratios compare the goodput measured
    /// at those rates.
    #[arg(long)]
    no_loss: bool,
    /// Bisection probes per receiver for --no-loss.
    #[arg(long, default_value = "6", value_parser = crate::args::usize_in(1, 30))]
    steps: usize,
    /// Receivers to run, comma-separated: sink, sink-ring (the sink landing datagrams in a
    /// ring as large as rocelink's), recv1, rocelink, generic (rocelink's receiver with the
    /// fast path off) and xdp (over AF_XDP; --backend xdp). Default:
    /// sink,recv1,rocelink over loopback, sink,rocelink,xdp with --backend xdp.
    #[arg(long, value_delimiter = ',')]
    receivers: Vec<String>,
    /// Where the stream runs.
    #[arg(long, value_enum, default_value_t = StreamBackend::Loopback)]
    backend: StreamBackend,
    /// Messages per recvmmsg on rocelink's fast path (0: 1 with GRO, 64 without).
    #[arg(long, default_value = "0", value_parser = crate::args::usize_in(0, 1024))]
    batch: usize,
    /// rocelink's receiver spins on its socket instead of sleeping.
    #[arg(long)]
    busy_poll: bool,
    /// rocelink's receive coalescing in microseconds, socket and AF_XDP receivers alike:
    /// while datagrams keep coming, look again after this long instead of being woken for
    /// each (0: off).
    #[arg(long, default_value = "0", value_parser = crate::args::usize_in(0, 10_000))]
    coalesce_us: usize,
    /// Socket receive buffer of the sink and of rocelink's receiver, bytes (recv1 gets
    /// HSB's: the frame size rounded up to 64 KiB).
    #[arg(long, default_value_t = 64 << 20)]
    rcvbuf: usize,
    /// Also draw goodput against payload size (1024, 2048, 4096, 8064 bytes; at most 1 s
    /// per receiver and size) to this SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The --no-loss search, after the unpaced run `r`.
fn no_loss(cfg: &StreamConfig, r: &[StreamResult], a: &StreamArgs) -> Result<()> {
    let n = rocelink_bench::no_loss(cfg, r, a.steps)?;
    let (to_sink, to_recv1) = (n.ratio("rocelink", "sink"), n.ratio("rocelink", "recv1"));
    if a.json {
        let rows: Vec<_> = n
            .found
            .iter()
            .map(|(name, b)| match b {
                Some((g, x)) => json!({"name": name, "no_loss_gbps": g, "goodput_gbps": x.gbps, "cpu_percent": x.cpu_percent, "sent": x.sent, "received": x.received, "frames_good": x.frames.0}),
                None => json!({"name": name, "no_loss_gbps": 0.0}),
            })
            .collect();
        println!(
            "{}",
            json!({"no_loss": rows, "search_hi_gbps": n.hi_gbps, "steps": n.steps,
                   "ratio_rocelink_to_sink": to_sink, "ratio_rocelink_to_recv1": to_recv1})
        );
    } else {
        println!(
            "no-loss rate (bisection 0..{:.1} Gbit/s, {} probes of {} s):",
            n.hi_gbps, n.steps, a.seconds
        );
        for (name, b) in &n.found {
            match b {
                Some((g, x)) => println!(
                    "{name:<10} {g:>8.2} Gbit/s paced, goodput {:.2}, CPU {:.1}%, {} datagrams, none lost",
                    x.gbps, x.cpu_percent, x.received
                ),
                None => println!("{name:<10} lost data at every probed rate"),
            }
        }
        println!(
            "no-loss goodput: rocelink / sink = {to_sink:.2}x, rocelink / recv1 = {to_recv1:.2}x"
        );
    }
    Ok(())
}

pub(crate) fn run(cmd: &BenchCmd) -> Result<ExitCode> {
    match cmd {
        BenchCmd::Stream(a) => stream(a),
        BenchCmd::Record(a) => record(a),
        BenchCmd::WriteBw(a) => rc_test("write_bw", a),
        BenchCmd::Perf(a) => {
            crate::stop::StopFlag::install().and_then(|s| crate::bench_perf::run(a, &s))
        }
        BenchCmd::WriteLat(a) => rc_test("write_lat", a),
        BenchCmd::Shots(a) => crate::bench_shots::run(a),
        BenchCmd::Scale(a) => crate::bench_scale::run(a),
        BenchCmd::Verbs(a) => {
            let stop = crate::stop::StopFlag::install()?;
            crate::bench_verbs::run(a, &stop)
        }
    }
}

/// `bench stream`: the receivers side by side, then the no-loss search and the plot if
/// asked.
fn stream(a: &StreamArgs) -> Result<ExitCode> {
    // before the veth link exists: a Ctrl-C from here on lets it be removed
    let stop = crate::stop::StopFlag::install()?;
    let xdp = a.backend == StreamBackend::Xdp;
    // HSB headers: Ethernet 14, IPv4 20, UDP 8, BTH+RETH 28, ICRC 4 — and AF_XDP frames
    // hold 4 KiB, native XDP on veth a little less
    let mtu = (a.payload as u32 + 60).max(1500);
    if xdp && a.payload > 3328 {
        anyhow::bail!(
            "--backend xdp takes --payload up to 3328 (native XDP on veth: MTU 3506 at most)"
        );
    }
    let receivers = receivers(a)?;
    let link = if xdp {
        Some(rocelink_bench::veth::VethLink::create(mtu).context("--backend xdp")?)
    } else {
        None
    };
    let cfg = StreamConfig {
        stop: stop.stopper(),
        ..stream_config(a, link.as_ref(), receivers)
    };
    // Ctrl-C: the rounds that completed are reported; the veth link goes with `link`
    let rounds = match rocelink_bench::stream_rounds(&cfg, a.runs) {
        Err(rocelink_bench::BenchError::Stopped) => {
            eprintln!("rocelink: bench stream: stopped before a round completed");
            return Ok(ExitCode::from(130));
        }
        r => r?,
    };
    if rounds.len() < a.runs {
        eprintln!(
            "rocelink: bench stream: stopped after {} of {} rounds",
            rounds.len(),
            a.runs
        );
    }
    let backend = crate::args::value_name(&a.backend);
    let rep = StreamReport::new(&cfg, &backend, &rounds);
    if a.json {
        println!("{}", serde_json::to_value(&rep).unwrap_or_default());
    } else {
        print_stream(a, &rep);
    }
    let r = rep.medians();
    let more = || -> Result<()> {
        if a.no_loss && !stop.is_set() {
            no_loss(&cfg, r, a)?;
        }
        if let Some(p) = a.plot.as_ref().filter(|_| !stop.is_set()) {
            plot_stream(p, &cfg)?;
        }
        Ok(())
    };
    match more() {
        Err(e) if stop.is_set() => {
            eprintln!("rocelink: bench stream: stopped ({e:#})");
            Ok(ExitCode::from(130))
        }
        r => r.map(|()| ExitCode::SUCCESS),
    }
}

/// The receivers asked for (by default the two baselines and rocelink).
fn receivers(a: &StreamArgs) -> Result<Vec<&'static str>> {
    let xdp = a.backend == StreamBackend::Xdp;
    let names: Vec<String> = match (a.receivers.is_empty(), xdp) {
        (false, _) => a.receivers.clone(),
        (true, false) => ["sink", "recv1", "rocelink"].map(String::from).to_vec(),
        (true, true) => ["sink", "rocelink", "xdp"].map(String::from).to_vec(),
    };
    if !xdp && names.iter().any(|n| n == "xdp") {
        anyhow::bail!("the xdp receiver needs --backend xdp");
    }
    names
        .iter()
        .map(|n| {
            rocelink_bench::ALL_RECEIVERS
                .into_iter()
                .find(|r| r == n)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "no receiver {n:?} (have: {})",
                        rocelink_bench::ALL_RECEIVERS.join(", ")
                    )
                })
        })
        .collect()
}

fn stream_config(
    a: &StreamArgs,
    link: Option<&rocelink_bench::veth::VethLink>,
    receivers: Vec<&'static str>,
) -> StreamConfig {
    let defaults = StreamConfig::default();
    StreamConfig {
        device: link.map_or(defaults.device, |l| l.veth.device),
        host: link.map_or(defaults.host, |l| l.veth.host),
        veth: link.map(|l| l.veth.clone()),
        payload: a.payload,
        frame: a.frame,
        seconds: a.seconds,
        rate_gbps: a.rate,
        gso: !a.no_gso,
        gro: !a.no_gro,
        pin: !a.no_pin,
        receivers,
        batch: a.batch,
        busy_poll: a.busy_poll,
        coalesce: std::time::Duration::from_micros(a.coalesce_us as u64),
        rcvbuf: a.rcvbuf,
        ..defaults
    }
}

/// A stream run's report in words: the settings, each receiver's medians, the ratios.
fn print_stream(a: &StreamArgs, rep: &StreamReport<'_>) {
    println!(
        "payload {} B, frame {} B, {} s each, {}, GSO {}, GRO {}{}",
        a.payload,
        a.frame,
        a.seconds,
        a.rate
            .map_or("unpaced".to_string(), |r| format!("{r} Gbit/s")),
        if a.no_gso { "off" } else { "on" },
        if a.no_gro { "off" } else { "on" },
        if rep.rounds() > 1 {
            format!(
                "; medians of {} rounds, ratios per round (median, range)",
                rep.rounds()
            )
        } else {
            String::new()
        }
    );
    if rep.over_veth() {
        println!("over a veth pair between two namespaces; irq % is the machine's softirq time");
    }
    print_table(rep);
    print_ratios(a, rep);
}

fn print_table(rep: &StreamReport<'_>) {
    println!(
        "{:<10} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>10} {:>14}",
        "receiver",
        "Gbit/s",
        "pkts/s",
        "loss",
        "CPU %",
        "user %",
        "irq %",
        "Gb/CPU-s",
        "frames ok/bad"
    );
    for x in rep.medians() {
        println!(
            "{:<10} {:>10.2} {:>12.0} {:>7.2}% {:>8.1} {:>8.1} {:>8.1} {:>10.2} {:>14}",
            x.name,
            x.gbps,
            x.pps,
            x.loss * 100.0,
            x.cpu_percent,
            x.cpu_user_percent,
            x.irq_percent,
            rep.per_cpu(x),
            if x.name.starts_with("sink") {
                "-".to_string()
            } else {
                format!("{}/{}", x.frames.0, x.frames.1)
            }
        );
    }
}

/// Ratios only against the baselines that ran alongside rocelink.
fn print_ratios(a: &StreamArgs, rep: &StreamReport<'_>) {
    let n = rep.rounds();
    let line = |v: Vec<(&str, Spread)>| {
        v.into_iter()
            .map(|(b, s)| format!("rocelink / {b} = {}", s.show(n)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let goodput = line(rep.goodput_ratios());
    if !goodput.is_empty() {
        println!("{goodput}");
    }
    let cpu = line(rep.cpu_ratios());
    if !cpu.is_empty() {
        let what = if a.rate.is_some() {
            "CPU per Gbit/s"
        } else {
            "verified Gbit/s per CPU-second"
        };
        println!("{what}: {cpu}");
    }
    if let Some((goodput, per_cpu)) = rep.xdp_ratios() {
        println!(
            "xdp / rocelink: goodput {}, verified Gbit/s per CPU-second {}",
            goodput.show(n),
            per_cpu.show(n)
        );
    }
}

/// Goodput per payload size for every receiver, as an SVG.
fn plot_stream(p: &std::path::Path, cfg: &StreamConfig) -> Result<()> {
    let mut series: Vec<crate::plot::Series> = cfg
        .receivers
        .iter()
        .map(|n| (n.to_string(), Vec::new()))
        .collect();
    for payload in [1024usize, 2048, 4096, 8064] {
        let c = StreamConfig {
            payload,
            seconds: cfg.seconds.min(1.0),
            ..cfg.clone()
        };
        for x in rocelink_bench::stream(&c)? {
            if let Some(s) = series.iter_mut().find(|s| s.0 == x.name) {
                s.1.push((payload as f64, x.gbps));
            }
        }
    }
    crate::plot::lines(
        p,
        &format!(
            "HSB stream goodput over loopback ({} frames, GSO {}, GRO {})",
            cfg.frame,
            if cfg.gso { "on" } else { "off" },
            if cfg.gro { "on" } else { "off" }
        ),
        "payload per packet [bytes]",
        "Gbit/s",
        &series,
    )?;
    eprintln!("rocelink: wrote {}", p.display());
    Ok(())
}
