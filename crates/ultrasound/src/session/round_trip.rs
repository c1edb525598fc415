//! The trigger round trip as a session: per shot size, a host triggers the probe one shot
//! at a time, each trigger sent when the shot before was handed on, and times each from the
//! trigger leaving to the last message of its shot taken — the paper's measurement. Each
//! size, once measured, is a [`Row`].

use super::{Session, Stopper, bind_link, join_all};
use crate::run::{self, TriggerTarget, Triggering};
use crate::shot::Echoes;
use crate::{Error, Geometry, Host, ShotHostConfig, ShotReport};
use rocelink_runtime::RunOpts;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a round-trip measurement is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RoundTripConfig {
    /// The probe's trigger address.
    pub probe: SocketAddr,
    /// Where to receive shots (moved to a free loopback address when not `chosen` and taken).
    pub bind: IpAddr,
    /// The RoCE UDP port.
    pub port: u16,
    /// `bind` was chosen: never moved.
    pub chosen: bool,
    /// One shot shape per row.
    pub sizes: Vec<Geometry>,
    /// Round trips measured per size.
    pub count: usize,
    /// Round trips taken first and not counted.
    pub warmup: usize,
    /// Longest wait for one shot.
    pub timeout: Duration,
    /// Check every shot against the echoes of this seed.
    pub verify_seed: Option<u64>,
}

impl RoundTripConfig {
    /// 1 000 round trips of each size against the probe at 127.0.0.1:4792.
    pub fn new(sizes: Vec<Geometry>) -> RoundTripConfig {
        RoundTripConfig {
            probe: SocketAddr::from(([127, 0, 0, 1], 4792)),
            bind: [127, 0, 0, 1].into(),
            port: 4791,
            chosen: false,
            sizes,
            count: 1000,
            warmup: 20,
            timeout: Duration::from_secs(1),
            verify_seed: None,
        }
    }
}

/// The round trips of one shot size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The shot.
    pub geometry: Geometry,
    /// Round trips in µs, sorted.
    pub rtt_us: Vec<f64>,
    /// Triggers whose shot never came whole.
    pub lost: u64,
    /// Shots that differed from the generator (with a verify seed).
    pub corrupt: u64,
}

impl Row {
    /// The `p` quantile of the round trips in µs (NaN when there are none).
    pub fn quantile(&self, p: f64) -> f64 {
        quantile(&self.rtt_us, p)
    }

    /// The shot's bits over the median round trip, Gbit/s.
    pub fn gbps_at_median(&self) -> f64 {
        self.geometry.bytes() as f64 * 8.0 / (self.quantile(0.5) * 1e3)
    }
}

/// Serialised as `rocelink trigger --json` prints a row: the shot (`samples`,
/// `channels`, `bytes`, `messages`), `shots` measured, `lost`, `corrupt`, the round trip's
/// `min_us`, `median_us`, `p99_us`, `max_us` (null without a round trip) and
/// `gbps_at_median`; the round trips themselves are not serialised.
impl serde::Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let g = &self.geometry;
        // NaN (no round trip) as null
        let q = |p: f64| Some(self.quantile(p)).filter(|x| x.is_finite());
        let mut st = s.serialize_struct("Row", 12)?;
        st.serialize_field("samples", &g.samples)?;
        st.serialize_field("channels", &g.channels)?;
        st.serialize_field("bytes", &g.bytes())?;
        st.serialize_field("messages", &g.messages())?;
        st.serialize_field("shots", &self.rtt_us.len())?;
        st.serialize_field("lost", &self.lost)?;
        st.serialize_field("corrupt", &self.corrupt)?;
        st.serialize_field("min_us", &q(0.0))?;
        st.serialize_field("median_us", &q(0.5))?;
        st.serialize_field("p99_us", &q(0.99))?;
        st.serialize_field("max_us", &q(1.0))?;
        let rate = self.gbps_at_median();
        st.serialize_field("gbps_at_median", &Some(rate).filter(|x| x.is_finite()))?;
        st.end()
    }
}

/// The `p` quantile (0 to 1) of sorted `v`: the nearest rank; NaN when `v` is empty.
pub fn quantile(v: &[f64], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p.clamp(0.0, 1.0)).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// A running measurement.
#[derive(Debug)]
pub struct RoundTrip {
    rows: Receiver<Row>,
    done: Arc<AtomicUsize>,
    stop: Stopper,
    thread: JoinHandle<Result<Vec<Row>, Error>>,
}

impl RoundTrip {
    /// Start measuring, size after size, on a thread of its own.
    pub fn start(cfg: RoundTripConfig) -> Result<RoundTrip, Error> {
        for g in &cfg.sizes {
            g.check()?;
        }
        let stop = Stopper::new();
        let (tx, rows) = std::sync::mpsc::channel();
        let s = stop.clone();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let thread = std::thread::spawn(move || measure(&cfg, &s, &tx, &d));
        Ok(RoundTrip {
            rows,
            done,
            stop,
            thread,
        })
    }
}

/// Its progress is the number of sizes measured; its events are their rows, as each
/// size ends. A stop ends the size being measured with what it has; every row, those
/// already taken included, is in the summary.
impl Session for RoundTrip {
    type Progress = usize;
    type Event = Row;
    type Summary = Vec<Row>;
    type Error = Error;

    fn progress(&self) -> usize {
        self.done.load(Ordering::Relaxed)
    }

    fn next_event(&self, timeout: Duration) -> Option<Row> {
        self.rows.recv_timeout(timeout).ok()
    }

    fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> Result<Vec<Row>, Error> {
        join_all(vec![self.thread]).map(|mut v| v.pop().unwrap_or_default())
    }
}

fn measure(
    cfg: &RoundTripConfig,
    stop: &Stopper,
    tx: &Sender<Row>,
    done: &AtomicUsize,
) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for &g in &cfg.sizes {
        if stop.is_stopped() {
            break;
        }
        let row = one_size(cfg, g, stop)?;
        let _ = tx.send(row.clone());
        rows.push(row);
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rows)
}

/// The round trips of shots of `g`.
fn one_size(cfg: &RoundTripConfig, g: Geometry, stop: &Stopper) -> Result<Row, Error> {
    let (mut drv, mut ep, local) = bind_link(0, cfg.bind, cfg.port, cfg.chosen)?;
    let hcfg = ShotHostConfig::new(g);
    let mut host = Host::new(&mut ep, hcfg)?;
    let echoes = cfg.verify_seed.map(Echoes::new);
    let mut row = Row {
        geometry: g,
        rtt_us: Vec::new(),
        lost: 0,
        corrupt: 0,
    };
    let warm = cfg.warmup as u64;
    let mut each = |r: &ShotReport, bytes: Option<&[u8]>| {
        if r.shot < warm {
            return;
        }
        match (r.trigger, r.last, bytes.filter(|_| r.complete)) {
            (Some(t), Some(l), Some(b)) => {
                if echoes
                    .as_ref()
                    .is_some_and(|e| e.first_difference(&g, r.shot, b).is_some())
                {
                    row.corrupt += 1;
                }
                row.rtt_us.push((l - t).as_secs_f64() * 1e6);
            }
            _ => row.lost += 1,
        }
    };
    let count = (cfg.count + cfg.warmup) as u64;
    let plan = Triggering::OneByOne {
        probe: cfg.probe,
        count,
        timeout: cfg.timeout,
    };
    let target = TriggerTarget {
        port: local.port(),
        qkey: hcfg.qkey,
    };
    let opts = RunOpts {
        stop: stop.flag(),
        deadline: None,
        every: Duration::from_secs(1),
    };
    let t = run::host(
        &mut drv,
        &mut ep,
        &mut host,
        plan,
        target,
        None,
        &mut each,
        opts,
        &mut |_| {},
    )
    .map_err(|source| Error::Io { link: 0, source })?;
    // shots never answered at all were never handed on
    let seen = row.rtt_us.len() as u64 + row.lost;
    row.lost += count
        .saturating_sub(warm)
        .saturating_sub(seen)
        .min(t.unanswered);
    if row.rtt_us.is_empty() && !stop.is_stopped() {
        return Err(Error::NoShot {
            samples: g.samples,
            probe: cfg.probe,
            timeout: cfg.timeout,
        });
    }
    row.rtt_us.sort_by(f64::total_cmp);
    Ok(row)
}
