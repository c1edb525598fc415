//! [`Live`]: what a running command publishes to its view — each frame's verdict (cheap:
//! a few counters under a lock), now and then a picture, and at the end its summary.

use crate::history::{History, Totals};
use crate::picture::Render;
use crate::pictures::{Pictures, Png};
use rocelink_runtime::counters::Board;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One frame (or shot) as a source saw it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The source (virtual port, link) it came from.
    pub source: u32,
    /// Its number.
    pub number: u64,
    /// Complete and verified.
    pub good: bool,
    /// Its bytes.
    pub bytes: u64,
    /// Packets the source lost so far (its running total).
    pub packets_lost: u64,
    /// ICRC errors the source saw so far (its running total).
    pub icrc_errors: u64,
    /// Its bytes, for a picture (`None`: no picture of it).
    pub data: Option<&'a [u8]>,
}

/// Kinds of stream, for the page's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// HSB camera frames.
    Camera,
    /// Ultrasound shots.
    Shots,
    /// IMS frames.
    Ims,
}

/// How many sources (ports, links) a view keeps apart; more are folded into the last.
const MAX_SOURCES: u32 = 64;

/// How soon a browser reconnects to an event stream that ended (the routes tell it; the
/// end of a run waits that long for it).
pub(crate) const RETRY: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct State {
    good: u64,
    damaged: u64,
    bytes: u64,
    /// Per source: packets lost, ICRC errors (running totals).
    sources: BTreeMap<u32, (u64, u64)>,
    last_number: Option<u64>,
    last: Option<Value>,
    last_at: Option<Instant>,
    history: History,
    ended: Option<Value>,
}

impl State {
    fn lost(&self) -> u64 {
        self.sources.values().map(|s| s.0).sum()
    }
    fn icrc(&self) -> u64 {
        self.sources.values().map(|s| s.1).sum()
    }
}

struct Shared {
    command: String,
    kind: Kind,
    t0: Instant,
    board: Option<Board>,
    state: Mutex<State>,
    pictures: Option<Pictures>,
    watchers: AtomicUsize,
    asked_ms: AtomicU64,
}

/// A running command's view: cheap to clone, shared by the stream's threads and the
/// server.
#[derive(Clone)]
pub struct Live(Arc<Shared>);

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("command", &self.0.command)
            .field("kind", &self.0.kind)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How often a frame's metadata is kept (the page refreshes less often).
const META_EVERY: Duration = Duration::from_millis(50);

/// How long after the page last asked pictures are still made.
const LOOKING: Duration = Duration::from_secs(3);

impl Live {
    /// The view of `command` streaming `kind`: pictures made by `render` (none without),
    /// the counters on `board` shown.
    pub fn new(
        command: &str,
        kind: Kind,
        render: Option<Render>,
        board: Option<Board>,
    ) -> std::io::Result<Live> {
        let pictures = render.map(Pictures::start).transpose()?;
        Ok(Live(Arc::new(Shared {
            command: command.to_string(),
            kind,
            t0: Instant::now(),
            board,
            state: Mutex::new(State::default()),
            pictures,
            watchers: AtomicUsize::new(0),
            asked_ms: AtomicU64::new(u64::MAX),
        })))
    }

    /// Count one frame, keep its metadata (`meta` is called at most every 50 ms: the
    /// metadata shown is of a frame at most that old, and names its frame), and offer it
    /// for a picture when someone looks.
    pub fn frame(&self, f: &Seen<'_>, meta: &dyn Fn() -> Value) {
        let t = self.0.t0.elapsed();
        {
            let mut s = lock(&self.0.state);
            s.good += u64::from(f.good);
            s.damaged += u64::from(!f.good);
            s.bytes += f.bytes;
            *s.sources.entry(f.source.min(MAX_SOURCES)).or_default() =
                (f.packets_lost, f.icrc_errors);
            s.last_number = Some(f.number);
            let totals = Totals {
                frames: s.good + s.damaged,
                damaged: s.damaged,
                bytes: s.bytes,
                lost: s.lost(),
            };
            s.history.set(t.as_secs(), totals);
            if s.last_at.is_none_or(|a| a.elapsed() >= META_EVERY) {
                s.last = Some(meta());
                s.last_at = Some(Instant::now());
            }
        }
        if let (true, Some(p), Some(d)) = (f.good && self.looking(), &self.0.pictures, f.data) {
            p.offer(f.number, d);
        }
    }

    /// Whether a page has asked for anything in the last [`LOOKING`].
    fn looking(&self) -> bool {
        let asked = self.0.asked_ms.load(Ordering::Relaxed);
        self.0.watchers.load(Ordering::Relaxed) > 0
            || (asked != u64::MAX && self.ms().saturating_sub(asked) < LOOKING.as_millis() as u64)
    }

    fn ms(&self) -> u64 {
        self.0.t0.elapsed().as_millis() as u64
    }

    /// A page asked for something (pictures are made for the next few seconds).
    pub(crate) fn asked(&self) {
        self.0.asked_ms.store(self.ms(), Ordering::Relaxed);
    }

    /// A page follows the events until the guard is dropped.
    pub(crate) fn watch(&self) -> Watching {
        self.asked();
        self.0.watchers.fetch_add(1, Ordering::Relaxed);
        Watching(self.clone())
    }

    /// The stream ended with `summary` (the command's own): the status says so, and every
    /// page following the events is sent it.
    pub fn end(&self, summary: Value) {
        lock(&self.0.state).ended = Some(summary);
    }

    /// After [`Live::end`]: wait until the pages following the events were sent the end,
    /// at most `limit`. A page whose event stream had just ended (they end every few
    /// seconds) reconnects within half a second: the wait is at least that
    /// long and a bit, so it too is sent the end instead of finding the server gone.
    pub fn flush(&self, limit: Duration) {
        let t = Instant::now();
        let grace = RETRY + Duration::from_millis(250);
        while (self.0.watchers.load(Ordering::Relaxed) > 0 || t.elapsed() < grace)
            && t.elapsed() < limit
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The latest picture.
    pub fn picture(&self) -> Option<Png> {
        self.0.pictures.as_ref().and_then(Pictures::latest)
    }

    /// Whether the stream ended.
    pub fn ended(&self) -> bool {
        lock(&self.0.state).ended.is_some()
    }

    /// The numbers the page shows (`GET /status.json`).
    pub fn status(&self) -> Value {
        let now = self.0.t0.elapsed();
        let secs = now.as_secs();
        let s = lock(&self.0.state);
        let last_second = s.history.during(secs.saturating_sub(1));
        let counters = self.0.board.as_ref().map(Board::snapshot);
        let pic = self.picture();
        json!({
            "mode": "live",
            "command": self.0.command,
            "kind": self.0.kind,
            "elapsed_s": now.as_secs_f64(),
            "frames_good": s.good,
            "frames_damaged": s.damaged,
            "bytes": s.bytes,
            "fps": if secs >= 1 { last_second.frames } else { 0 },
            "gbps": if secs >= 1 { last_second.bytes as f64 * 8.0 / 1e9 } else { 0.0 },
            "last_frame_number": s.last_number,
            "packets_lost": s.lost(),
            "icrc_errors": s.icrc(),
            "last": s.last,
            "picture": pic.as_ref().map(|p| json!({"version": p.version, "frame": p.frame,
                "width": p.width, "height": p.height, "ms": p.took.as_secs_f64() * 1e3})),
            "picture_error": self.0.pictures.as_ref().and_then(Pictures::failure),
            "history": s.history.chart(secs, 300),
            "counters_table": counters.as_ref().map(|c| c.table()),
            "counters": counters,
            "ended": s.ended.is_some(),
            "summary": s.ended,
        })
    }
}

/// A page following the events (see [`Live::watch`]).
#[derive(Debug)]
pub(crate) struct Watching(Live);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(n: u64, good: bool, lost: u64) -> Seen<'static> {
        Seen {
            source: 0,
            number: n,
            good,
            bytes: 1000,
            packets_lost: lost,
            icrc_errors: 0,
            data: None,
        }
    }

    #[test]
    fn frames_are_counted_and_losses_summed_over_sources() {
        let l = Live::new("receive", Kind::Camera, None, None).unwrap();
        l.frame(&seen(1, true, 0), &|| json!({"psn": 1}));
        l.frame(&seen(2, false, 3), &|| json!({"psn": 2}));
        std::thread::sleep(META_EVERY);
        l.frame(
            &Seen {
                source: 1,
                ..seen(3, true, 4)
            },
            &|| json!({"psn": 3}),
        );
        let s = l.status();
        assert_eq!(s["frames_good"], 2);
        assert_eq!(s["frames_damaged"], 1);
        assert_eq!(s["packets_lost"], 7);
        assert_eq!(s["last_frame_number"], 3);
        assert_eq!(s["last"]["psn"], 3);
        assert_eq!(s["ended"], false);
        l.end(json!({"frames": 3}));
        assert_eq!(l.status()["summary"]["frames"], 3);
    }

    #[test]
    fn pictures_are_made_only_while_a_page_looks() {
        let render: Render = Arc::new(|d: &[u8]| {
            Ok(crate::picture::Picture {
                width: d.len(),
                height: 1,
                channels: 1,
                data: d.to_vec(),
            })
        });
        let l = Live::new("demo", Kind::Camera, Some(render), None).unwrap();
        let f = |n| Seen {
            data: Some(&[9u8; 4][..]),
            ..seen(n, true, 0)
        };
        l.frame(&f(1), &|| Value::Null);
        std::thread::sleep(Duration::from_millis(100));
        assert!(l.picture().is_none(), "nobody looked");
        let w = l.watch();
        l.frame(&f(2), &|| Value::Null);
        let t = Instant::now();
        while l.picture().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(l.picture().map(|p| p.frame), Some(2));
        drop(w);
        assert_eq!(l.0.watchers.load(Ordering::Relaxed), 0);
    }
}
