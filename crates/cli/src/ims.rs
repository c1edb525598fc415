//! `rocelink ims serve` and `rocelink ims send`: the two roles of the IMS streaming
//! protocol (`rocelink_ims`), with a progress line and one JSON summary.

use crate::args;
use crate::out::{gbps, progress_bar};
use crate::stats::Counters;
use crate::stop::StopFlag;
use anyhow::{Context, Result, bail};
use rocelink_ims::run;
use rocelink_ims::session::unit::{
    Consume, UnitProgress, UnitSession, UnitSessionConfig, UnitSummary,
};
use rocelink_ims::session::worker::{
    Frames, WorkerProgress, WorkerSession, WorkerSessionConfig, WorkerSummary,
};
use rocelink_ims::{MarkBad, UnitConfig, Verify, WorkerConfig};
use rocelink_runtime::Session;
use rocelink_wire::ims::{ImageGeometry, PixelDepth, marks};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand, Debug)]
pub(crate) enum ImsCmd {
    /// The buffer unit: a ring buffer per worker, every frame ACKed or NACKed, frames
    /// consumed in order (at a rate, to a recording, or as fast as they come).
    Serve(ServeArgs),
    /// A worker: stream frames to a buffer unit, sending again what it NACKs or never
    /// answers.
    Send(SendArgs),
}

/// `--verify`: what the buffer unit checks of each frame.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VerifyChoice {
    /// The §4 CRC-32C and VA of the frame header.
    Header,
    /// Nothing.
    None,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Common {
    /// Status QPN of the buffer unit.
    #[arg(long, default_value = "0x10", value_parser = args::u24_num)]
    status_qpn: u32,
    /// Status Q_Key.
    #[arg(long, default_value = "0x494d5300", value_parser = args::u32_num)]
    status_qkey: u32,
    /// Service level of the status channel (0-7): sent as DSCP CS*n* (8·n) and, on a
    /// tagged AF_XDP port, priority n.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=7), conflicts_with = "status_dscp")]
    status_sl: u8,
    /// Service level of the data channel (0-7; the specification's typical SL1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=7), conflicts_with = "data_dscp")]
    data_sl: u8,
    /// The status channel's DSCP (0-63) where the network has its own plan (instead of
    /// --status-sl).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    status_dscp: Option<u8>,
    /// The data channel's DSCP (0-63), instead of --data-sl.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    data_dscp: Option<u8>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = args::secs)]
    seconds: Option<Duration>,
    /// Print one JSON object at the end (and nothing else on stdout).
    #[arg(long)]
    json: bool,
    /// No progress line or summary text (errors still go to stderr).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    counters: crate::stats::CounterArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address to serve on (UDP port 4791 of it).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// RoCE UDP port.
    #[arg(long, default_value_t = 4791)]
    port: u16,
    /// Ring buffer per data channel (a multiple of 64, at least 4 KiB).
    #[arg(long, default_value = "1G", value_parser = args::bytes)]
    ring: u64,
    /// First VA workers write (VA_OFFS; 64-byte aligned).
    #[arg(long, default_value = "0", value_parser = args::u64_num)]
    va_offset: u64,
    /// Consume frames at this many Gbit/s (default: as fast as they arrive).
    #[arg(long, value_parser = args::rate, conflicts_with = "record")]
    rate: Option<f64>,
    /// Record every frame to this directory (new or empty).
    #[arg(long)]
    record: Option<PathBuf>,
    /// What to check of each frame.
    #[arg(long, value_enum, default_value_t = VerifyChoice::Header)]
    verify: VerifyChoice,
    /// Stop once this many frames were consumed; --record records exactly these (a faster
    /// worker's frames past them are still ACKed and consumed, not recorded).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    frames: Option<u64>,
    /// Most data channels (workers streaming) at once; each has its own ring.
    #[arg(long, default_value = "4", value_parser = args::usize_in(1, 1024))]
    max_workers: usize,
    /// Most workers registered at once (streaming or not); one more is told the unit is
    /// full.
    #[arg(long, default_value = "64", value_parser = args::usize_in(1, 65536))]
    worker_table: usize,
    /// Forget a worker that sent nothing (status or data) for this many seconds.
    #[arg(long, default_value = "60", value_parser = args::secs)]
    idle_timeout: Duration,
    /// Status answers per second at most (spoofed requests cannot make a flood of them).
    #[arg(long, default_value = "1000", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    answer_rate: u32,
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    view: crate::view::ViewArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct SendArgs {
    /// The buffer unit: `IP[:port]`.
    server: String,
    /// Local address `IP[:PORT]`: answers are received there. The port defaults to the
    /// unit's RoCE port (RoCE v2 sends everything to it; 4791); the address to 127.0.0.1
    /// for a loopback unit (the next free 127.0.0.x if the unit holds that port), else the
    /// unspecified one.
    #[arg(long, value_parser = local_addr)]
    bind: Option<(IpAddr, Option<u16>)>,
    /// Frame size (pattern and file frames).
    #[arg(long, default_value = "1M", value_parser = args::bytes)]
    frame: u64,
    /// Payload bytes per packet: 64 to 4096 in steps of 64.
    #[arg(long, default_value_t = 4096)]
    packet: usize,
    /// Frames to send (default: endless, or the whole file).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    frames: Option<u64>,
    /// Bytes to send, as whole frames (e.g. 10G).
    #[arg(long, value_parser = args::bytes, conflicts_with = "frames")]
    bytes: Option<u64>,
    /// Frames sent and not yet answered (default: 4 MiB worth, 1 to 64).
    #[arg(long, value_parser = args::usize_in(1, 4096))]
    in_flight: Option<usize>,
    /// Send a frame again when it has no answer after this many seconds.
    #[arg(long, default_value = "20", value_parser = args::secs)]
    timeout: Duration,
    /// After an outside-window NACK, wait this many seconds before sending again.
    #[arg(long, default_value = "0.001", value_parser = args::secs)]
    wait: Duration,
    /// A unit that answers nothing for this many seconds while frames wait is gone: the
    /// run ends with an error (default: three --timeout periods).
    #[arg(long, value_parser = args::secs)]
    silence: Option<Duration>,
    /// The UDP port the unit's data channel answers from, if not the one its status
    /// channel answered from (a unit whose QPs each send from their own port).
    #[arg(long)]
    unit_data_port: Option<u16>,
    /// Send 4-bit §4 images (columns × rows, 256 × 256 by default).
    #[arg(long, conflicts_with_all = ["image6", "file"])]
    image4: bool,
    /// Send 6-bit §4 images.
    #[arg(long, conflicts_with = "file")]
    image6: bool,
    /// Image columns.
    #[arg(long, default_value = "256", value_parser = args::usize_in(1, 1 << 16))]
    columns: usize,
    /// Image rows (pixels per column).
    #[arg(long, default_value = "256", value_parser = args::usize_in(1, 1 << 16))]
    rows: usize,
    /// Send the bytes of this file, --frame bytes per frame.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Start the file again at its end.
    #[arg(long, requires = "file")]
    repeat: bool,
    /// Test a buffer unit's bad-frame handling: send every Nth frame marked EBF or EBP the
    /// first time (ebf:N, ebp:N); it should be NACKed and is sent again unmarked.
    #[arg(long, value_name = "ebf|ebp:N", value_parser = mark_bad)]
    mark_bad: Option<MarkBad>,
    #[command(flatten)]
    common: Common,
}

/// `IP` or `IP:PORT`.
fn local_addr(s: &str) -> Result<(IpAddr, Option<u16>), String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok((a.ip(), Some(a.port())));
    }
    s.parse::<IpAddr>()
        .map(|ip| (ip, None))
        .map_err(|_| format!("{s:?}: a local address is IP or IP:PORT"))
}

/// `ebf:N` or `ebp:N`.
fn mark_bad(s: &str) -> Result<MarkBad, String> {
    let (kind, n) = s
        .split_once(':')
        .ok_or_else(|| format!("{s}: expected ebf:N or ebp:N"))?;
    let marks = match kind.to_ascii_lowercase().as_str() {
        "ebf" => marks::EBF,
        "ebp" => marks::EBP,
        _ => return Err(format!("{kind}: the mark is ebf or ebp")),
    };
    match n.parse::<u64>() {
        Ok(every) if every > 0 => Ok(MarkBad { every, marks }),
        _ => Err(format!(
            "{n}: every Nth frame needs a whole number N of at least 1"
        )),
    }
}

pub(crate) fn run(c: &ImsCmd) -> Result<ExitCode> {
    match c {
        ImsCmd::Serve(a) => serve(a),
        ImsCmd::Send(a) => send(a),
    }
}

impl Common {
    /// Each channel's DSCP from the flags.
    fn levels(&self) -> rocelink_ims::ServiceLevels {
        use rocelink_ims::levels::dscp_of_sl;
        rocelink_ims::ServiceLevels {
            status_dscp: self.status_dscp.unwrap_or(dscp_of_sl(self.status_sl)),
            data_dscp: self.data_dscp.unwrap_or(dscp_of_sl(self.data_sl)),
        }
    }
}

/// The buffer unit's configuration from its flags.
fn unit_config(a: &ServeArgs) -> Result<UnitSessionConfig> {
    let ring = usize::try_from(a.ring).context("--ring is larger than memory")?;
    let unit = UnitConfig {
        status_qpn: a.common.status_qpn,
        status_qkey: a.common.status_qkey,
        levels: a.common.levels(),
        ring_bytes: ring,
        va_offset: a.va_offset,
        max_channels: a.max_workers,
        max_workers: a.worker_table,
        idle_timeout: a.idle_timeout,
        answers_per_sec: a.answer_rate,
        verify: match a.verify {
            VerifyChoice::None => Verify::None,
            VerifyChoice::Header => Verify::Header,
        },
        ..UnitConfig::default()
    };
    let consume = match (&a.record, a.rate) {
        (Some(d), _) => Consume::Record(d.clone()),
        (None, Some(r)) => Consume::Rate(r),
        (None, None) => Consume::AsTheyCome,
    };
    Ok(UnitSessionConfig {
        port: a.port,
        unit,
        consume,
        frames: a.frames,
        duration: a.common.seconds,
        ..UnitSessionConfig::new(a.bind)
    })
}

fn serve(a: &ServeArgs) -> Result<ExitCode> {
    let mut cfg = checked_unit_config(a)?;
    let (status_qpn, status_qkey, ring, levels) = (
        cfg.unit.status_qpn,
        cfg.unit.status_qkey,
        cfg.unit.ring_bytes,
        cfg.unit.levels,
    );
    let counters = Counters::start("ims serve", &a.common.counters)?;
    let view = a.view.start("ims serve", |addr| {
        rocelink_ims::session::view::serve(addr, "ims serve", Some(counters.board.clone()))
    })?;
    cfg.with_data = view.is_some();
    cfg.data_every = rocelink_view::PICTURE_EVERY;
    let record = cfg.consume.clone();
    let unit = UnitSession::start(cfg, Some(counters.board.clone())).map_err(|e| match e {
        rocelink_ims::Error::RecordDir { .. } => anyhow::Error::new(e).context("--record"),
        e => e.into(),
    })?;
    if !a.common.json && !a.common.quiet {
        eprintln!(
            "rocelink ims serve: buffer unit on {}, status QPN {status_qpn:#x}, Q_Key {status_qkey:#x}, ring {ring} bytes per worker, DSCP {} status / {} data",
            unit.local(),
            levels.status_dscp,
            levels.data_dscp
        );
    }
    let stop = StopFlag::install()?;
    let pb = progress_bar(a.common.json || a.common.quiet);
    let t0 = Instant::now();
    let live = view.as_ref().map(rocelink_view::Served::live);
    let mut seen = 0;
    let mut drain = || {
        while let (Some(l), Some(ev)) = (live, live.and_then(|_| unit.next_event(Duration::ZERO))) {
            seen += 1;
            rocelink_ims::session::view::publish(l, seen, &ev);
        }
    };
    crate::stop::watch(&stop, &unit.stopper(), &|| unit.is_finished(), &mut || {
        drain();
        pb.set_message(serve_progress(&unit.progress(), t0));
        pb.tick();
    });
    drain();
    pb.finish_and_clear();
    let sum = unit.wait().map_err(|e| match e {
        rocelink_ims::Error::Record { .. } => anyhow::Error::new(e).context("--record"),
        e => e.into(),
    })?;
    crate::view::end(view, || rocelink_ims::session::view::summary(&sum));
    let snap = counters.finish(
        "ims serve",
        sum.link.clone(),
        a.common.json || a.common.quiet,
    );
    serve_summary(a, &sum, snap);
    // what the recording holds, and whether it is all that was asked for
    let whole = match (&record, &sum.recorded) {
        (Consume::Record(dir), Some(r)) => crate::receive::report_recording("ims serve", r, dir),
        _ => true,
    };
    Ok(serve_exit(
        &sum,
        matches!(record, Consume::Record(_)),
        whole,
    ))
}

/// The unit's settings, checked, with the memory error in the flags' words.
fn checked_unit_config(a: &ServeArgs) -> Result<UnitSessionConfig> {
    let cfg = unit_config(a)?;
    cfg.check().map_err(|e| match e {
        rocelink_ims::Error::Memory { need, have, .. } => anyhow::anyhow!(
            "--ring {} x --max-workers {} = {need} bytes of rings, more than this machine's {have} bytes of memory: a smaller --ring or fewer --max-workers",
            a.ring,
            a.max_workers
        ),
        e => e.into(),
    })?;
    Ok(cfg)
}

/// 1 when delivered frames could not be taken when stopping (said why), a frame failed its
/// check, or the recording stopped before holding what was asked for (`whole` false, said
/// why).
fn serve_exit(sum: &UnitSummary, recorded: bool, whole: bool) -> ExitCode {
    if sum.unconsumed > 0 {
        eprintln!(
            "rocelink: error: {} frame(s) delivered could not be {} within {} s of stopping: never ACKed, their worker knows them as not stored",
            sum.unconsumed,
            if recorded { "recorded" } else { "consumed" },
            run::DRAIN.as_secs()
        );
        return ExitCode::from(1);
    }
    if sum.stats.image_crc_failures > 0 || !whole {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn serve_progress(p: &UnitProgress, t0: Instant) -> String {
    let st = &p.stats;
    format!(
        "{} workers | {} frames {:.2} Gbit/s | {} NACKs | {} duplicates | {} CRC failures",
        p.workers,
        st.frames_delivered,
        gbps(st.bytes, t0.elapsed().as_secs_f64()),
        st.nacks,
        st.duplicates,
        st.image_crc_failures
    )
}

fn serve_summary(a: &ServeArgs, sum: &UnitSummary, snap: rocelink_runtime::counters::Snapshot) {
    let (st, secs) = (&sum.stats, sum.seconds);
    let (frames, bytes) = (st.frames_delivered, st.bytes);
    if a.common.json {
        println!("{}", crate::out::summary_json(sum, snap));
    } else if !a.common.quiet {
        println!(
            "{frames} frames ({bytes} bytes) delivered in {secs:.2} s = {:.2} Gbit/s; {} ACKs, {} NACKs, {} frames sent again, {} duplicates, {} outside the window, {} CRC failures",
            gbps(bytes, secs),
            st.acked,
            st.nacks,
            st.seen_again,
            st.duplicates,
            st.out_of_window,
            st.image_crc_failures
        );
        let refused = st.status_foreign + st.workers_refused + st.channels_refused;
        if refused + st.workers_expired > 0 {
            println!(
                "status channel: {} requests from an address that did not register the worker, {} workers and {} data channels refused (full), {} workers forgotten after {:.0} s idle",
                st.status_foreign,
                st.workers_refused,
                st.channels_refused,
                st.workers_expired,
                a.idle_timeout.as_secs_f64()
            );
        }
    }
}

fn server_addr(s: &str) -> Result<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    match s.parse::<IpAddr>() {
        Ok(ip) => Ok(SocketAddr::new(ip, 4791)),
        Err(_) => bail!("{s:?} is not an IP address or IP:port of a buffer unit"),
    }
}

/// What the worker sends, from its flags.
fn frames(a: &SendArgs) -> Result<Frames> {
    let geometry = ImageGeometry {
        columns: a.columns,
        rows: a.rows,
    };
    let len = usize::try_from(a.frame).context("--frame is larger than memory")?;
    Ok(match (a.image4, a.image6, &a.file) {
        (true, _, _) => Frames::Images {
            geometry,
            depth: PixelDepth::Four,
        },
        (_, true, _) => Frames::Images {
            geometry,
            depth: PixelDepth::Six,
        },
        (_, _, Some(p)) => Frames::File {
            path: p.clone(),
            len,
            repeat: a.repeat,
        },
        _ if len < 64 => bail!("--frame {len}: at least 64 bytes"),
        _ => Frames::Pattern { len },
    })
}

/// The worker's configuration from its flags.
fn send_config(a: &SendArgs) -> Result<WorkerSessionConfig> {
    let unit = server_addr(&a.server)?;
    let frames = frames(a)?;
    let frame_len = frames.frame_len();
    let mut cfg = WorkerSessionConfig::new(unit, frames);
    cfg.count = a.bytes.map(|b| cfg.frames.frames_for(b)).or(a.frames);
    cfg.local = a.bind.map(|b| b.0);
    cfg.port = a.bind.and_then(|b| b.1);
    cfg.duration = a.common.seconds;
    let w = &mut cfg.worker;
    w.status_qpn = a.common.status_qpn;
    w.status_qkey = a.common.status_qkey;
    w.levels = a.common.levels();
    w.packet_bytes = a.packet;
    w.in_flight = a
        .in_flight
        .unwrap_or_else(|| WorkerConfig::in_flight_for(frame_len));
    w.timeout = a.timeout;
    w.wait = a.wait;
    w.mark_bad = a.mark_bad;
    w.silence = a.silence.unwrap_or(a.timeout.saturating_mul(3));
    w.unit_data_port = a.unit_data_port;
    Ok(cfg)
}

fn send(a: &SendArgs) -> Result<ExitCode> {
    let cfg = send_config(a)?;
    cfg.check()?;
    let counters = Counters::start("ims send", &a.common.counters)?;
    let worker = WorkerSession::start(cfg, Some(counters.board.clone())).map_err(|e| match e {
        rocelink_ims::Error::File { .. } => anyhow::Error::new(e).context("--file"),
        rocelink_ims::Error::Route(..) => anyhow::Error::new(e).context("--bind"),
        e => e.into(),
    })?;
    let stop = StopFlag::install()?;
    let pb = progress_bar(a.common.json || a.common.quiet);
    let t0 = Instant::now();
    crate::stop::watch(
        &stop,
        &worker.stopper(),
        &|| worker.is_finished(),
        &mut || {
            pb.set_message(send_progress(&worker.progress(), t0));
            pb.tick();
        },
    );
    pb.finish_and_clear();
    let sum = worker.wait().map_err(|e| match e {
        rocelink_ims::Error::PathMtu { packet, unit } => anyhow::anyhow!(
            "packets of {packet} payload bytes do not fit the path MTU to {unit} (with 1500-byte Ethernet frames use --packet 1408)"
        ),
        e => e.into(),
    })?;
    let snap = counters.finish(
        "ims send",
        sum.link.clone(),
        a.common.json || a.common.quiet,
    );
    send_summary(a, &sum, snap)
}

fn send_progress(p: &WorkerProgress, t0: Instant) -> String {
    let st = &p.stats;
    format!(
        "{:?} | {} frames {:.2} Gbit/s | {} in flight | {} NACKs | {} retransmissions | {} timeouts",
        p.state,
        st.frames,
        gbps(st.bytes, t0.elapsed().as_secs_f64()),
        p.in_flight,
        st.nacks,
        st.retransmissions,
        st.timeouts
    )
}

/// Print what the worker did; exit 2 if it failed, 1 if frames were never acknowledged.
fn send_summary(
    a: &SendArgs,
    sum: &WorkerSummary,
    snap: rocelink_runtime::counters::Snapshot,
) -> Result<ExitCode> {
    let (st, unacked) = (&sum.stats, &sum.unacknowledged);
    let failed = sum.failure();
    if a.common.json {
        println!("{}", crate::out::summary_json(sum, snap));
    } else if !a.common.quiet {
        send_lines(sum);
    }
    if st.leave_unconfirmed && !a.common.quiet {
        eprintln!(
            "rocelink: warning: every frame was ACKed and the data channel closed, but {} never confirmed the status channel's end (STAT_DOWN lost, or the unit gone)",
            a.server
        );
    }
    if !unacked.is_empty() {
        let list: Vec<String> = unacked
            .iter()
            .take(8)
            .map(|va| format!("{va:#x}"))
            .collect();
        eprintln!(
            "rocelink: error: {} frame(s) sent and never acknowledged (VA {}{})",
            unacked.len(),
            list.join(", "),
            if unacked.len() > 8 { ", …" } else { "" }
        );
    }
    Ok(match failed {
        Some(e) => {
            eprintln!("rocelink: error: {e}");
            ExitCode::from(2)
        }
        None if !unacked.is_empty() => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    })
}

/// The worker's summary in words.
fn send_lines(sum: &WorkerSummary) {
    let (st, secs) = (&sum.stats, sum.seconds);
    println!(
        "{} frames ({} bytes) ACKed in {secs:.2} s = {:.2} Gbit/s; {} NACKs, {} retransmissions, {} timeouts, {} window stalls",
        st.frames,
        st.bytes,
        gbps(st.bytes, secs),
        st.nacks,
        st.retransmissions,
        st.timeouts,
        st.window_stalls
    );
    let refused = sum.answers_refused + st.early_acks;
    if refused > 0 {
        println!(
            "{refused} answers refused: not from the unit's data channel in sequence, or ACKing a frame not yet sent whole"
        );
    }
}
