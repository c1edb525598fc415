//! A device's progress thread: it runs the endpoint whenever the application does not —
//! received packets answered, WRITEs placed, timers run, completion channels woken.
//!
//! While the application keeps calling (a busy `poll_cq` loop does several hundred
//! thousand calls a second), each call runs the endpoint itself and the thread only looks
//! every [`LOOK_EVERY`] whether the calls still come (at least [`BUSY_CALLS`] of them).
//! Once a look finds fewer — the program
//! sleeps on a completion channel, spins on the memory a peer's WRITE changes, or does
//! something else — the thread takes over: it sleeps in `poll` on the socket (or until the
//! next timer), handles what arrives, and keeps looking without sleeping for [`SPIN`] after
//! each datagram, so a stream's next packet finds it awake — yielding the CPU between
//! looks, so that an application pinned to the same CPU runs at once. While a CQ is armed for an
//! event the thread always does this (the program means to sleep), and for up to [`WATCH`]
//! when a program's round found an answer apart from its ACK (the program may now spin on
//! memory the answer writes: [`crate::nic::Nic::app_progress`]).
//!
//! Idle cost: with no traffic and no timer, nothing (asleep in `poll`); while the
//! application polls, one wake-up per [`LOOK_EVERY`].

use crate::core::Core;
use rocelink_io::event::EventFd;
use rocelink_io::udp::wait_readable_any;
use rocelink_runtime::xdp::XdpPort;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

/// What the calls and the thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) core: Mutex<Core>,
    /// Calls of the application that drive progress (poll, post).
    pub(crate) app_calls: AtomicU64,
    /// CQs armed (a copy of `Core::armed`'s length, read without the lock).
    pub(crate) armed: AtomicUsize,
    pub(crate) stop: AtomicBool,
    /// Wakes the thread out of its wait.
    pub(crate) wake: EventFd,
    /// The socket's descriptor once it is open (-1 before, and for AF_XDP).
    pub(crate) sock_fd: AtomicI32,
    /// The AF_XDP port, when the device runs on one (`ROCELINK_VERBS_XDP`): what the thread
    /// sleeps on.
    pub(crate) xdp: std::sync::OnceLock<XdpPort>,
    /// Set by a program's round that found an answer apart from its ACK
    /// ([`crate::nic::Nic::app_progress`]): the thread watches the socket though the
    /// program polls, until a datagram comes or [`WATCH`] passes.
    pub(crate) watch: AtomicBool,
    /// The thread, to unpark (set once it runs).
    pub(crate) thread: std::sync::OnceLock<std::thread::Thread>,
}

/// How often the thread looks whether the application still drives progress itself.
pub const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Calls the application must make within [`LOOK_EVERY`] for the thread to leave the
/// device to it: a busy `poll_cq` loop makes hundreds of thousands a second; a program
/// that looks now and then (every few milliseconds, say) gets the thread's help.
pub const BUSY_CALLS: u64 = 64;

/// How often a thread asleep on an AF_XDP port looks for a wake-up.
const XDP_LOOK: Duration = Duration::from_millis(1);

/// How long the thread watches the socket when a program's round found an answer apart
/// from its ACK (the answer is due within the peer's ACK delay).
pub const WATCH: Duration = Duration::from_millis(1);

/// How long the thread keeps looking without sleeping after a datagram.
pub const SPIN: Duration = Duration::from_micros(100);

/// Whether the thread watches the socket at `now`: asked to, and not [`WATCH`] past the
/// first look since (`until`, which ends the watch once it passes).
fn watch_now(shared: &Shared, now: Instant, until: &mut Option<Instant>) -> bool {
    if !shared.watch.load(Ordering::Acquire) {
        *until = None;
        return false;
    }
    if now < *until.get_or_insert(now + WATCH) {
        return true;
    }
    shared.watch.store(false, Ordering::Release);
    *until = None;
    false
}

/// The thread's loop, until the device is closed.
pub(crate) fn run(shared: &Shared) {
    let mut seen = shared.app_calls.load(Ordering::Relaxed);
    let mut since = Instant::now();
    let mut busy = false;
    let mut last_rx: Option<Instant> = None;
    let mut watch_until: Option<Instant> = None;
    let sock = shared.sock_fd.load(Ordering::Relaxed);
    let wake = std::os::fd::AsRawFd::as_raw_fd(&shared.wake);
    while !shared.stop.load(Ordering::Acquire) {
        // one look per window: did the application make its calls?
        let now = Instant::now();
        if now >= since + LOOK_EVERY {
            let calls = shared.app_calls.load(Ordering::Relaxed);
            busy = calls.wrapping_sub(seen) >= BUSY_CALLS;
            (seen, since) = (calls, now);
        }
        let watching = watch_now(shared, now, &mut watch_until);
        if busy && !watching && shared.armed.load(Ordering::Relaxed) == 0 {
            // the application runs the device itself: stay out of its way
            last_rx = None;
            std::thread::park_timeout((since + LOOK_EVERY).saturating_duration_since(now));
            continue;
        }
        let spinning = last_rx.is_some_and(|t| now < t + SPIN);
        if !spinning {
            let timer = shared.core.lock().ok().and_then(|c| c.next_timer());
            let timer = match watch_until {
                Some(w) => Some(timer.map_or(w, |t| t.min(w))),
                None => timer,
            };
            let wait = timer.map(|t| t.saturating_duration_since(now));
            // readable, a timer or a wake-up: run the endpoint in any case
            match shared.xdp.get() {
                // an AF_XDP port has its own wait (its stack's timers): looked at again
                // every millisecond for a wake-up
                Some(x) => {
                    let _ = x.wait_readable(Some(wait.map_or(XDP_LOOK, |w| w.min(XDP_LOOK))));
                }
                None => {
                    let _ = wait_readable_any(&[sock, wake], wait);
                }
            }
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            let _ = shared.wake.take();
        }
        let Ok(mut core) = shared.core.lock() else {
            return;
        };
        let (n, all_sent) = core.progress(Instant::now());
        core.work.thread_rounds += 1;
        core.work.thread_datagrams += n as u64;
        shared.armed.store(core.armed(), Ordering::Relaxed);
        drop(core);
        if n > 0 {
            last_rx = Some(Instant::now());
            // the answer the program waits on has landed
            shared.watch.store(false, Ordering::Release);
        }
        if n == 0 && spinning {
            // nothing yet: let the application run first if it shares this CPU (what the
            // thread placed is what it waits for: it answers, and a held ACK rides along)
            std::thread::yield_now();
        }
        if !all_sent {
            // the socket is full: give it a moment before trying again
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
