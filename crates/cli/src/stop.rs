//! Ctrl-C and SIGTERM: the first asks the running command to stop cleanly (finish what it
//! reported, make it durable, tell the device to stop, print the summary, exit 0); a
//! second Ctrl-C exits at once with 130, removing the control socket first.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A flag set by SIGINT or SIGTERM.
#[derive(Debug, Clone)]
pub(crate) struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Install the handlers (once per process).
    pub(crate) fn install() -> anyhow::Result<StopFlag> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let f = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            rocelink_io::signal::stop_then_exit(sig, f.clone())?;
        }
        Ok(StopFlag(f))
    }
    /// Whether a signal came.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// A [`rocelink_runtime::Stopper`] the signals set: what a library's long run reads.
    pub(crate) fn stopper(&self) -> rocelink_runtime::Stopper {
        rocelink_runtime::Stopper::from_flag(self.0.clone())
    }
}

/// Until `finished`, every 100 ms: pass a Ctrl-C on to the session and call `tick`.
pub(crate) fn watch(
    stop: &StopFlag,
    stopper: &rocelink_runtime::Stopper,
    finished: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(),
) {
    while !finished() {
        if stop.is_set() {
            stopper.stop();
        }
        tick();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
