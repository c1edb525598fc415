//! A buffer unit as a session.
//!
//! Frames consumed become [`FrameEvent`]s through a bounded queue: a reader that falls
//! behind loses events (counted), never frames — the unit never waits for it.

use super::{EVERY, Stopper};
use crate::run::{self, RunOpts};
use crate::{
    Consumer, Error, Frame, RateConsumer, RecordConsumer, Shared, Unit, UnitConfig, UnitStats,
};
use rocelink_runtime::counters::{Board, Link};
use rocelink_runtime::{Driver, bind_roce};
use rocelink_runtime::{Session, SessionThread};
use rocelink_transport::{Endpoint, EndpointConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the unit does with the frames it delivered.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Consume {
    /// Take each as soon as it is delivered.
    AsTheyCome,
    /// Take them at this many Gbit/s (a slow consumer: the window fills, workers wait).
    Rate(f64),
    /// Record every one to this directory (new or empty); a disk that cannot keep up holds
    /// the workers back, nothing is dropped.
    Record(PathBuf),
}

/// What a buffer unit is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UnitSessionConfig {
    /// The address it serves on.
    pub bind: IpAddr,
    /// Its RoCE UDP port.
    pub port: u16,
    /// The protocol's settings: status QP, rings, workers, verification.
    pub unit: UnitConfig,
    /// Where delivered frames go.
    pub consume: Consume,
    /// Take this many frames, then end (once their worker left, or 2 s on): a recording
    /// holds exactly these, and only these are ACKed (a fast worker's frames past the
    /// count are discarded, never ACKed).
    pub frames: Option<u64>,
    /// End after this long.
    pub duration: Option<Duration>,
    /// Events the queue holds before it drops them.
    pub events: usize,
    /// Hand each consumed frame's bytes on with its event (a copy: the ring space is
    /// freed as the frame is consumed).
    #[serde(default)]
    pub with_data: bool,
    /// With `with_data`: the bytes of at most one frame per this interval (a live view's
    /// pictures), the others' events without them. Zero: every frame's.
    #[serde(default)]
    pub data_every: Duration,
}

impl UnitSessionConfig {
    /// A unit on `bind`:4791 with the default protocol settings, consuming as frames come.
    pub fn new(bind: IpAddr) -> UnitSessionConfig {
        UnitSessionConfig {
            bind,
            port: 4791,
            unit: UnitConfig::default(),
            consume: Consume::AsTheyCome,
            frames: None,
            duration: None,
            events: 65_536,
            with_data: false,
            data_every: Duration::ZERO,
        }
    }

    /// Everything that can be checked before anything is bound.
    pub fn check(&self) -> Result<(), Error> {
        self.unit.check()?;
        if let Consume::Rate(r) = self.consume
            && !(r.is_finite() && r > 0.0)
        {
            return Err(Error::Rate(r));
        }
        let ring = self.unit.ring_bytes as u64;
        let channels = self.unit.max_channels;
        let need = ring.saturating_mul(channels as u64);
        match rocelink_io::mem::total_memory() {
            Some(have) if need > have => Err(Error::Memory {
                ring,
                channels,
                need,
                have,
            }),
            _ => Ok(()),
        }
    }
}

impl Default for UnitSessionConfig {
    fn default() -> UnitSessionConfig {
        UnitSessionConfig::new(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// One frame handed to the consumer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FrameEvent {
    /// The worker that sent it: (LID, QPN).
    pub worker: (u32, u32),
    /// Where it landed in the worker's stream.
    pub va: u64,
    /// Its length.
    pub len: usize,
    /// Whether its check (the §4 header's CRC-32C and VA) passed.
    pub intact: bool,
    /// Its bytes, when [`UnitSessionConfig::with_data`] asks for them (not serialised: a
    /// consumer reads them here).
    #[serde(skip)]
    pub data: Option<Arc<[u8]>>,
}

/// The unit's counters as it runs.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct UnitProgress {
    /// Workers registered now.
    pub workers: usize,
    /// What it did so far.
    pub stats: UnitStats,
}

/// What a buffer unit did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnitSummary {
    /// Where it served.
    pub local: SocketAddr,
    /// Frames, ACKs, NACKs, status requests (serialised among the summary's own fields).
    #[serde(flatten)]
    pub stats: UnitStats,
    /// Packets whose ICRC failed.
    pub icrc_errors: u64,
    /// The recording, if one was made.
    pub recorded: Option<rocelink_record::Summary>,
    /// Frames delivered that the consumer could not take within [`run::DRAIN`] when the
    /// unit stopped (discarded, never ACKed; 0 unless the consumer was stuck).
    pub unconsumed: usize,
    /// How long it ran.
    pub seconds: f64,
    /// Frame bytes delivered over that time, Gbit/s.
    pub gbps: f64,
    /// The link's counters.
    pub link: Link,
    /// Events the reader did not take in time (the frames themselves were consumed).
    pub events_dropped: u64,
}

/// A running buffer unit.
#[derive(Debug)]
pub struct UnitSession {
    local: SocketAddr,
    live: Arc<Mutex<UnitProgress>>,
    events: Receiver<FrameEvent>,
    dropped: Arc<AtomicU64>,
    thread: SessionThread<Result<UnitSummary, Error>>,
}

/// The parts a unit's thread runs.
struct Parts {
    drv: Driver,
    ep: Endpoint,
    server: Unit,
    local: SocketAddr,
}

impl UnitSession {
    /// Check `cfg`, make the recording directory ready, bind, then serve on a thread of
    /// its own. Counters go to `board` (link `ims`) when given.
    pub fn start(cfg: UnitSessionConfig, board: Option<Board>) -> Result<UnitSession, Error> {
        cfg.check()?;
        if let Consume::Record(dir) = &cfg.consume {
            rocelink_record::prepare_dir(dir, false).map_err(|e| Error::RecordDir {
                dir: dir.clone(),
                source: Shared::new(e),
            })?;
        }
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let (sock, ip) = bind_roce(cfg.bind, cfg.port, true).map_err(|e| Error::Bind {
            addr,
            source: Shared::new(e),
        })?;
        let local = SocketAddr::new(ip, cfg.port);
        let mut ep = Endpoint::new(EndpointConfig::new(local).random_keys());
        let unit = Unit::new(&mut ep, cfg.unit)?;
        let mut drv = Driver::new(sock);
        if let Some(b) = board {
            drv.publish_to(b, "ims");
        }
        let parts = Parts {
            drv,
            ep,
            server: unit,
            local,
        };
        let live = Arc::new(Mutex::new(UnitProgress::default()));
        let (tx, events) = std::sync::mpsc::sync_channel(cfg.events.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let ctx = Ctx {
            live: live.clone(),
            tx,
            dropped: dropped.clone(),
            with_data: cfg.with_data,
            data_every: cfg.data_every,
        };
        let thread = SessionThread::spawn("ims-unit", move |stop| serve(parts, &cfg, ctx, stop))
            .map_err(|e| Error::Io(Shared::new(e)))?;
        Ok(UnitSession {
            local,
            live,
            events,
            dropped,
            thread,
        })
    }

    /// Where it serves.
    pub fn local(&self) -> SocketAddr {
        self.local
    }
}

/// Its progress is counters updated about every 50 ms; its events are the frames consumed
/// (a reader too slow loses events, counted, never frames). A stop answers nothing new,
/// hands the consumer every frame it ACKed, and sums up; it ends by itself at its frame
/// count or duration.
impl Session for UnitSession {
    type Progress = UnitProgress;
    type Event = FrameEvent;
    type Summary = UnitSummary;
    type Error = Error;

    fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    fn progress(&self) -> UnitProgress {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn next_event(&self, timeout: Duration) -> Option<FrameEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> Result<UnitSummary, Error> {
        let mut s = self.thread.join()?;
        s.events_dropped = self.dropped.load(Ordering::Relaxed);
        Ok(s)
    }
}

/// What the unit's thread shares with its handle.
struct Ctx {
    live: Arc<Mutex<UnitProgress>>,
    tx: SyncSender<FrameEvent>,
    dropped: Arc<AtomicU64>,
    with_data: bool,
    data_every: Duration,
}

/// Passes frames on, each an event, up to the frame count.
struct Reporting<'a> {
    inner: &'a mut dyn Consumer,
    ctx: &'a Ctx,
    /// When bytes were last handed on.
    data_at: Option<Instant>,
    /// Frames to take at most, and taken so far.
    limit: Option<u64>,
    taken: u64,
}

impl Consumer for Reporting<'_> {
    fn ready(&mut self, now: Instant) -> bool {
        // past the count nothing is taken, so nothing more is ACKed
        !self.done() && self.inner.ready(now)
    }
    fn done(&self) -> bool {
        self.limit.is_some_and(|n| self.taken >= n) || self.inner.done()
    }
    fn consume(&mut self, now: Instant, f: &Frame<'_>) {
        self.inner.consume(now, f);
        self.taken += 1;
        let e = FrameEvent {
            worker: f.worker,
            va: f.va,
            len: f.bytes.len(),
            intact: f.intact,
            data: None,
        };
        let due = self
            .data_at
            .is_none_or(|t| now.saturating_duration_since(t) >= self.ctx.data_every);
        let e = match self.ctx.with_data && due {
            true => {
                self.data_at = Some(now);
                FrameEvent {
                    data: Some(Arc::from(f.bytes)),
                    ..e
                }
            }
            false => e,
        };
        if let Err(TrySendError::Full(_)) = self.ctx.tx.try_send(e) {
            self.ctx.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn wake(&self) -> Option<Instant> {
        self.inner.wake()
    }
}

/// How long a unit that reached its frame count still answers a worker that left: three
/// of the worker's STAT_TERM retries (250 ms apart), so a lost STAT_DOWN is sent again.
const LINGER: Duration = Duration::from_millis(750);

fn serve(
    mut p: Parts,
    cfg: &UnitSessionConfig,
    ctx: Ctx,
    stop: &Stopper,
) -> Result<UnitSummary, Error> {
    let mut rec = match &cfg.consume {
        Consume::Record(d) => Some(RecordConsumer::new(d.clone(), None)),
        _ => None,
    };
    let mut rate = match cfg.consume {
        Consume::Rate(r) => Some(RateConsumer::new(r)),
        _ => None,
    };
    let mut nothing = |_: &Frame<'_>| {};
    let inner: &mut dyn Consumer = match (rec.as_mut(), rate.as_mut()) {
        (Some(r), _) => r,
        (None, Some(r)) => r,
        (None, None) => &mut nothing,
    };
    let mut reporting = Reporting {
        inner,
        ctx: &ctx,
        data_at: None,
        limit: cfg.frames,
        taken: 0,
    };
    let t0 = Instant::now();
    let mut reached_at: Option<Instant> = None;
    let mut left_at: Option<Instant> = None;
    let counted = cfg.frames;
    let unconsumed = run::serve(
        &mut p.drv,
        &mut p.ep,
        &mut p.server,
        &mut reporting,
        RunOpts {
            stop: stop.flag(),
            deadline: cfg.duration.map(|d| t0 + d),
            every: EVERY,
        },
        &mut |s| {
            let st = s.stats();
            // a frame count: done once they were consumed and their worker left (or 2 s on);
            // a worker that left is still answered a while, in case its STAT_DOWN was lost
            if counted.is_some_and(|n| st.frames_consumed >= n) {
                let at = *reached_at.get_or_insert_with(Instant::now);
                let left = *left_at.get_or_insert_with(Instant::now);
                if s.workers() != 0 {
                    left_at = None;
                }
                if s.workers() == 0 && left.elapsed() > LINGER
                    || at.elapsed() > Duration::from_secs(2)
                {
                    stop.stop();
                }
            }
            let mut live = ctx.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.workers = s.workers();
            live.stats = st;
        },
    )
    .map_err(|e| Error::Io(Shared::new(e)))?;
    let seconds = t0.elapsed().as_secs_f64();
    let recorded = finish_recording(rec.as_mut())?;
    let stats = p.server.stats();
    Ok(UnitSummary {
        local: p.local,
        gbps: rocelink_runtime::session::gbps(stats.bytes, seconds),
        stats,
        icrc_errors: p.ep.stats().icrc_errors,
        recorded,
        unconsumed,
        seconds,
        link: p.drv.link("ims", &p.ep),
        events_dropped: 0,
    })
}

/// Make the recording durable; its summary.
fn finish_recording(
    rec: Option<&mut RecordConsumer>,
) -> Result<Option<rocelink_record::Summary>, Error> {
    let Some(r) = rec else {
        return Ok(None);
    };
    let failed = |r: &RecordConsumer, e| Error::Record {
        dir: r.dir().to_path_buf(),
        source: Shared::new(e),
    };
    if let Some(e) = r.take_error() {
        return Err(failed(r, e));
    }
    r.finish().map_err(|e| failed(r, e))
}
