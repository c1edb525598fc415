//! How any thread ends a running session: a [`Stopper`] (a Ctrl-C handler, a Python
//! `KeyboardInterrupt`, an HTTP request), which the session's loops read through
//! [`crate::RunOpts::stop`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Ends a session from any thread. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// A stopper not yet set.
    pub fn new() -> Stopper {
        Stopper::default()
    }

    /// A stopper set by whoever else holds `flag` too (a signal handler registered on it).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Stopper {
        Stopper(flag)
    }

    /// Ask the session to end: what is in flight is finished, sockets closed, the summary
    /// made.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag the session's loops read.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }
}

/// A session's thread with the [`Stopper`] its loops read: what every single-threaded
/// session handle holds.
#[derive(Debug)]
pub struct SessionThread<T> {
    stop: Stopper,
    thread: std::thread::JoinHandle<T>,
}

impl<T: Send + 'static> SessionThread<T> {
    /// Run `f` on a thread named `name`, handing it the stopper.
    pub fn spawn(
        name: &str,
        f: impl FnOnce(&Stopper) -> T + Send + 'static,
    ) -> std::io::Result<SessionThread<T>> {
        let stop = Stopper::new();
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(&s))?;
        Ok(SessionThread { stop, thread })
    }

    /// A handle that stops the session from any thread.
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Wait for the thread's result; a panic there is a panic here.
    pub fn join(self) -> T {
        match self.thread.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// Stop, then [`join`](SessionThread::join).
    pub fn stop(self) -> T {
        self.stop.stop();
        self.join()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_thread_sees_its_stop_and_returns_its_result() {
        let t = SessionThread::spawn("t", |s: &Stopper| {
            let mut spins = 0u64;
            while !s.is_stopped() && spins < 10_000_000 {
                std::thread::sleep(std::time::Duration::from_micros(100));
                spins += 1;
            }
            s.is_stopped()
        })
        .unwrap();
        assert!(!t.is_finished());
        assert!(t.stop(), "ended by its stopper, not its bound");
    }

    #[test]
    fn a_clone_stops_the_original() {
        let s = Stopper::new();
        let c = s.clone();
        assert!(!s.is_stopped());
        std::thread::spawn(move || c.stop()).join().unwrap();
        assert!(s.is_stopped() && s.flag().load(Ordering::Relaxed));
    }
}
