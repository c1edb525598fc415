//! `rocelink bench stream` and `rocelink bench record`.

use anyhow::Result;
use rocelink_bench::{StreamConfig, StreamResult};
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
    /// RC RDMA WRITE bandwidth between two endpoints over loopback (ib_write_bw's
    /// columns), against the UDP ceiling measured in the same run.
    WriteBw(RcArgs),
    /// RC RDMA WRITE ping-pong latency over loopback (ib_write_lat's columns), against a
    /// bare UDP ping-pong measured in the same run.
    WriteLat(RcArgs),
    /// perftest's six tests with both ends over loopback, each next to the UDP figure
    /// bounding it, measured in the same run (medians of --runs).
    Perf(crate::bench_perf::PerfBenchArgs),
    /// Ultrasound shots: frame rate and bandwidth against trigger frequency per shot size,
    /// RoCE UD against plain UDP in the same run (the paper's Table I, Fig. 5 and 6).
    Shots(crate::bench_shots::ShotsArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct RcArgs {
    /// Message size in bytes (default: 65536 for write-bw, 2 for write-lat).
    #[arg(short = 's', long, value_parser = crate::args::usize_in(1, 1 << 30))]
    size: Option<usize>,
    /// Messages (default: 5000 for write-bw, 10000 for write-lat).
    #[arg(short = 'n', long, value_parser = crate::args::usize_in(1, 1 << 30))]
    iters: Option<usize>,
    /// WRITEs in flight (write-bw).
    #[arg(short = 't', long, default_value = "128", value_parser = crate::args::usize_in(1, 65_536))]
    tx_depth: usize,
    /// Do not pin the two threads to CPUs 0 and 1.
    #[arg(long)]
    no_pin: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Also draw an SVG: the latency histogram (write-lat) or bandwidth against message
    /// size (write-bw, sizes 4 KiB … the chosen size).
    #[arg(long)]
    plot: Option<PathBuf>,
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

fn write_bw(a: &RcArgs) -> Result<ExitCode> {
    let cfg = rocelink_bench::rc::RcConfig {
        size: a.size.unwrap_or(65_536),
        iters: a.iters.unwrap_or(5_000),
        tx_depth: a.tx_depth,
        pin: !a.no_pin,
        ..Default::default()
    };
    let r = rocelink_bench::rc::write_bw(&cfg)?;
    let ratio = if r.udp_mb_s > 0.0 {
        r.avg_mb_s / r.udp_mb_s
    } else {
        0.0
    };
    if a.json {
        println!(
            "{}",
            json!({"bytes": r.bytes, "iterations": r.iters, "bw_peak_mb_s": r.peak_mb_s, "bw_average_mb_s": r.avg_mb_s,
                   "msg_rate_mpps": r.msg_rate_mpps, "cpu_percent_requester": r.cpu_percent.0, "cpu_percent_responder": r.cpu_percent.1,
                   "udp_ceiling_mb_s": r.udp_mb_s, "udp_receiver_cpu_percent": r.udp_cpu_percent, "ratio_rc_to_udp": ratio,
                   "udp_plain_mb_s": r.udp_plain_mb_s,
                   "retransmissions": r.retransmits})
        );
    } else {
        println!("{RULE}");
        println!("                    RDMA_Write BW Test (rocelink RC over loopback, MTU 4096)");
        println!(" TX depth        : {}", cfg.tx_depth);
        println!("{RULE}");
        println!(
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
        );
        println!(
            " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
            r.bytes, r.iters, r.peak_mb_s, r.avg_mb_s, r.msg_rate_mpps
        );
        println!("{RULE}");
        println!(
            " CPU: requester {:.1}%, responder {:.1}% of a core; {} retransmissions",
            r.cpu_percent.0, r.cpu_percent.1, r.retransmits
        );
        println!(
            " UDP ceiling, 4112-byte datagrams, GSO send + GRO receive (as rocelink's driver): {:.2} MB/sec payload, receiver CPU {:.1}%",
            r.udp_mb_s, r.udp_cpu_percent
        );
        println!(
            " UDP plain (sendmmsg -> recvmmsg, no offloads): {:.2} MB/sec payload",
            r.udp_plain_mb_s
        );
        println!(" RC WRITE / UDP ceiling = {ratio:.2}x");
    }
    if let Some(p) = &a.plot {
        let mut pts = Vec::new();
        let mut size = 4096usize;
        while size <= cfg.size {
            let c = rocelink_bench::rc::RcConfig {
                size,
                iters: (cfg.iters * cfg.size / size).clamp(500, 50_000),
                ..cfg.clone()
            };
            let x = rocelink_bench::rc::write_bw(&c)?;
            pts.push((
                size as f64,
                x.avg_mb_s * 8.0 / 1000.0,
                x.udp_mb_s * 8.0 / 1000.0,
            ));
            size *= 2;
        }
        crate::plot::bandwidth(p, &pts)?;
        eprintln!("rocelink: wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_lat(a: &RcArgs) -> Result<ExitCode> {
    let cfg = rocelink_bench::rc::RcConfig {
        size: a.size.unwrap_or(2),
        iters: a.iters.unwrap_or(10_000),
        pin: !a.no_pin,
        ..Default::default()
    };
    let r = rocelink_bench::rc::write_lat(&cfg)?;
    let ratio = if r.udp.t_typical > 0.0 {
        r.rc.t_typical / r.udp.t_typical
    } else {
        0.0
    };
    let row = |s: &rocelink_bench::rc::LatStats| {
        json!({"iterations": s.iters, "t_min": s.t_min, "t_max": s.t_max, "t_typical": s.t_typical, "t_avg": s.t_avg,
               "t_stdev": s.t_stdev, "p99": s.p99, "p99_9": s.p999})
    };
    if a.json {
        println!(
            "{}",
            json!({"bytes": r.bytes, "rc": row(&r.rc), "udp": row(&r.udp), "ratio_rc_to_udp_typical": ratio})
        );
    } else {
        println!("{RULE}");
        println!(
            "                    RDMA_Write Latency Test (rocelink RC over loopback, MTU 4096)"
        );
        println!("{RULE}");
        println!(
            " {:<9} {:<7} {:<12} {:>11} {:>11} {:>15} {:>11} {:>13} {:>20} {:>22}",
            "",
            "#bytes",
            "#iterations",
            "t_min[usec]",
            "t_max[usec]",
            "t_typical[usec]",
            "t_avg[usec]",
            "t_stdev[usec]",
            "99% percentile[usec]",
            "99.9% percentile[usec]"
        );
        for (name, s) in [("rc-write", &r.rc), ("udp", &r.udp)] {
            println!(
                " {:<9} {:<7} {:<12} {:>11.2} {:>11.2} {:>15.2} {:>11.2} {:>13.2} {:>20.2} {:>22.2}",
                name,
                r.bytes,
                s.iters,
                s.t_min,
                s.t_max,
                s.t_typical,
                s.t_avg,
                s.t_stdev,
                s.p99,
                s.p999
            );
        }
        println!("{RULE}");
        println!(" RC WRITE / UDP ping-pong (t_typical) = {ratio:.2}x");
    }
    if let Some(p) = &a.plot {
        crate::plot::latency(p, r.bytes, &r.rc_samples, &r.udp_samples)?;
        eprintln!("rocelink: wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
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
    let runs = rocelink_bench::record::record(&RecordBenchConfig {
        dir: a.dir.clone(),
        frame: a.frame,
        frames: a.frames,
        runs: a.runs,
        in_flight: a.in_flight,
        queue: a.queue,
    })?;
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
    /// Receivers to run, comma-separated: sink, recv1, rocelink, and generic (rocelink's
    /// receiver with the fast path off).
    #[arg(long, value_delimiter = ',', default_value = "sink,recv1,rocelink")]
    receivers: Vec<String>,
    /// Messages per recvmmsg on rocelink's fast path (0: 1 with GRO, 64 without).
    #[arg(long, default_value = "0", value_parser = crate::args::usize_in(0, 1024))]
    batch: usize,
    /// rocelink's receiver spins on its socket instead of sleeping.
    #[arg(long)]
    busy_poll: bool,
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
    let a = match cmd {
        BenchCmd::Stream(a) => a,
        BenchCmd::Record(a) => return record(a),
        BenchCmd::WriteBw(a) => return write_bw(a),
        BenchCmd::Perf(a) => {
            return crate::stop::StopFlag::install().and_then(|s| crate::bench_perf::run(a, &s));
        }
        BenchCmd::WriteLat(a) => return write_lat(a),
        BenchCmd::Shots(a) => return crate::bench_shots::run(a),
    };
    let cfg = StreamConfig {
        payload: a.payload,
        frame: a.frame,
        seconds: a.seconds,
        rate_gbps: a.rate,
        gso: !a.no_gso,
        gro: !a.no_gro,
        pin: !a.no_pin,
        receivers: a
            .receivers
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
            .collect::<Result<_>>()?,
        batch: a.batch,
        busy_poll: a.busy_poll,
        rcvbuf: a.rcvbuf,
        ..StreamConfig::default()
    };
    let r = rocelink_bench::stream(&cfg)?;
    let by = |n: &str| r.iter().find(|x| x.name == n).map_or(0.0, |x| x.gbps);
    let (sink, recv1, ours) = (by("sink"), by("recv1"), by("rocelink"));
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    if a.json {
        let row = |x: &StreamResult| {
            json!({"name": x.name, "gbps": x.gbps, "pps": x.pps, "loss": x.loss, "cpu_percent": x.cpu_percent,
                   "cpu_user_percent": x.cpu_user_percent, "sent": x.sent, "received": x.received, "frames_good": x.frames.0, "frames_damaged": x.frames.1})
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
            "{:<10} {:>10} {:>12} {:>8} {:>8} {:>8} {:>14}",
            "receiver", "Gbit/s", "pkts/s", "loss", "CPU %", "user %", "frames ok/bad"
        );
        for x in &r {
            println!(
                "{:<10} {:>10.2} {:>12.0} {:>7.2}% {:>8.1} {:>8.1} {:>14}",
                x.name,
                x.gbps,
                x.pps,
                x.loss * 100.0,
                x.cpu_percent,
                x.cpu_user_percent,
                if x.name == "sink" {
                    "-".to_string()
                } else {
                    format!("{}/{}", x.frames.0, x.frames.1)
                }
            );
        }
        // ratios only against the baselines that ran alongside rocelink
        let ran = |n: &str| r.iter().any(|x| x.name == n);
        let ratios: Vec<String> = [("sink", sink), ("recv1", recv1)]
            .into_iter()
            .filter(|&(n, _)| ran("rocelink") && ran(n))
            .map(|(n, g)| format!("rocelink / {n} = {:.2}x", ratio(ours, g)))
            .collect();
        if !ratios.is_empty() {
            println!("{}", ratios.join(", "));
        }
    }
    if a.no_loss {
        no_loss(&cfg, &r, a)?;
    }
    if let Some(p) = &a.plot {
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
    }
    Ok(ExitCode::SUCCESS)
}
