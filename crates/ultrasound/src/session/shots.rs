//! The host receiving shots as a session: one thread per link, each a [`Host`] with its
//! [`ShotSink`] (verification, recording), triggering its half of the probe; every shot
//! handed on is an [`ShotEvent`].
//!
//! Events go through a bounded queue: a reader that falls behind loses events (counted in
//! the summary), never shots — the links never wait for it (the recorder's
//! drop-don't-stall rule).

use super::{EVERY, LinkAddrs, Session, Stopper, bind_link, join_all, link_error};
use crate::run::{self, TriggerStats, TriggerTarget, Triggering};
use crate::sink::record_config;
use crate::{
    Error, Geometry, Host, HostStats, Outcome, ShotHostConfig, ShotReport, ShotSink, SinkStats,
};
use rocelink_runtime::RunOpts;
use rocelink_runtime::counters::Board;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a shots session is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShotsConfig {
    /// Where its links are.
    pub links: LinkAddrs,
    /// The shot of one link.
    pub geometry: Geometry,
    /// Each link's probe trigger address (one per link). Empty with `passive`.
    pub probes: Vec<SocketAddr>,
    /// Do not trigger: take what the probe at `probes` sends when someone else triggers it
    /// (with no probe named, from anyone).
    pub passive: bool,
    /// Trigger frequency asked of the probe (`None`: the probe's own).
    pub trigger_hz: Option<f64>,
    /// Shots accepted ahead of the next one to hand on.
    pub ahead: u64,
    /// End after this many shots per link.
    pub shots: Option<u64>,
    /// End after this long.
    pub duration: Option<Duration>,
    /// Check every complete shot against the echoes of this seed (link i: seed + i).
    pub verify_seed: Option<u64>,
    /// Record complete shots here (`linkN` inside with several links).
    pub record: Option<PathBuf>,
    /// Give a shot up this long after its last message.
    pub timeout: Duration,
    /// Shot buffers per link.
    pub buffers: usize,
    /// Events the queue holds before it drops them.
    pub events: usize,
    /// Hand each complete shot's bytes on with its event (a copy: the shot buffer goes
    /// back to the receive queue at once).
    #[serde(default)]
    pub with_data: bool,
    /// With `with_data`: the bytes of at most one shot per this interval (a live view's
    /// pictures), the others' events without them. Zero: every complete shot's.
    #[serde(default)]
    pub data_every: Duration,
}

impl ShotsConfig {
    /// One link on 127.0.0.1 triggering the probe at 127.0.0.1:4792.
    pub fn new(geometry: Geometry) -> ShotsConfig {
        let h = ShotHostConfig::new(geometry);
        ShotsConfig {
            links: LinkAddrs {
                addrs: vec![[127, 0, 0, 1].into()],
                port: 4791,
                chosen: false,
            },
            geometry,
            probes: vec![SocketAddr::from(([127, 0, 0, 1], 4792))],
            passive: false,
            trigger_hz: None,
            ahead: h.ahead,
            shots: None,
            duration: None,
            verify_seed: None,
            record: None,
            timeout: h.timeout,
            buffers: h.buffers,
            events: 65_536,
            with_data: false,
            data_every: Duration::ZERO,
        }
    }
}

/// One shot handed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShotEvent {
    /// The link it came on.
    pub link: usize,
    /// Since the session started: when its trigger was sent (if the host sent it), and
    /// when its last message was taken (if it is complete), in nanoseconds.
    pub since_start_ns: (Option<u64>, Option<u64>),
    /// What arrived of it.
    pub report: ShotReport,
    /// Checked, recorded or dropped.
    pub outcome: Outcome,
    /// Its bytes, for a complete shot when [`ShotsConfig::with_data`] asks for them (not
    /// serialised: a consumer reads them here).
    pub data: Option<Arc<[u8]>>,
}

/// Serialised flat, as `rocelink shots --json` prints each shot: `link`, `shot`, `bytes`,
/// `messages`, `missing`, `complete`, `verified`, `recorded`, `dropped`, `moved`,
/// `t_trigger_ns`, `t_complete_ns` (its bytes are not serialised).
impl serde::Serialize for ShotEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (r, o) = (&self.report, &self.outcome);
        let mut st = s.serialize_struct("ShotEvent", 12)?;
        st.serialize_field("link", &self.link)?;
        st.serialize_field("shot", &r.shot)?;
        st.serialize_field("bytes", &r.bytes)?;
        st.serialize_field("messages", &r.messages)?;
        st.serialize_field("missing", &r.missing)?;
        st.serialize_field("complete", &r.complete)?;
        st.serialize_field("verified", &o.verified)?;
        st.serialize_field("recorded", &o.recorded)?;
        st.serialize_field("dropped", &o.dropped)?;
        st.serialize_field("moved", &r.moved)?;
        st.serialize_field("t_trigger_ns", &self.since_start_ns.0)?;
        st.serialize_field("t_complete_ns", &self.since_start_ns.1)?;
        st.end()
    }
}

/// Where one link of a running host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShotsLink {
    /// Its RoCE address.
    pub local: SocketAddr,
    /// Its UD QP.
    pub qpn: u32,
    /// The probe it triggers, if it does.
    pub probe: Option<SocketAddr>,
}

/// What one link did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkSummary {
    /// Its RoCE address.
    pub local: SocketAddr,
    /// Shots checked, recorded, dropped.
    pub sink: SinkStats,
    /// Messages, loss, reassembly.
    pub host: HostStats,
    /// Trigger commands and challenges.
    pub triggers: TriggerStats,
    /// Packets whose ICRC failed.
    pub icrc_errors: u64,
    /// The recording, if one was made.
    pub recorded: Option<rocelink_record::Summary>,
    /// From the first message of its first shot to the last message of its last (not
    /// serialised: instants; [`ShotsSummary::active_seconds`] is their figure).
    #[serde(skip)]
    pub span: Option<(Instant, Instant)>,
}

/// What a shots session did. Serialised as the totals over its links — `sink` and `host`
/// (each link's counters summed), `icrc_errors` — then `geometry`, `seconds`,
/// `active_seconds`, `gbps` (complete shots' bytes over the active seconds),
/// `shots_per_second` (complete shots per link per active second), `events_dropped`, and
/// `links` (each link's own summary).
#[derive(Debug, Clone)]
pub struct ShotsSummary {
    /// The shot of one link.
    pub geometry: Geometry,
    /// Per link.
    pub links: Vec<LinkSummary>,
    /// How long it ran.
    pub seconds: f64,
    /// Events the reader did not take in time (the shots themselves were handled).
    pub events_dropped: u64,
}

impl serde::Serialize for ShotsSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (mut sink, mut host) = (SinkStats::default(), HostStats::default());
        for l in &self.links {
            sink += l.sink;
            host += l.host;
        }
        let active = self.active_seconds();
        let mut st = s.serialize_struct("ShotsSummary", 10)?;
        st.serialize_field("sink", &sink)?;
        st.serialize_field("host", &host)?;
        st.serialize_field(
            "icrc_errors",
            &self.links.iter().map(|l| l.icrc_errors).sum::<u64>(),
        )?;
        st.serialize_field("geometry", &self.geometry)?;
        st.serialize_field("seconds", &self.seconds)?;
        st.serialize_field("active_seconds", &active)?;
        st.serialize_field("gbps", &self.gbps())?;
        st.serialize_field("shots_per_second", &self.shots_per_second())?;
        st.serialize_field("events_dropped", &self.events_dropped)?;
        st.serialize_field("links", &self.links)?;
        st.end()
    }
}

impl ShotsSummary {
    /// A sink counter summed over the links.
    pub fn sink(&self, f: impl Fn(&SinkStats) -> u64) -> u64 {
        self.links.iter().map(|l| f(&l.sink)).sum()
    }

    /// A host counter summed over the links.
    pub fn host(&self, f: impl Fn(&HostStats) -> u64) -> u64 {
        self.links.iter().map(|l| f(&l.host)).sum()
    }

    /// Complete shots' bytes over [`Self::active_seconds`], Gbit/s.
    pub fn gbps(&self) -> f64 {
        rocelink_runtime::session::gbps(self.sink(|k| k.bytes), self.active_seconds())
    }

    /// Complete shots per link per second while shots arrived.
    pub fn shots_per_second(&self) -> f64 {
        let per_link = self.sink(|k| k.complete) as f64 / self.links.len().max(1) as f64;
        per_link / self.active_seconds()
    }

    /// Seconds while shots arrived: the first message of the first shot to the last
    /// message of the last (the whole run when none arrived).
    pub fn active_seconds(&self) -> f64 {
        self.links
            .iter()
            .filter_map(|l| l.span)
            .reduce(|x, y| (x.0.min(y.0), x.1.max(y.1)))
            .map_or(self.seconds, |(f, l)| (l - f).as_secs_f64().max(1e-9))
    }

    /// Why a recording stopped before the session did, if one did.
    pub fn recording_stopped(&self) -> Option<&str> {
        self.links
            .iter()
            .find_map(|l| l.recorded.as_ref()?.stopped.as_deref())
    }
}

/// A running host.
#[derive(Debug)]
pub struct ShotsSession {
    geometry: Geometry,
    links: Vec<ShotsLink>,
    live: Arc<Mutex<Vec<HostStats>>>,
    events: Receiver<ShotEvent>,
    dropped: Arc<AtomicU64>,
    stop: Stopper,
    threads: Vec<JoinHandle<Result<LinkSummary, Error>>>,
    started: Instant,
}

struct Link {
    i: usize,
    drv: rocelink_runtime::Driver,
    ep: rocelink_transport::Endpoint,
    host: Host,
    sink: ShotSink,
    local: SocketAddr,
    qkey: u32,
}

impl ShotsSession {
    /// Bind every link, post its receives, start its recorder and trigger its probe.
    /// Counters go to `board` (link `linkN`) when given. Settings are checked first.
    pub fn start(cfg: ShotsConfig, board: Option<Board>) -> Result<ShotsSession, Error> {
        cfg.geometry.check()?;
        let n = cfg.links.addrs.len();
        if !cfg.passive && cfg.probes.len() != n {
            return Err(Error::Probes {
                probes: cfg.probes.len(),
                links: n,
            });
        }
        let mut links = Vec::new();
        let mut parts = Vec::new();
        for (i, ip) in cfg.links.addrs.iter().enumerate() {
            let (mut drv, mut ep, local) = bind_link(i, *ip, cfg.links.port, cfg.links.chosen)?;
            if let Some(b) = &board {
                drv.publish_to(b.clone(), &format!("link{i}"));
            }
            let hcfg = ShotHostConfig {
                buffers: cfg.buffers,
                timeout: cfg.timeout,
                ahead: cfg.ahead,
                ..ShotHostConfig::new(cfg.geometry)
            };
            let mut host = Host::new(&mut ep, hcfg)?;
            let probe = cfg.probes.get(i).or(cfg.probes.first()).copied();
            if let (true, Some(p)) = (cfg.passive, probe) {
                host.accept_from(p.ip(), None);
            }
            let record = cfg.record.as_ref().map(|d| {
                let dir = if n == 1 {
                    d.clone()
                } else {
                    d.join(format!("link{i}"))
                };
                record_config(dir, &cfg.geometry)
            });
            let seed = cfg.verify_seed.map(|s| s + i as u64);
            let sink = ShotSink::new(cfg.geometry, seed, record)
                .map_err(|source| Error::Record { link: i, source })?;
            links.push(ShotsLink {
                local,
                qpn: host.qpn(),
                probe: probe.filter(|_| !cfg.passive),
            });
            parts.push(Link {
                i,
                drv,
                ep,
                host,
                sink,
                local,
                qkey: hcfg.qkey,
            });
        }
        let (tx, events) = std::sync::mpsc::sync_channel(cfg.events.max(1));
        let s = ShotsSession {
            geometry: cfg.geometry,
            links,
            live: Arc::new(Mutex::new(vec![HostStats::default(); n])),
            events,
            dropped: Arc::new(AtomicU64::new(0)),
            stop: Stopper::new(),
            threads: Vec::new(),
            started: Instant::now(),
        };
        s.spawn(cfg, parts, tx, board)
    }

    fn spawn(
        mut self,
        cfg: ShotsConfig,
        parts: Vec<Link>,
        tx: SyncSender<ShotEvent>,
        board: Option<Board>,
    ) -> Result<ShotsSession, Error> {
        let deadline = cfg.duration.map(|d| self.started + d);
        for link in parts {
            let plan = match (cfg.passive, cfg.probes.get(link.i)) {
                (false, Some(&probe)) => Triggering::Periodic {
                    probe,
                    millihertz: cfg
                        .trigger_hz
                        .map_or(0, |h| (h * 1000.0).round().max(1.0) as u32),
                    // until stopped: `shots` counts shots handed on, not triggers (a
                    // trigger the probe misses while still sending makes none)
                    count: 0,
                },
                _ => Triggering::None,
            };
            let ctx = LinkRun {
                plan,
                want: cfg.shots,
                deadline,
                bytes: cfg.geometry.message_bytes,
                stop: self.stop.clone(),
                live: self.live.clone(),
                tx: tx.clone(),
                dropped: self.dropped.clone(),
                board: board.clone(),
                with_data: cfg.with_data,
                data_every: cfg.data_every,
                started: self.started,
            };
            self.threads.push(std::thread::spawn(move || ctx.run(link)));
        }
        Ok(self)
    }

    /// When it started (shot times in events are [`Instant`]s; this is their zero).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Where each link is.
    pub fn links(&self) -> &[ShotsLink] {
        &self.links
    }
}

/// Its progress is the counters so far, summed over the links (updated every 100 ms); its
/// events are the shots handed on. It ends by its shots or duration, or a stop; events not
/// taken by then are dropped (and counted).
impl Session for ShotsSession {
    type Progress = HostStats;
    type Event = ShotEvent;
    type Summary = ShotsSummary;
    type Error = Error;

    fn progress(&self) -> HostStats {
        let v = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        v.iter().fold(HostStats::default(), |a, h| add_host(a, *h))
    }

    fn next_event(&self, timeout: Duration) -> Option<ShotEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    fn wait(self) -> Result<ShotsSummary, Error> {
        let links = join_all(self.threads)?;
        let left = self.events.try_iter().count() as u64;
        Ok(ShotsSummary {
            geometry: self.geometry,
            links,
            seconds: self.started.elapsed().as_secs_f64(),
            events_dropped: self.dropped.load(Ordering::Relaxed) + left,
        })
    }
}

/// What a link thread needs besides its link.
struct LinkRun {
    plan: Triggering,
    want: Option<u64>,
    deadline: Option<Instant>,
    bytes: u32,
    stop: Stopper,
    live: Arc<Mutex<Vec<HostStats>>>,
    tx: SyncSender<ShotEvent>,
    dropped: Arc<AtomicU64>,
    board: Option<Board>,
    with_data: bool,
    data_every: Duration,
    /// The session's start: the zero of its events' times.
    started: Instant,
}

impl LinkRun {
    fn run(self, mut l: Link) -> Result<LinkSummary, Error> {
        let i = l.i;
        let mut span: Option<(Instant, Instant)> = None;
        let (sink, tx, dropped) = (&mut l.sink, &self.tx, &self.dropped);
        let (with_data, every, started) = (self.with_data, self.data_every, self.started);
        let mut data_at: Option<Instant> = None;
        let mut each = |r: &ShotReport, bytes: Option<&[u8]>| {
            let outcome = sink.take(r, bytes);
            if let (Some(f), Some(last)) = (r.first, r.last) {
                span = Some(span.map_or((f, last), |(a, _)| (a, last)));
            }
            let ns = |t: Option<Instant>| {
                t.map(|t| t.saturating_duration_since(started).as_nanos() as u64)
            };
            let ev = ShotEvent {
                link: i,
                since_start_ns: (ns(r.trigger), ns(r.last.filter(|_| r.complete))),
                report: *r,
                outcome,
                data: None,
            };
            let due = with_data && data_at.is_none_or(|t| t.elapsed() >= every);
            let ev = match bytes.filter(|_| due) {
                Some(b) => {
                    data_at = Some(Instant::now());
                    ShotEvent {
                        data: Some(Arc::from(b)),
                        ..ev
                    }
                }
                None => ev,
            };
            if let Err(TrySendError::Full(_)) = tx.try_send(ev) {
                dropped.fetch_add(1, Ordering::Relaxed);
            }
        };
        let live = &self.live;
        let opts = RunOpts {
            stop: self.stop.flag(),
            deadline: self.deadline,
            every: EVERY,
        };
        let target = TriggerTarget {
            port: l.local.port(),
            qkey: l.qkey,
        };
        let triggers = run::host(
            &mut l.drv,
            &mut l.ep,
            &mut l.host,
            self.plan,
            target,
            self.want,
            &mut each,
            opts,
            &mut |h| live.lock().unwrap_or_else(PoisonError::into_inner)[i] = *h.stats(),
        )
        .map_err(|e| link_error(i, self.bytes, e))?;
        live.lock().unwrap_or_else(PoisonError::into_inner)[i] = *l.host.stats();
        let recorded = l
            .sink
            .finish()
            .map_err(|source| Error::Record { link: i, source })?;
        if let Some(b) = &self.board {
            b.set_link(l.drv.link(&format!("link{i}"), &l.ep));
        }
        Ok(LinkSummary {
            local: l.local,
            sink: *l.sink.stats(),
            host: *l.host.stats(),
            triggers,
            icrc_errors: l.ep.stats().icrc_errors,
            recorded,
            span,
        })
    }
}

fn add_host(a: HostStats, b: HostStats) -> HostStats {
    HostStats {
        shots: a.shots + b.shots,
        complete: a.complete + b.complete,
        messages: a.messages + b.messages,
        missing: a.missing + b.missing,
        moved: a.moved + b.moved,
        duplicates: a.duplicates + b.duplicates,
        late: a.late + b.late,
        malformed: a.malformed + b.malformed,
        stash_full: a.stash_full + b.stash_full,
        recv_errors: a.recv_errors + b.recv_errors,
        stray: a.stray + b.stray,
        resyncs: a.resyncs + b.resyncs,
    }
}
