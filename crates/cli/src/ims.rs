//! `rocelink ims serve` and `rocelink ims send`: the two roles of the IMS streaming
//! protocol (`rocelink_ims`), with a progress line and one JSON summary.

use crate::args;
use crate::out::{gbps, progress_bar};
use crate::stats::Counters;
use crate::stop::StopFlag;
use anyhow::{Context, Result, bail};
use rocelink_ims::run::{self, RunOpts};
use rocelink_ims::source::FileSource;
use rocelink_ims::{
    Consumer, FrameSource, ImageSource, MarkBad, PatternSource, RateConsumer, RecordConsumer,
    Server, ServerConfig, Verify, Worker, WorkerConfig, WorkerState,
};
use rocelink_runtime::Driver;
use rocelink_runtime::bind_roce;
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_wire::ims::{ImageGeometry, PixelDepth, marks};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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

#[derive(clap::Args, Debug)]
pub(crate) struct Common {
    /// Status QPN of the buffer unit.
    #[arg(long, default_value = "0x10", value_parser = args::u24_num)]
    status_qpn: u32,
    /// Status Q_Key.
    #[arg(long, default_value = "0x494d5300", value_parser = args::u32_num)]
    status_qkey: u32,
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
    /// What to check of each frame: `header` (the §4 CRC-32C and VA) or `none`.
    #[arg(long, default_value = "header", value_parser = ["header", "none"])]
    verify: String,
    /// Stop once this many frames were consumed.
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

fn nacked_json(n: &rocelink_ims::NackCounts) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> =
        n.named().map(|(k, v)| (k.to_string(), json!(v))).collect();
    serde_json::Value::Object(m)
}

/// The buffer unit's configuration from its flags, checked before anything is bound.
fn serve_config(a: &ServeArgs) -> Result<ServerConfig> {
    let ring = usize::try_from(a.ring).context("--ring is larger than memory")?;
    let cfg = ServerConfig {
        status_qpn: a.common.status_qpn,
        status_qkey: a.common.status_qkey,
        ring_bytes: ring,
        va_offset: a.va_offset,
        max_channels: a.max_workers,
        max_workers: a.worker_table,
        idle_timeout: a.idle_timeout,
        answers_per_sec: a.answer_rate,
        verify: if a.verify == "none" {
            Verify::None
        } else {
            Verify::Header
        },
        ..ServerConfig::default()
    };
    cfg.check()?;
    let need = a.ring.saturating_mul(a.max_workers as u64);
    if let Some(mem) = rocelink_io::mem::total_memory()
        && need > mem
    {
        bail!(
            "--ring {} x --max-workers {} = {need} bytes of rings, more than this machine's {mem} bytes of memory: a smaller --ring or fewer --max-workers",
            a.ring,
            a.max_workers
        );
    }
    if let Some(d) = &a.record {
        args::record_dir(d, false)?;
    }
    Ok(cfg)
}

fn serve(a: &ServeArgs) -> Result<ExitCode> {
    let cfg = serve_config(a)?;
    let counters = Counters::start("ims serve", &a.common.counters)?;
    let (sock, ip) = bind_roce(a.bind, a.port, true)?;
    let local = SocketAddr::new(ip, a.port);
    let mut ep = Endpoint::new(EndpointConfig::new(local).random_keys());
    let mut server = Server::new(&mut ep, cfg)?;
    let mut drv = Driver::new(sock);
    drv.publish_to(counters.board.clone(), "ims");
    let stop = StopFlag::install()?;
    let flag = stop.arc();
    if !a.common.json && !a.common.quiet {
        eprintln!(
            "rocelink ims serve: buffer unit on {local}, status QPN {:#x}, Q_Key {:#x}, ring {} bytes per worker",
            cfg.status_qpn, cfg.status_qkey, cfg.ring_bytes
        );
    }
    let mut rec = a
        .record
        .as_ref()
        .map(|d| RecordConsumer::new(d.clone(), None));
    let mut rate = a.rate.map(RateConsumer::new);
    let mut nothing = |_: &rocelink_ims::Frame<'_>| {};
    let inner: &mut dyn Consumer = match (rec.as_mut(), rate.as_mut()) {
        (Some(r), _) => r,
        (None, Some(r)) => r,
        (None, None) => &mut nothing,
    };
    let pb = progress_bar(a.common.json || a.common.quiet);
    let t0 = Instant::now();
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut counted = Counted {
        inner,
        left: a.frames,
        reached: reached.clone(),
    };
    let mut reached_at: Option<Instant> = None;
    let left = run::serve(
        &mut drv,
        &mut ep,
        &mut server,
        &mut counted,
        RunOpts {
            stop: &flag,
            deadline: a.common.seconds.map(|s| t0 + s),
            every: Duration::from_millis(50),
        },
        &mut |s| {
            // --frames: done once they were consumed and their worker left (or 2 s on)
            if reached.load(std::sync::atomic::Ordering::Relaxed) {
                let at = *reached_at.get_or_insert_with(Instant::now);
                if s.workers() == 0 || at.elapsed() > Duration::from_secs(2) {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            pb.set_message(serve_progress(s, t0));
            pb.tick();
        },
    )?;
    pb.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    drop(counted);
    let recorded = finish_recording(rec.as_mut())?;
    let snap = counters.finish(
        "ims serve",
        drv.link("ims", &ep),
        a.common.json || a.common.quiet,
    );
    let st = server.stats();
    serve_summary(a, &st, &ep, recorded, snap, secs);
    if left > 0 {
        eprintln!(
            "rocelink: error: {left} frame(s) were ACKed to their worker but not consumed{} within {} s of stopping",
            if rec.is_some() { " (recorded)" } else { "" },
            run::DRAIN.as_secs()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(if st.image_crc_failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn serve_progress(s: &Server, t0: Instant) -> String {
    let st = s.stats();
    format!(
        "{} workers | {} frames {:.2} Gbit/s | {} NACKs | {} duplicates | {} CRC failures",
        s.workers(),
        st.frames_delivered,
        gbps(st.bytes, t0.elapsed().as_secs_f64()),
        st.nacks,
        st.duplicates,
        st.image_crc_failures
    )
}

/// Make the recording durable; its summary as JSON (null without one).
fn finish_recording(rec: Option<&mut RecordConsumer>) -> Result<serde_json::Value> {
    let Some(r) = rec else {
        return Ok(serde_json::Value::Null);
    };
    if let Some(e) = r.error() {
        bail!("--record {e}");
    }
    Ok(match r.finish().context("--record")? {
        Some(s) => {
            json!({"frames": s.frames, "bytes": s.bytes, "dropped": s.dropped, "stopped": s.stopped})
        }
        None => serde_json::Value::Null,
    })
}

fn serve_summary(
    a: &ServeArgs,
    st: &rocelink_ims::ServerStats,
    ep: &Endpoint,
    recorded: serde_json::Value,
    snap: rocelink_runtime::counters::Snapshot,
    secs: f64,
) {
    let (frames, bytes) = (st.frames_delivered, st.bytes);
    if a.common.json {
        println!(
            "{}",
            json!({"frames": frames, "bytes": bytes, "frames_delivered": frames, "frames_consumed": st.frames_consumed,
                   "acked": st.acked, "nacks": st.nacks, "nacked": nacked_json(&st.nacked), "nacked_total": st.nacks,
                   "retransmissions": st.seen_again, "timeouts": null, "window_stalls": st.out_of_window,
                   "corrupt": st.image_crc_failures, "image_crc_failures": st.image_crc_failures,
                   "out_of_window": st.out_of_window, "duplicates": st.duplicates,
                   "icrc_errors": ep.stats().icrc_errors, "status_packets": st.status_packets,
                   "status_ignored": st.status_ignored, "status_foreign": st.status_foreign,
                   "workers_refused": st.workers_refused, "channels_refused": st.channels_refused,
                   "workers_expired": st.workers_expired, "answers_dropped": st.answers_dropped,
                   "recorded": recorded, "gbps": gbps(bytes, secs), "seconds": secs, "counters": snap})
        );
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

/// Passes frames on; sets `reached` once `left` reaches 0.
struct Counted<'a> {
    inner: &'a mut dyn Consumer,
    left: Option<u64>,
    reached: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Consumer for Counted<'_> {
    fn ready(&mut self, now: Instant) -> bool {
        // frames past the count are still taken: each was ACKed to its worker
        self.inner.ready(now)
    }
    fn consume(&mut self, now: Instant, f: &rocelink_ims::Frame<'_>) {
        self.inner.consume(now, f);
        if let Some(n) = self.left.as_mut().filter(|n| **n > 0) {
            *n -= 1;
            if *n == 0 {
                self.reached
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    fn wake(&self) -> Option<Instant> {
        self.inner.wake()
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

fn source(a: &SendArgs) -> Result<Box<dyn FrameSource>> {
    let geom = ImageGeometry {
        columns: a.columns,
        rows: a.rows,
    };
    let frame = usize::try_from(a.frame).context("--frame is larger than memory")?;
    let len_of = |len: usize| a.bytes.map(|b| b.div_ceil(len as u64)).or(a.frames);
    Ok(match (a.image4, a.image6, &a.file) {
        (true, _, _) => {
            let len = geom.encoded_len(PixelDepth::Four);
            Box::new(ImageSource::new(geom, PixelDepth::Four, len_of(len)))
        }
        (_, true, _) => {
            let len = geom.encoded_len(PixelDepth::Six);
            Box::new(ImageSource::new(geom, PixelDepth::Six, len_of(len)))
        }
        (_, _, Some(p)) => {
            let s = FileSource::open(p, frame, a.repeat)
                .with_context(|| format!("--file {}", p.display()))?;
            match len_of(frame) {
                Some(n) => Box::new(Limited(s, n)),
                None => Box::new(s),
            }
        }
        _ => Box::new(
            PatternSource::new(frame, len_of(frame))
                .with_context(|| format!("--frame {frame}: at least 64 bytes"))?,
        ),
    })
}

/// A source cut after `.1` frames.
struct Limited<S>(S, u64);

impl<S: FrameSource> FrameSource for Limited<S> {
    fn frame_len(&self) -> usize {
        self.0.frame_len()
    }
    fn fill(&mut self, index: u64, va: u64, out: &mut [u8]) -> std::io::Result<bool> {
        if index >= self.1 {
            return Ok(false);
        }
        self.0.fill(index, va, out)
    }
}

/// The worker's configuration from its flags, checked.
fn worker_config(a: &SendArgs, server: SocketAddr, frame_len: usize) -> Result<WorkerConfig> {
    let cfg = WorkerConfig {
        status_qpn: a.common.status_qpn,
        status_qkey: a.common.status_qkey,
        packet_bytes: a.packet,
        in_flight: a
            .in_flight
            .unwrap_or_else(|| WorkerConfig::in_flight_for(frame_len)),
        timeout: a.timeout,
        wait: a.wait,
        mark_bad: a.mark_bad,
        silence: a.silence.unwrap_or(a.timeout.saturating_mul(3)),
        unit_data_port: a.unit_data_port,
        ..WorkerConfig::new(server)
    };
    cfg.check(frame_len)?;
    Ok(cfg)
}

/// The worker's RoCE socket: `--bind`, or the address that routes to the unit, at the
/// unit's RoCE port unless a port is given.
fn worker_socket(
    a: &SendArgs,
    server: SocketAddr,
) -> Result<(rocelink_io::udp::UdpSocket, SocketAddr)> {
    let (ip, port) = match a.bind {
        Some((ip, port)) => (ip, port),
        None if server.ip().is_loopback() => (IpAddr::V4(Ipv4Addr::LOCALHOST), None),
        None => (route_source(server)?, None),
    };
    let port = port.unwrap_or(server.port());
    // a chosen address is kept; the default loopback one moves aside if the unit has it
    let (sock, ip) = bind_roce(ip, port, a.bind.is_some())?;
    Ok((sock, SocketAddr::new(ip, port)))
}

/// The local address the kernel sends from towards `to`.
fn route_source(to: SocketAddr) -> Result<IpAddr> {
    let probe = std::net::UdpSocket::bind(SocketAddr::new(
        if to.is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        },
        0,
    ))?;
    probe
        .connect(to)
        .with_context(|| format!("no route to the buffer unit at {to} (give --bind)"))?;
    Ok(probe.local_addr()?.ip())
}

fn send(a: &SendArgs) -> Result<ExitCode> {
    let server = server_addr(&a.server)?;
    let mut src = source(a)?;
    let frame_len = src.frame_len();
    let cfg = worker_config(a, server, frame_len)?;
    let counters = Counters::start("ims send", &a.common.counters)?;
    let (sock, local) = worker_socket(a, server)?;
    let mut ep = Endpoint::new(EndpointConfig::new(local).random_keys());
    let mut worker = Worker::new(&mut ep, cfg, frame_len)?;
    let mut drv = Driver::new(sock);
    drv.publish_to(counters.board.clone(), "ims");
    let stop = StopFlag::install()?;
    let flag = stop.arc();
    let pb = progress_bar(a.common.json || a.common.quiet);
    let t0 = Instant::now();
    // --seconds: stop sending new frames then, and give the ones in flight one timeout
    let until = a.common.seconds.map(|s| t0 + s);
    let sent = run::send(
        &mut drv,
        &mut ep,
        &mut worker,
        src.as_mut(),
        RunOpts {
            stop: &flag,
            deadline: until.map(|t| t + cfg.timeout.min(cfg.silence)),
            every: Duration::from_millis(50),
        },
        &mut |w| {
            if until.is_some_and(|t| Instant::now() >= t) {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            pb.set_message(send_progress(w, t0));
            pb.tick();
        },
    );
    pb.finish_and_clear();
    let snap = counters.finish(
        "ims send",
        drv.link("ims", &ep),
        a.common.json || a.common.quiet,
    );
    if let Err(e) = sent {
        if e.raw_os_error() == Some(libc::EMSGSIZE) {
            bail!(
                "{e}: packets of {} payload bytes do not fit the path MTU to {server} (with 1500-byte Ethernet frames use --packet 1408)",
                a.packet
            );
        }
        return Err(e.into());
    }
    send_summary(a, &worker, &ep, snap, t0.elapsed().as_secs_f64())
}

fn send_progress(w: &Worker, t0: Instant) -> String {
    let st = w.stats();
    format!(
        "{:?} | {} frames {:.2} Gbit/s | {} in flight | {} NACKs | {} retransmissions | {} timeouts",
        w.state(),
        st.frames,
        gbps(st.bytes, t0.elapsed().as_secs_f64()),
        w.in_flight(),
        st.nacks,
        st.retransmissions,
        st.timeouts
    )
}

/// Print what the worker did; exit 2 if it failed, 1 if frames were never acknowledged.
fn send_summary(
    a: &SendArgs,
    worker: &Worker,
    ep: &Endpoint,
    snap: rocelink_runtime::counters::Snapshot,
    secs: f64,
) -> Result<ExitCode> {
    let st = worker.stats();
    let unacked = worker.unacknowledged();
    let failed = match worker.state() {
        WorkerState::Failed(e) => Some(e.to_string()),
        WorkerState::Done => None,
        s => Some(format!("stopped while {s:?}")),
    };
    let refused = ep
        .qp_stats(worker.data_qpn())
        .map_or(0, |q| q.foreign_port + q.psn_refused);
    if a.common.json {
        println!(
            "{}",
            json!({"frames": st.frames, "bytes": st.bytes, "acked": st.acked, "nacks": st.nacks,
                   "nacked": nacked_json(&st.nacked), "nacked_total": st.nacks,
                   "retransmissions": st.retransmissions, "timeouts": st.timeouts,
                   "window_stalls": st.window_stalls, "corrupt": 0, "stale_answers": st.stale,
                   "early_acks": st.early_acks, "answers_refused": refused, "marked": st.marked,
                   "unacknowledged_frames": unacked.len(),
                   "unacknowledged": unacked.iter().take(16).map(|va| format!("{va:#x}")).collect::<Vec<_>>(),
                   "gbps": gbps(st.bytes, secs), "seconds": secs, "error": failed, "counters": snap})
        );
    } else if !a.common.quiet {
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
        if refused + st.early_acks > 0 {
            println!(
                "{} answers refused: not from the unit's data channel in sequence, or ACKing a frame not yet sent whole",
                refused + st.early_acks
            );
        }
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
