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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_stops_the_original() {
        let s = Stopper::new();
        let c = s.clone();
        assert!(!s.is_stopped());
        std::thread::spawn(move || c.stop()).join().unwrap();
        assert!(s.is_stopped() && s.flag().load(Ordering::Relaxed));
    }
}
