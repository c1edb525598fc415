//! The one shape of a running role. Each role's session is started by its own
//! `Type::start(config, …)` — the role's plain-data config, and what a caller lends it (a
//! counters board, frame sinks) — and is then driven the same way whatever the role: live
//! counters from [`Session::progress`], what happens from [`Session::next_event`], an end
//! asked for through the one [`Stopper`], and the summary (or the error that ended it) from
//! [`Session::wait`]. The CLI, Python and the view drive every role through it; [`follow`]
//! is the loop they share.

use crate::Stopper;
use std::time::{Duration, Instant};

/// The event of a session that reports none: no value of it exists, so a `follow` of such
/// a session hands nothing over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum NoEvent {}

/// A running role. Its progress, events and summary are serde data: the CLI's `--json`,
/// Python's dicts and the view's `status.json` are their serialisation.
pub trait Session: Sized {
    /// Its live counters.
    type Progress: serde::Serialize;
    /// What it reports as it runs ([`NoEvent`] where nothing).
    type Event: serde::Serialize;
    /// What it did.
    type Summary: serde::Serialize;
    /// Why it could not finish.
    type Error: std::error::Error + Send + Sync + 'static;

    /// A handle that ends the session from any thread: what is in flight is finished,
    /// sockets closed, the summary made.
    fn stopper(&self) -> Stopper;

    /// Its counters now.
    fn progress(&self) -> Self::Progress;

    /// The next event, waiting at most `timeout`: `None` when none came in that time, or
    /// when the session has ended and none is left.
    fn next_event(&self, timeout: Duration) -> Option<Self::Event>;

    /// Whether it has ended (by its limits, an error, or a stop).
    fn is_finished(&self) -> bool;

    /// Wait until it ends; its summary.
    fn wait(self) -> Result<Self::Summary, Self::Error>;

    /// Stop, then [`Session::wait`].
    fn stop(self) -> Result<Self::Summary, Self::Error> {
        self.stopper().stop();
        self.wait()
    }
}

/// Run `session` to its end, handing each event to `on_event` as it comes; the summary.
/// A stop from elsewhere (Ctrl-C, Python, the view) goes through the session's stopper and
/// ends it here too.
pub fn follow<S: Session>(
    session: S,
    mut on_event: impl FnMut(S::Event),
) -> Result<S::Summary, S::Error> {
    loop {
        match session.next_event(Duration::from_millis(100)) {
            Some(e) => on_event(e),
            None if session.is_finished() => {
                // what came between the last look and the end
                while let Some(e) = session.next_event(Duration::ZERO) {
                    on_event(e);
                }
                break;
            }
            None => {}
        }
    }
    session.wait()
}

/// An error's text with its sources, `: `-joined (a source whose text already ends the
/// line, as an error that shows its source says it, is not repeated): how a summary
/// serialises an error, and what Python's exceptions say.
pub fn error_text(e: &dyn std::error::Error) -> String {
    let mut t = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let m = s.to_string();
        if !t.ends_with(&m) {
            t.push_str(": ");
            t.push_str(&m);
        }
        src = s.source();
    }
    t
}

/// Gbit/s of `bytes` in `secs` (a summary's rate).
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs.max(1e-9) / 1e9
}

/// A duration as seconds (a float): how a summary serialises one (serde's own form is an
/// object of seconds and nanoseconds). For `#[serde(serialize_with = …)]`.
pub fn serialize_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// [`Session::next_event`] of a session that reports no events: wait until `timeout`
/// passed or `finished` says it ended, whichever is first.
pub fn no_event<E>(timeout: Duration, finished: impl Fn() -> bool) -> Option<E> {
    let until = Instant::now() + timeout;
    while !finished() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionThread;
    use std::sync::Mutex;
    use std::sync::mpsc::{Receiver, sync_channel};

    /// A role that counts to a limit, one event per step, unless stopped first.
    struct Counter {
        thread: SessionThread<u32>,
        events: Receiver<u32>,
        seen: Mutex<u32>,
    }

    #[derive(Debug)]
    struct Never;

    impl std::fmt::Display for Never {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("never")
        }
    }

    impl std::error::Error for Never {}

    impl Counter {
        fn start(limit: u32) -> Counter {
            let (tx, events) = sync_channel(64);
            let thread = SessionThread::spawn("counter", move |stop| {
                let mut n = 0;
                while n < limit && !stop.is_stopped() {
                    n += 1;
                    let _ = tx.send(n);
                    std::thread::sleep(Duration::from_millis(1));
                }
                n
            })
            .unwrap();
            Counter {
                thread,
                events,
                seen: Mutex::new(0),
            }
        }
    }

    impl Session for Counter {
        type Progress = u32;
        type Event = u32;
        type Summary = u32;
        type Error = Never;
        fn stopper(&self) -> Stopper {
            self.thread.stopper()
        }
        fn progress(&self) -> u32 {
            *self.seen.lock().unwrap()
        }
        fn next_event(&self, timeout: Duration) -> Option<u32> {
            let e = self.events.recv_timeout(timeout).ok();
            if let Some(n) = e {
                *self.seen.lock().unwrap() = n;
            }
            e
        }
        fn is_finished(&self) -> bool {
            self.thread.is_finished()
        }
        fn wait(self) -> Result<u32, Never> {
            Ok(self.thread.join())
        }
    }

    #[test]
    fn follow_hands_over_every_event_up_to_the_end() {
        let mut got = Vec::new();
        let n = follow(Counter::start(20), |e| got.push(e)).unwrap();
        assert_eq!(n, 20);
        assert_eq!(got, (1..=20).collect::<Vec<_>>());
    }

    #[test]
    fn a_stop_from_another_thread_ends_the_follow() {
        let s = Counter::start(u32::MAX);
        let stop = s.stopper();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            stop.stop();
        });
        let mut last = 0;
        let n = follow(s, |e| last = e).unwrap();
        t.join().unwrap();
        assert!(n > 0 && n < u32::MAX);
        assert_eq!(last, n, "every event up to the stop was handed over");
    }

    #[test]
    fn no_event_returns_at_the_end_or_the_timeout() {
        let t = Instant::now();
        assert_eq!(no_event::<()>(Duration::from_millis(20), || false), None);
        assert!(t.elapsed() >= Duration::from_millis(20));
        let t = Instant::now();
        assert_eq!(no_event::<()>(Duration::from_secs(30), || true), None);
        assert!(t.elapsed() < Duration::from_secs(30));
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("reading the ring")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_serialises_with_its_sources() {
        let e = Outer(std::io::Error::other("disk full"));
        assert_eq!(error_text(&e), "reading the ring: disk full");
        let d = serde_json::to_string(&Wrap(Duration::from_millis(1500))).unwrap();
        assert_eq!(d, "1.5");
    }

    struct Wrap(Duration);

    impl serde::Serialize for Wrap {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_seconds(&self.0, s)
        }
    }
}
