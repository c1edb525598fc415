//! `rocelink probe`, `rocelink shots` and `rocelink trigger`: the ultrasound probe, the host
//! that receives its shots (`rocelink_ultrasound`), and the trigger round trip.

use crate::args;
use crate::out::{gbps, progress_bar};
use crate::stats::Counters;
use crate::stop::StopFlag;
use anyhow::{Context, Result, bail};
use rocelink_runtime::bind_roce;
use rocelink_runtime::{Driver, RunOpts};
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_ultrasound::run::{self, TriggerTarget, Triggering};
use rocelink_ultrasound::sink::record_config;
use rocelink_ultrasound::{
    Geometry, Host, HostConfig, Probe, ProbeConfig, ShotReport, ShotSink, SinkStats,
};
use serde_json::json;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
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
    fn addrs(&self) -> Result<(Vec<IpAddr>, bool)> {
        let chosen = !self.bind.is_empty();
        let first = self
            .bind
            .first()
            .copied()
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        match (self.bind.len(), self.links) {
            (0 | 1, n) => match first {
                IpAddr::V4(v4) => Ok((
                    (0..n)
                        .map(|i| IpAddr::V4(Ipv4Addr::from(u32::from(v4).wrapping_add(i as u32))))
                        .collect(),
                    chosen,
                )),
                IpAddr::V6(_) if n == 1 => Ok((vec![first], chosen)),
                IpAddr::V6(_) => {
                    bail!("--links {n} with one IPv6 --bind: give one address per link")
                }
            },
            (k, n) if n == 1 || k == n => Ok((self.bind.clone(), chosen)),
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

/// Bind link `i`'s RoCE socket; an endpoint on it.
fn bind_link(ip: IpAddr, port: u16, chosen: bool) -> Result<(Driver, Endpoint, SocketAddr)> {
    let (sock, ip) = bind_roce(ip, port, chosen)?;
    let local = SocketAddr::new(ip, port);
    let ep = Endpoint::new(EndpointConfig::new(local).random_keys());
    Ok((Driver::new(sock), ep, local))
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
    let (ips, chosen) = a.links.addrs()?;
    let g = a.shape.per_link(ips.len())?;
    let counters = Counters::start("probe", &a.links.counters)?;
    let mut links = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        let (mut drv, mut ep, local) = bind_link(*ip, a.links.port, chosen)?;
        drv.publish_to(counters.board.clone(), &format!("link{i}"));
        let taddr = SocketAddr::new(local.ip(), a.trigger_port);
        let trig = UdpSocket::bind(taddr)
            .with_context(|| format!("cannot bind the trigger socket {taddr}"))?;
        let cfg = ProbeConfig {
            seed: a.shape.seed + i as u64,
            rate_gbps: a.rate,
            trigger_mhz: Some((a.trigger_hz * 1000.0).round().max(1.0) as u32),
            ..ProbeConfig::new(g)
        };
        let probe = Probe::new(&mut ep, cfg)?;
        if !a.json && !a.quiet {
            eprintln!(
                "rocelink probe: link {i} RoCE {local} QPN {:#x}, triggers on {taddr}; {} samples x {} channels = {} bytes in {} messages per shot",
                probe.qpn(),
                g.samples,
                g.channels,
                g.bytes(),
                g.messages()
            );
        }
        links.push((drv, ep, probe, trig));
    }
    let gate = probe_gate(a, &ips);
    let stop = StopFlag::install()?;
    let flag = stop.arc();
    let t0 = Instant::now();
    let deadline = a.seconds.map(|s| t0 + s);
    let pb = progress_bar(a.json || a.quiet);
    let gate = &gate;
    let results: Vec<Result<(rocelink_ultrasound::ProbeStats, run::TriggerStats)>> =
        std::thread::scope(|s| {
            let handles: Vec<_> = links
                .into_iter()
                .enumerate()
                .map(|(i, (mut drv, mut ep, mut probe, trig))| {
                    let flag = &flag;
                    let pb = &pb;
                    let board = &counters.board;
                    s.spawn(move || -> Result<_> {
                        let t = run::probe(
                            &mut drv,
                            &mut ep,
                            &mut probe,
                            &trig,
                            gate.clone(),
                            RunOpts {
                                stop: flag,
                                deadline,
                                every: Duration::from_millis(100),
                            },
                            &mut |p| {
                                if i == 0 {
                                    let st = p.stats();
                                    pb.set_message(format!(
                                        "{} triggers | {} shots | {} missed | {:.2} Gbit/s",
                                        st.triggers,
                                        st.shots,
                                        st.missed,
                                        gbps(st.bytes, t0.elapsed().as_secs_f64())
                                    ));
                                }
                            },
                        )
                        .map_err(|e| {
                            if e.raw_os_error() == Some(libc::EMSGSIZE) {
                                anyhow::anyhow!(
                                    "link {i}: a {}-byte message does not fit the path MTU ({e}): UD messages travel whole, so the interfaces need an MTU of at least {} (jumbo frames)",
                                    g.message_bytes,
                                    g.message_bytes + 100
                                )
                            } else {
                                anyhow::Error::from(e).context(format!("link {i}"))
                            }
                        })?;
                        board.set_link(drv.link(&format!("link{i}"), &ep));
                        Ok((*probe.stats(), t))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| bail!("a probe thread panicked"))
                })
                .collect()
        });
    pb.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    let mut per = Vec::new();
    for r in results {
        per.push(r?);
    }
    let sum = |f: &dyn Fn(&rocelink_ultrasound::ProbeStats) -> u64| -> u64 {
        per.iter().map(|(p, _)| f(p)).sum()
    };
    let (triggers, shots, missed, bytes, refused) = (
        sum(&|p| p.triggers),
        sum(&|p| p.shots),
        sum(&|p| p.missed),
        sum(&|p| p.bytes),
        sum(&|p| p.refused),
    );
    let malformed: u64 = per.iter().map(|(_, t)| t.malformed).sum();
    let gate = |f: &dyn Fn(&rocelink_ultrasound::GateStats) -> u64| -> u64 {
        per.iter().map(|(_, t)| f(&t.gate)).sum()
    };
    let (challenges, not_allowed, not_owner) = (
        gate(&|g| g.challenges),
        gate(&|g| g.not_allowed),
        gate(&|g| g.not_owner),
    );
    let snap = counters.summary("probe", a.json || a.quiet);
    if a.json {
        println!(
            "{}",
            json!({"links": per.len(), "triggers": triggers, "shots": shots, "missed": missed,
                   "messages": sum(&|p| p.messages), "bytes": bytes, "refused": refused,
                   "malformed_commands": malformed, "challenges": challenges,
                   "not_allowed": not_allowed, "not_owner": not_owner,
                   "gbps": gbps(bytes, secs), "seconds": secs,
                   "counters": snap})
        );
    } else if !a.quiet {
        println!(
            "{shots} shots ({bytes} bytes) sent in {secs:.2} s; {triggers} triggers, {missed} missed while sending, {refused} refused, {malformed} malformed commands"
        );
        if challenges + not_allowed + not_owner > 0 {
            println!(
                "trigger port: {challenges} challenges sent, {not_allowed} commands from hosts not allowed, {not_owner} from a host that did not start the session"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
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

/// What one link's host thread ends with.
struct LinkEnd {
    local: SocketAddr,
    sink: SinkStats,
    host: rocelink_ultrasound::HostStats,
    triggers: run::TriggerStats,
    icrc_errors: u64,
    recorded: Option<rocelink_record::Summary>,
    span: Option<(Instant, Instant)>,
}

pub(crate) fn shots(a: &ShotsArgs) -> Result<ExitCode> {
    let (ips, chosen) = a.links.addrs()?;
    let n = ips.len();
    let g = a.shape.per_link(n)?;
    if !a.passive && a.probe.len() != n {
        bail!(
            "--probe names {} trigger address(es) for {n} link(s): one per link",
            a.probe.len()
        );
    }
    if let Some(d) = &a.record {
        args::record_dir(d, false)?;
    }
    let counters = Counters::start("shots", &a.links.counters)?;
    let mut links = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        let (mut drv, mut ep, local) = bind_link(*ip, a.links.port, chosen)?;
        drv.publish_to(counters.board.clone(), &format!("link{i}"));
        let cfg = HostConfig {
            buffers: a.buffers,
            timeout: a.timeout,
            ahead: a.ahead,
            ..HostConfig::new(g)
        };
        let mut host = Host::new(&mut ep, cfg)?;
        if a.passive
            && let Some(p) = a.probe.get(i).or(a.probe.first())
        {
            host.accept_from(p.ip(), None);
        }
        let record = a.record.as_ref().map(|d| {
            let dir = if n == 1 {
                d.clone()
            } else {
                d.join(format!("link{i}"))
            };
            record_config(dir, &g)
        });
        let sink = ShotSink::new(g, a.verify.then_some(a.shape.seed + i as u64), record)
            .context("--record")?;
        if !a.json && !a.quiet {
            eprintln!(
                "rocelink shots: link {i} on {local} QPN {:#x}, {} samples x {} channels = {} bytes per shot{}",
                host.qpn(),
                g.samples,
                g.channels,
                g.bytes(),
                if a.passive {
                    String::new()
                } else {
                    format!(", triggering {}", a.probe[i])
                }
            );
        }
        links.push((drv, ep, host, sink, local, cfg.qkey));
    }
    let stop = StopFlag::install()?;
    let flag = stop.arc();
    let t0 = Instant::now();
    let deadline = a.seconds.map(|s| t0 + s);
    let pb = progress_bar(a.json || a.quiet);
    let out = Mutex::new(std::io::stdout());
    let ns = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(t0).as_nanos() as u64);
    let results: Vec<Result<LinkEnd>> = std::thread::scope(|s| {
        let handles: Vec<_> = links
            .into_iter()
            .enumerate()
            .map(|(i, (mut drv, mut ep, mut host, mut sink, local, qkey))| {
                let (flag, pb, out, ns) = (&flag, &pb, &out, &ns);
                let board = &counters.board;
                let plan = if a.passive {
                    Triggering::None
                } else {
                    Triggering::Periodic {
                        probe: a.probe[i],
                        millihertz: a.trigger_hz.map_or(0, |h| (h * 1000.0).round().max(1.0) as u32),
                        // until stopped: --shots counts shots handed on, not triggers
                        // (a trigger the probe misses while still sending makes none)
                        count: 0,
                    }
                };
                s.spawn(move || -> Result<LinkEnd> {
                    let mut span: Option<(Instant, Instant)> = None;
                    let mut each = |r: &ShotReport, bytes: Option<&[u8]>| {
                        let o = sink.take(r, bytes);
                        if let (Some(f), Some(l)) = (r.first, r.last) {
                            span = Some(span.map_or((f, l), |(a, _)| (a, l)));
                        }
                        if a.json {
                            let line = json!({"link": i, "shot": r.shot, "bytes": r.bytes,
                                "messages": r.messages, "missing": r.missing, "complete": r.complete,
                                "verified": o.verified, "recorded": o.recorded, "dropped": o.dropped,
                                "moved": r.moved, "t_trigger_ns": ns(r.trigger),
                                "t_complete_ns": ns(r.last.filter(|_| r.complete))});
                            if let Ok(mut w) = out.lock() {
                                let _ = writeln!(w, "{line}");
                            }
                        }
                    };
                    let triggers = run::host(
                        &mut drv,
                        &mut ep,
                        &mut host,
                        plan,
                        TriggerTarget { port: local.port(), qkey },
                        a.shots,
                        &mut each,
                        RunOpts { stop: flag, deadline, every: Duration::from_millis(100) },
                        &mut |h| {
                            if i == 0 {
                                let st = h.stats();
                                pb.set_message(format!(
                                    "{} shots | {} complete | {} missing messages | {:.2} Gbit/s",
                                    st.shots,
                                    st.complete,
                                    st.missing,
                                    gbps(st.complete * g.bytes() as u64, t0.elapsed().as_secs_f64())
                                ));
                            }
                        },
                    )?;
                    let recorded = sink.finish().context("--record")?;
                    board.set_link(drv.link(&format!("link{i}"), &ep));
                    Ok(LinkEnd {
                        local,
                        sink: *sink.stats(),
                        host: *host.stats(),
                        triggers,
                        icrc_errors: ep.stats().icrc_errors,
                        recorded,
                        span,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("a host thread panicked")))
            .collect()
    });
    pb.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    let mut ends = Vec::new();
    for r in results {
        ends.push(r?);
    }
    let snap = counters.summary("shots", a.json || a.quiet);
    summarize(a, &ends, secs, g, &snap)
}

fn summarize(
    a: &ShotsArgs,
    ends: &[LinkEnd],
    secs: f64,
    g: Geometry,
    counters: &rocelink_runtime::counters::Snapshot,
) -> Result<ExitCode> {
    let sum = |f: &dyn Fn(&LinkEnd) -> u64| -> u64 { ends.iter().map(f).sum() };
    let shots = sum(&|e| e.sink.shots);
    let complete = sum(&|e| e.sink.complete);
    let bytes = sum(&|e| e.sink.bytes);
    let corrupt = sum(&|e| e.sink.corrupt);
    let dropped = sum(&|e| e.sink.dropped);
    let recorded = sum(&|e| e.sink.recorded);
    // the rate while shots arrived: first message of the first shot to the last shot
    let span = ends
        .iter()
        .filter_map(|e| e.span)
        .reduce(|x, y| (x.0.min(y.0), x.1.max(y.1)))
        .map_or(secs, |(f, l)| (l - f).as_secs_f64().max(1e-9));
    let fr = complete as f64 / ends.len().max(1) as f64 / span;
    let per_link: Vec<_> = ends
        .iter()
        .map(|e| {
            json!({"addr": e.local.to_string(), "shots": e.sink.shots, "complete": e.sink.complete,
                   "missing_messages": e.host.missing, "moved": e.host.moved,
                   "duplicates": e.host.duplicates, "late": e.host.late, "malformed": e.host.malformed,
                   "stray": e.host.stray, "icrc_errors": e.icrc_errors,
                   "trigger_commands": e.triggers.commands, "challenges": e.triggers.challenges,
                   "recording": e.recorded.as_ref().map(|r| json!({"frames": r.frames, "bytes": r.bytes,
                       "dropped": r.dropped, "direct": r.direct, "stopped": r.stopped}))})
        })
        .collect();
    if a.json {
        println!(
            "{}",
            json!({"summary": true, "links": ends.len(), "samples": g.samples, "channels_per_link": g.channels,
                   "shot_bytes": g.bytes(), "shots": shots, "complete": complete,
                   "incomplete": shots - complete, "missing_messages": sum(&|e| e.host.missing),
                   "bytes": bytes, "verified": sum(&|e| e.sink.verified), "corrupt": corrupt,
                   "recorded": recorded, "dropped": dropped, "stray": sum(&|e| e.host.stray),
                   "frame_rate_hz": fr, "gbps": gbps(bytes, span), "seconds": secs, "per_link": per_link,
                   "counters": counters})
        );
    } else if !a.quiet {
        println!(
            "{shots} shots over {} link(s): {complete} complete, {} incomplete ({} messages missing); {:.2} Gbit/s, {:.0} shots/s per link{}{}",
            ends.len(),
            shots - complete,
            sum(&|e| e.host.missing),
            gbps(bytes, span),
            fr,
            if a.verify {
                format!(
                    "; {} verified, {corrupt} corrupt",
                    sum(&|e| e.sink.verified)
                )
            } else {
                String::new()
            },
            if a.record.is_some() {
                format!("; {recorded} recorded, {dropped} dropped whole")
            } else {
                String::new()
            }
        );
    }
    let stray = sum(&|e| e.host.stray);
    if stray > 0 && !a.quiet && !a.json {
        println!(
            "{stray} messages dropped as stray: not from the probe triggered (its address and QP), or numbered more than --ahead shots ahead"
        );
    }
    let stopped = ends
        .iter()
        .filter_map(|e| e.recorded.as_ref()?.stopped.clone())
        .next();
    if let Some(why) = stopped {
        eprintln!("rocelink shots: the recording stopped early: {why}");
    }
    Ok(if corrupt > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
