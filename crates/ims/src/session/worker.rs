//! A worker as a session: frames from a source streamed to a buffer unit on a thread of
//! its own, its counters live, its end a summary.

use super::{EVERY, Stopper};
use crate::run::{self, RunOpts};
use crate::source::{FileSource, FrameQueue, QueueSource};
use crate::{
    Error, FrameSource, ImageSource, PatternSource, Shared, Worker, WorkerConfig, WorkerState,
    WorkerStats,
};
use rocelink_runtime::counters::{Board, Link};
use rocelink_runtime::{Driver, bind_roce};
use rocelink_runtime::{Session, SessionThread};
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_wire::ims::{ImageGeometry, PixelDepth};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The frames a worker sends.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Frames {
    /// A checkable pattern (the §4 header, then bytes the VA determines) of `len` bytes.
    Pattern {
        /// Bytes per frame.
        len: usize,
    },
    /// §4 images of this shape and pixel depth.
    Images {
        /// Columns × rows.
        geometry: ImageGeometry,
        /// 4 or 6 bits.
        depth: PixelDepth,
    },
    /// A file, `len` bytes per frame (the last one padded), from its start again at its end
    /// with `repeat`.
    File {
        /// The file.
        path: PathBuf,
        /// Bytes per frame.
        len: usize,
        /// Start again at the end.
        repeat: bool,
    },
    /// Frames the application queues one by one ([`WorkerSession::queue`]), each at most
    /// `max_len` bytes.
    Queue {
        /// The longest frame.
        max_len: usize,
    },
}

impl Frames {
    /// Bytes per frame.
    pub fn frame_len(&self) -> usize {
        match self {
            Frames::Pattern { len } | Frames::File { len, .. } => *len,
            Frames::Queue { max_len } => *max_len,
            Frames::Images { geometry, depth } => geometry.encoded_len(*depth),
        }
    }

    /// The whole frames that carry `bytes`.
    pub fn frames_for(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.frame_len().max(1) as u64)
    }

    fn open(
        &self,
        count: Option<u64>,
    ) -> Result<(Box<dyn FrameSource + Send>, Option<FrameQueue>), Error> {
        let source: Box<dyn FrameSource + Send> = match self {
            Frames::Queue { max_len } => {
                let (s, q) = QueueSource::new(*max_len);
                return Ok((Box::new(s), Some(q)));
            }
            Frames::Pattern { len } => {
                Box::new(PatternSource::new(*len, count).ok_or(Error::FrameSize {
                    frame: *len,
                    packet: 0,
                    last: *len,
                })?)
            }
            Frames::Images { geometry, depth } => {
                Box::new(ImageSource::new(*geometry, *depth, count))
            }
            Frames::File { path, len, repeat } => {
                let s = FileSource::open(path, *len, *repeat).map_err(|e| Error::File {
                    path: path.clone(),
                    source: Shared::new(e),
                })?;
                match count {
                    Some(n) => Box::new(Limited(s, n)),
                    None => Box::new(s),
                }
            }
        };
        Ok((source, None))
    }
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

/// What a worker is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WorkerSessionConfig {
    /// The protocol's settings; `worker.server` is the buffer unit.
    pub worker: WorkerConfig,
    /// The local address answers come to: by default 127.0.0.1 for a loopback unit (the
    /// next free 127.0.0.x when the unit holds that port), else the address that routes
    /// to the unit.
    pub local: Option<IpAddr>,
    /// The local RoCE port (default: the unit's; RoCE v2 sends everything to it).
    pub port: Option<u16>,
    /// What it sends.
    pub frames: Frames,
    /// Frames to send (default: endless, or the whole file).
    pub count: Option<u64>,
    /// Send new frames for this long, then give those in flight one timeout.
    pub duration: Option<Duration>,
}

impl WorkerSessionConfig {
    /// `frames` to the unit at `unit`, as many in flight as 4 MiB holds.
    pub fn new(unit: SocketAddr, frames: Frames) -> WorkerSessionConfig {
        let mut worker = WorkerConfig::new(unit);
        worker.in_flight = WorkerConfig::in_flight_for(frames.frame_len());
        WorkerSessionConfig {
            worker,
            local: None,
            port: None,
            frames,
            count: None,
            duration: None,
        }
    }

    /// Everything that can be checked before anything is opened.
    pub fn check(&self) -> Result<(), Error> {
        self.worker.check(self.frames.frame_len())
    }
}

/// The worker's counters as it runs.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkerProgress {
    /// Where it is in the protocol.
    pub state: Option<WorkerState>,
    /// Frames sent and not yet answered.
    pub in_flight: usize,
    /// What it did so far.
    pub stats: WorkerStats,
}

/// What a worker did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerSummary {
    /// Where it received answers.
    pub local: SocketAddr,
    /// Frames ACKed, NACKs, retransmissions, timeouts (serialised among the summary's own
    /// fields).
    #[serde(flatten)]
    pub stats: WorkerStats,
    /// How it ended: `Done`, or `Failed` with why (or another state when stopped early).
    pub state: WorkerState,
    /// The VAs of the frames sent and never acknowledged.
    pub unacknowledged: Vec<u64>,
    /// Answers refused: not from the unit's data channel, or out of sequence.
    pub answers_refused: u64,
    /// How long it ran.
    pub seconds: f64,
    /// Frame bytes ACKed over that time, Gbit/s.
    pub gbps: f64,
    /// The link's counters.
    pub link: Link,
}

impl WorkerSummary {
    /// Why it did not finish, if it did not.
    pub fn failure(&self) -> Option<String> {
        match &self.state {
            WorkerState::Failed(e) => Some(e.to_string()),
            WorkerState::Done => None,
            s => Some(format!("stopped while {s:?}")),
        }
    }
}

/// A running worker.
#[derive(Debug)]
pub struct WorkerSession {
    local: SocketAddr,
    queue: Option<FrameQueue>,
    live: Arc<Mutex<WorkerProgress>>,
    thread: SessionThread<Result<WorkerSummary, Error>>,
}

struct Parts {
    drv: Driver,
    ep: Endpoint,
    worker: Worker,
    source: Box<dyn FrameSource + Send>,
    local: SocketAddr,
}

impl WorkerSession {
    /// Check `cfg`, open the frames, bind, then stream on a thread of its own. Counters go
    /// to `board` (link `ims`) when given.
    pub fn start(cfg: WorkerSessionConfig, board: Option<Board>) -> Result<WorkerSession, Error> {
        cfg.check()?;
        let (source, queue) = cfg.frames.open(cfg.count)?;
        let unit = cfg.worker.server;
        let ip = match cfg.local {
            Some(ip) => ip,
            None if unit.ip().is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            None => route_source(unit)?,
        };
        let port = cfg.port.unwrap_or(unit.port());
        // a chosen address is kept; the default loopback one moves aside if the unit has it
        let (sock, ip) = bind_roce(ip, port, cfg.local.is_some()).map_err(|e| Error::Bind {
            addr: SocketAddr::new(ip, port),
            source: Shared::new(e),
        })?;
        let local = SocketAddr::new(ip, port);
        let mut ep = Endpoint::new(EndpointConfig::new(local).random_keys());
        let worker = Worker::new(&mut ep, cfg.worker, cfg.frames.frame_len())?;
        let mut drv = Driver::new(sock);
        if let Some(b) = board {
            drv.publish_to(b, "ims");
        }
        let parts = Parts {
            drv,
            ep,
            worker,
            source,
            local,
        };
        let live = Arc::new(Mutex::new(WorkerProgress::default()));
        let l = live.clone();
        let thread = SessionThread::spawn("ims-worker", move |stop| send(parts, &cfg, &l, stop))
            .map_err(|e| Error::Io(Shared::new(e)))?;
        Ok(WorkerSession {
            local,
            queue,
            live,
            thread,
        })
    }

    /// The queue to hand frames to, for [`Frames::Queue`].
    pub fn queue(&self) -> Option<&FrameQueue> {
        self.queue.as_ref()
    }

    /// Where it receives answers.
    pub fn local(&self) -> SocketAddr {
        self.local
    }
}

/// Its progress is counters updated about every 50 ms; it reports no events. A stop sends
/// no new frame, finishes those in flight and closes its channels; it ends by itself once
/// its frames are sent.
impl Session for WorkerSession {
    type Progress = WorkerProgress;
    type Event = rocelink_runtime::NoEvent;
    type Summary = WorkerSummary;
    type Error = Error;

    fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    fn progress(&self) -> WorkerProgress {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn next_event(&self, timeout: Duration) -> Option<Self::Event> {
        rocelink_runtime::session::no_event(timeout, || self.thread.is_finished())
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> Result<WorkerSummary, Error> {
        self.thread.join()
    }
}

fn send(
    mut p: Parts,
    cfg: &WorkerSessionConfig,
    live: &Mutex<WorkerProgress>,
    stop: &Stopper,
) -> Result<WorkerSummary, Error> {
    let t0 = Instant::now();
    let until = cfg.duration.map(|d| t0 + d);
    let grace = cfg.worker.timeout.min(cfg.worker.silence);
    let sent = run::send(
        &mut p.drv,
        &mut p.ep,
        &mut p.worker,
        p.source.as_mut(),
        RunOpts {
            stop: stop.flag(),
            deadline: until.map(|t| t + grace),
            every: EVERY,
        },
        &mut |w| {
            if until.is_some_and(|t| Instant::now() >= t) {
                stop.stop();
            }
            let mut l = live.lock().unwrap_or_else(PoisonError::into_inner);
            l.state = Some(w.state().clone());
            l.in_flight = w.in_flight();
            l.stats = w.stats();
        },
    );
    if let Err(e) = sent {
        return Err(match e.raw_os_error() {
            Some(libc::EMSGSIZE) => Error::PathMtu {
                packet: cfg.worker.packet_bytes,
                unit: cfg.worker.server,
            },
            _ => Error::Io(Shared::new(e)),
        });
    }
    let w = &p.worker;
    let (stats, seconds) = (w.stats(), t0.elapsed().as_secs_f64());
    Ok(WorkerSummary {
        local: p.local,
        gbps: rocelink_runtime::session::gbps(stats.bytes, seconds),
        stats,
        state: w.state().clone(),
        unacknowledged: w.unacknowledged(),
        answers_refused: p
            .ep
            .qp_stats(w.data_qpn())
            .map_or(0, |q| q.foreign_port + q.psn_refused),
        seconds,
        link: p.drv.link("ims", &p.ep),
    })
}

/// The local address the kernel sends from towards `to`.
fn route_source(to: SocketAddr) -> Result<IpAddr, Error> {
    let any = match to {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    };
    let probe = std::net::UdpSocket::bind(SocketAddr::new(any, 0))
        .and_then(|s| s.connect(to).map(|()| s))
        .and_then(|s| s.local_addr());
    probe
        .map(|a| a.ip())
        .map_err(|e| Error::Route(to, Shared::new(e)))
}
