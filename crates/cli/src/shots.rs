//! `rocelink probe`, `rocelink shots` and `rocelink trigger`: the ultrasound probe, the host
//! that receives its shots (`rocelink_ultrasound`), and the trigger round trip.

use crate::args;
use crate::out::{gbps, progress_bar};
use crate::stats::Counters;
use crate::stop::StopFlag;
use anyhow::{Result, bail};
use rocelink_runtime::Session;
use rocelink_ultrasound::Geometry;
use rocelink_ultrasound::session::LinkAddrs;
use rocelink_ultrasound::session::probe::{ProbeSession, ProbeSessionConfig, ProbeSummary};
use rocelink_ultrasound::session::shots::{ShotEvent, ShotsConfig, ShotsSession, ShotsSummary};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Where each link is: `--bind` lists one address per link; one IPv4 address with
/// `--links N` stands for N consecutive ones.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Links {
    /// Address(es) to bind, comma-separated, one per link (default 127.0.0.1).
    #[arg(long, value_delimiter = ',')]
    bind: Vec<IpAddr>,
    /// Links (two probe halves, each with its own socket, QP and thread); channels are
    /// split evenly between them.
    #[arg(long, default_value = "1", value_parser = args::usize_in(1, 8))]
    links: usize,
    /// RoCE UDP port.
    #[arg(long, default_value_t = 4791)]
    port: u16,
    #[command(flatten)]
    counters: crate::stats::CounterArgs,
}

impl Links {
    /// The address of every link, and whether the user chose them.
    fn addrs(&self) -> Result<LinkAddrs> {
        let chosen = !self.bind.is_empty();
        let first = self
            .bind
            .first()
            .copied()
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        match (self.bind.len(), self.links) {
            (0 | 1, n) => LinkAddrs::consecutive(first, n, self.port, chosen).ok_or_else(|| {
                anyhow::anyhow!("--links {n} with one IPv6 --bind: give one address per link")
            }),
            (k, n) if n == 1 || k == n => Ok(LinkAddrs {
                addrs: self.bind.clone(),
                port: self.port,
                chosen,
            }),
            (k, n) => bail!("--bind names {k} addresses but --links is {n}"),
        }
    }
}

/// The shot's shape, split over the links.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Samples per channel (N_s).
    #[arg(long, default_value = "1000", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    samples: u32,
    /// Channels of the whole probe (split evenly over the links; even per link).
    #[arg(long, default_value = "96", value_parser = clap::value_parser!(u16).range(2..))]
    channels: u16,
    /// Seed of the synthetic echoes (link i uses seed + i).
    #[arg(long, default_value = "1", value_parser = args::u64_num)]
    seed: u64,
}

impl Shape {
    fn per_link(&self, links: usize) -> Result<Geometry> {
        let c = usize::from(self.channels);
        if !c.is_multiple_of(2 * links) {
            bail!(
                "--channels {c} over {links} link(s): each link needs an even number of channels"
            );
        }
        Ok(Geometry::checked(self.samples, (c / links) as u16)?)
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct ProbeArgs {
    #[command(flatten)]
    links: Links,
    #[command(flatten)]
    shape: Shape,
    /// UDP port the probe takes trigger commands on.
    #[arg(long, default_value_t = 4792)]
    trigger_port: u16,
    /// Hosts that may trigger the probe: ADDR, ADDR/PREFIX or any, comma-separated or
    /// repeated (loopback is always allowed). Each must first echo the probe's challenge
    /// from its address, and only the host that started a session may stop or change it.
    #[arg(long, value_delimiter = ',', value_name = "ADDR[/PREFIX]")]
    allow: Vec<rocelink_ultrasound::Prefix>,
    /// The probe's own trigger frequency, used when a start command names none.
    #[arg(long, default_value = "1000", value_parser = args::rate)]
    trigger_hz: f64,
    /// Pace each link to this many Gbit/s of payload (default: as fast as it goes).
    #[arg(long, value_parser = args::rate)]
    rate: Option<f64>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = args::secs)]
    seconds: Option<Duration>,
    /// Print one JSON object at the end (and nothing else on stdout).
    #[arg(long)]
    json: bool,
    /// No progress line or summary text.
    #[arg(long)]
    quiet: bool,
}

/// The trigger port's rules: loopback and `--allow`; a note when the probe listens
/// beyond loopback and nobody there may trigger it.
fn probe_gate(a: &ProbeArgs, ips: &[IpAddr]) -> rocelink_ultrasound::GateConfig {
    let mut gate = rocelink_ultrasound::GateConfig::default();
    gate.allow.extend(a.allow.iter().copied());
    if a.allow.is_empty() && !a.quiet && !a.json && ips.iter().any(|ip| !ip.is_loopback()) {
        eprintln!(
            "rocelink probe: note: only loopback hosts may trigger it; --allow ADDR[/PREFIX] lets others in"
        );
    }
    gate
}

pub(crate) fn probe(a: &ProbeArgs) -> Result<ExitCode> {
    let links = a.links.addrs()?;
    let g = a.shape.per_link(links.addrs.len())?;
    let counters = Counters::start("probe", &a.links.counters)?;
    let cfg = ProbeSessionConfig {
        gate: probe_gate(a, &links.addrs),
        links,
        trigger_port: a.trigger_port,
        seed: a.shape.seed,
        rate_gbps: a.rate,
        trigger_hz: a.trigger_hz,
        duration: a.seconds,
        ..ProbeSessionConfig::new(g)
    };
    let session = ProbeSession::start(cfg, Some(counters.board.clone()))?;
    if !a.json && !a.quiet {
        for (i, l) in session.links().iter().enumerate() {
            eprintln!(
                "rocelink probe: link {i} RoCE {} QPN {:#x}, triggers on {}; {} samples x {} channels = {} bytes in {} messages per shot",
                l.local,
                l.qpn,
                l.triggers,
                g.samples,
                g.channels,
                g.bytes(),
                g.messages()
            );
        }
    }
    let stop = StopFlag::install()?;
    let pb = progress_bar(a.json || a.quiet);
    let t0 = Instant::now();
    crate::stop::watch(
        &stop,
        &session.stopper(),
        &|| session.is_finished(),
        &mut || {
            let st = session.progress();
            pb.set_message(format!(
                "{} triggers | {} shots | {} missed | {:.2} Gbit/s",
                st.triggers,
                st.shots,
                st.missed,
                gbps(st.bytes, t0.elapsed().as_secs_f64())
            ));
        },
    );
    pb.finish_and_clear();
    let sum = session.wait()?;
    let snap = counters.summary("probe", a.json || a.quiet);
    print_probe(a, &sum, snap);
    Ok(ExitCode::SUCCESS)
}

fn print_probe(a: &ProbeArgs, s: &ProbeSummary, counters: rocelink_runtime::counters::Snapshot) {
    let (p, t) = (&s.probe, &s.triggers);
    if a.json {
        println!("{}", crate::out::summary_json(s, counters));
    } else if !a.quiet {
        println!(
            "{} shots ({} bytes) sent in {:.2} s; {} triggers, {} missed while sending, {} refused, {} malformed commands",
            p.shots, p.bytes, s.seconds, p.triggers, p.missed, p.refused, t.malformed
        );
        let g = &t.gate;
        if g.challenges + g.not_allowed + g.not_owner > 0 {
            println!(
                "trigger port: {} challenges sent, {} commands from hosts not allowed, {} from a host that did not start the session",
                g.challenges, g.not_allowed, g.not_owner
            );
        }
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct ShotsArgs {
    #[command(flatten)]
    links: Links,
    #[command(flatten)]
    shape: Shape,
    /// The probe's trigger address(es), one per link (port 4792 unless given); the host
    /// starts it with a start command and stops it at the end.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:4792", value_parser = trigger_addr)]
    probe: Vec<SocketAddr>,
    /// Trigger frequency asked of the probe (default: the probe's own).
    #[arg(long, value_parser = args::rate)]
    trigger_hz: Option<f64>,
    /// Do not trigger: receive what the probe at --probe sends, triggered by someone
    /// else (messages from any other address are dropped).
    #[arg(long, conflicts_with_all = ["trigger_hz"])]
    passive: bool,
    /// Take messages of shots at most this many ahead of the next one to hand on (the
    /// rest are stray: a forged number cannot make the host give up real shots).
    #[arg(long, default_value = "64", value_parser = clap::value_parser!(u64).range(2..=16384))]
    ahead: u64,
    /// Stop after this many shots (per link).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    shots: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = args::secs)]
    seconds: Option<Duration>,
    /// Check every byte of every complete shot against the generator (`--seed`).
    #[arg(long)]
    verify: bool,
    /// Record complete shots to this directory (new or empty; `linkN` inside with two
    /// links). Shots the disk cannot keep up with are dropped whole and counted.
    #[arg(long)]
    record: Option<PathBuf>,
    /// Give a shot up this long after its last message.
    #[arg(long, default_value = "0.1", value_parser = args::secs)]
    timeout: Duration,
    /// Shot buffers per link.
    #[arg(long, default_value = "8", value_parser = args::usize_in(2, 4096))]
    buffers: usize,
    /// One JSON line per shot, then a summary line.
    #[arg(long)]
    json: bool,
    /// No progress line or summary text.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    view: crate::view::ViewArgs,
}

/// One geometry per shot size, each checked.
pub(crate) fn geometries(samples: &[u32], channels: u16) -> Result<Vec<Geometry>> {
    Ok(samples
        .iter()
        .map(|&s| Geometry::checked(s, channels))
        .collect::<Result<_, _>>()?)
}

/// `IP` or `IP:PORT` (port 4792 by default).
pub(crate) fn trigger_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 4792)))
        .map_err(|_| format!("{s:?}: a trigger address is IP or IP:PORT"))
}

pub(crate) fn shots(a: &ShotsArgs) -> Result<ExitCode> {
    let links = a.links.addrs()?;
    let g = a.shape.per_link(links.addrs.len())?;
    if let Some(d) = &a.record {
        args::record_dir(d, false)?;
    }
    let counters = Counters::start("shots", &a.links.counters)?;
    let view = a.view.start("shots", |addr| {
        rocelink_ultrasound::session::view::serve(addr, "shots", &g, Some(counters.board.clone()))
    })?;
    let cfg = ShotsConfig {
        with_data: view.is_some(),
        data_every: rocelink_view::PICTURE_EVERY,
        links,
        probes: a.probe.clone(),
        passive: a.passive,
        trigger_hz: a.trigger_hz,
        ahead: a.ahead,
        shots: a.shots,
        duration: a.seconds,
        verify_seed: a.verify.then_some(a.shape.seed),
        record: a.record.clone(),
        timeout: a.timeout,
        buffers: a.buffers,
        ..ShotsConfig::new(g)
    };
    let session = ShotsSession::start(cfg, Some(counters.board.clone()))?;
    if !a.json && !a.quiet {
        for (i, l) in session.links().iter().enumerate() {
            eprintln!(
                "rocelink shots: link {i} on {} QPN {:#x}, {} samples x {} channels = {} bytes per shot{}",
                l.local,
                l.qpn,
                g.samples,
                g.channels,
                g.bytes(),
                l.probe
                    .map(|p| format!(", triggering {p}"))
                    .unwrap_or_default()
            );
        }
    }
    let live = view.as_ref().map(rocelink_view::Served::live);
    follow(&session, a.json || a.quiet, a.json, g, live)?;
    let sum = session.wait()?;
    crate::view::end(view, || rocelink_ultrasound::session::view::summary(&sum));
    let snap = counters.summary("shots", a.json || a.quiet);
    summarize(a, &sum, &snap)
}

/// Until the session ends: each shot as it comes (a JSON line with `json`), a progress line
/// (unless `hidden`), Ctrl-C passed on to the session.
fn follow(
    session: &ShotsSession,
    hidden: bool,
    json: bool,
    g: Geometry,
    live: Option<&rocelink_view::Live>,
) -> Result<()> {
    let stop = StopFlag::install()?;
    let pb = progress_bar(hidden);
    let (t0, stopper) = (session.started(), session.stopper());
    let mut view = rocelink_ultrasound::session::view::Publisher::default();
    let mut each = |ev: &ShotEvent| {
        print_shot(json, ev);
        if let Some(l) = live {
            view.shot(l, ev);
        }
    };
    let mut shown = Instant::now();
    loop {
        if stop.is_set() {
            stopper.stop();
        }
        match session.next_event(Duration::from_millis(100)) {
            Some(ev) => each(&ev),
            None if session.is_finished() => break,
            None => {}
        }
        if shown.elapsed() >= Duration::from_millis(100) {
            shown = Instant::now();
            let st = session.progress();
            pb.set_message(format!(
                "{} shots | {} complete | {} missing messages | {:.2} Gbit/s",
                st.shots,
                st.complete,
                st.missing,
                gbps(st.complete * g.bytes() as u64, t0.elapsed().as_secs_f64())
            ));
        }
    }
    // what the links handed on just before they ended
    while let Some(ev) = session.next_event(Duration::ZERO) {
        each(&ev);
    }
    pb.finish_and_clear();
    Ok(())
}

/// One shot as a JSON line (`--json`: the event's serialisation); nothing otherwise.
fn print_shot(json: bool, ev: &ShotEvent) {
    if json {
        println!("{}", serde_json::to_value(ev).unwrap_or_default());
    }
}

fn summarize(
    a: &ShotsArgs,
    s: &ShotsSummary,
    counters: &rocelink_runtime::counters::Snapshot,
) -> Result<ExitCode> {
    let (shots, complete) = (s.sink(|k| k.shots), s.sink(|k| k.complete));
    let (corrupt, verified) = (s.sink(|k| k.corrupt), s.sink(|k| k.verified));
    let (recorded, dropped) = (s.sink(|k| k.recorded), s.sink(|k| k.dropped));
    let (missing, stray) = (s.host(|h| h.missing), s.host(|h| h.stray));
    let resyncs = s.host(|h| h.resyncs);
    let fr = s.shots_per_second();
    if a.json {
        println!("{}", crate::out::summary_json(s, counters.clone()));
    } else if !a.quiet {
        let verify = a
            .verify
            .then(|| format!("; {verified} verified, {corrupt} corrupt"));
        let record = a
            .record
            .as_ref()
            .map(|_| format!("; {recorded} recorded, {dropped} dropped whole"));
        println!(
            "{shots} shots over {} link(s): {complete} complete, {} incomplete ({missing} messages missing); {:.2} Gbit/s, {fr:.0} shots/s per link{}{}",
            s.links.len(),
            shots - complete,
            s.gbps(),
            verify.unwrap_or_default(),
            record.unwrap_or_default()
        );
        if stray > 0 {
            println!(
                "{stray} messages dropped as stray: not from the probe triggered (its address and QP), or numbered more than --ahead shots ahead"
            );
        }
        if resyncs > 0 {
            println!(
                "{resyncs} time(s) a loss longer than --ahead shots: the host moved on to the probe's current shot after --timeout"
            );
        }
    }
    if let Some(why) = s.recording_stopped() {
        eprintln!("rocelink shots: the recording stopped early: {why}");
    }
    Ok(if corrupt > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
