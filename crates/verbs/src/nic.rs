//! One device's RoCE v2 port in this process: the endpoint (regions, QPs, CQs), its UDP
//! socket once a QP needs one, the progress thread, and the CQs armed for an event.
//!
//! Progress is made by whoever calls: an application polling its CQ or posting work runs
//! the endpoint itself ([`Nic::app_progress`]), so a busy-polling program on a small
//! machine is not fighting a second busy thread; the device's own thread
//! ([`crate::progress`]) covers what no call drives — a program asleep on a completion
//! channel, spinning on memory a peer writes, or not calling at all.

use crate::core::Core;
use crate::devices::DeviceInfo;
use crate::progress::Shared;
use rocelink_io::event::EventFd;
use rocelink_io::udp::RecvBatch;
use rocelink_runtime::{BackendChoice, Driver};
use rocelink_transport::{Endpoint, EndpointConfig, IcrcPolicy};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable naming an interface to run the devices on through AF_XDP
/// (root; IPv4): the steering program takes UDP 4791, the kernel keeps the rest.
pub const XDP_ENV: &str = "ROCELINK_VERBS_XDP";

/// How long an RC responder holds an ACK for the application's answer to ride with
/// ([`EndpointConfig::ack_delay`]): a latency test's answer then brings it along, so the
/// peer's `poll_cq` finds both in one receive.
pub const ACK_DELAY: Duration = Duration::from_micros(100);

/// Why a device call failed.
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    /// This process is a child forked after the device was opened: the parent's queues
    /// and socket are the parent's.
    #[error("the device was opened before fork(): a child cannot use it")]
    Forked,
    /// A panic left the device's state behind.
    #[error("the device's state was left inconsistent by an earlier failure")]
    Poisoned,
    /// The RoCE socket could not be opened.
    #[error("{0}")]
    Bind(std::io::Error),
}

impl NicError {
    /// The errno a verb answers with.
    pub fn errno(&self) -> i32 {
        match self {
            NicError::Forked | NicError::Poisoned => libc::EIO,
            NicError::Bind(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

/// A device opened in this process.
#[derive(Debug)]
pub struct Nic {
    /// What device it is.
    pub info: DeviceInfo,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    generation: u64,
}

/// Bumped in a child after `fork()`: devices opened before are the parent's.
pub(crate) static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Have every `fork()` from now on mark the devices open before it as the parent's.
fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only bumps an atomic (async-signal-safe, as a
        // child handler of a multi-threaded process must be).
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

impl Nic {
    /// The device `info`, with no socket yet.
    pub fn new(info: DeviceInfo) -> std::io::Result<Nic> {
        watch_forks();
        let mut cfg =
            EndpointConfig::new(SocketAddr::new(info.ip, rocelink_transport_port())).random_keys();
        // Linux rxe numbers IPv4 IDs, which a socket never shows; the ICRC gives them back
        cfg.icrc = IcrcPolicy::RecoverIpv4Id;
        cfg.ack_delay = ACK_DELAY;
        let async_fd = Arc::new(EventFd::new(true, false)?);
        let core = Core::new(Endpoint::new(cfg), async_fd);
        Ok(Nic {
            info,
            shared: Arc::new(Shared {
                core: Mutex::new(core),
                app_calls: AtomicU64::new(0),
                armed: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
                wake: EventFd::new(false, true)?,
                sock_fd: AtomicI32::new(-1),
                xdp: std::sync::OnceLock::new(),
                watch: AtomicBool::new(false),
                thread: std::sync::OnceLock::new(),
            }),
            thread: Mutex::new(None),
            generation: FORK_GENERATION.load(Ordering::Relaxed),
        })
    }

    /// The descriptor that counts the device's asynchronous events (`ibv_context.async_fd`
    /// of every context on it).
    pub fn async_fd(&self) -> Result<Arc<EventFd>, NicError> {
        Ok(self.lock()?.asyncs.fd.clone())
    }

    /// The device's state, locked.
    pub fn lock(&self) -> Result<MutexGuard<'_, Core>, NicError> {
        if FORK_GENERATION.load(Ordering::Relaxed) != self.generation {
            return Err(NicError::Forked);
        }
        self.shared.core.lock().map_err(|_| NicError::Poisoned)
    }

    /// A call of the application that drives progress: counted (the thread stays out of
    /// its way while such calls come), then the endpoint is run once.
    pub fn app_progress(&self, core: &mut Core) {
        self.shared.app_calls.fetch_add(1, Ordering::Relaxed);
        let (n, _) = core.progress(Instant::now());
        core.work.app_rounds += 1;
        core.work.app_datagrams += n as u64;
        if n > 0 {
            self.watch_if_apart(core, n);
        }
        self.note_armed(core);
    }

    /// A round of the program received `n` datagrams. In a ping-pong (perftest's WRITE
    /// latency test) an answer arrives with the ACK of the program's own request, two
    /// datagrams a round; one alone — an ACK that left before its answer (the peer was
    /// late, its held ACK went at the delay) — completes the request, and the program may
    /// now wait on memory the answer writes, calling nothing. The thread, parked while
    /// the program polls, then watches the socket for a while ([`crate::progress::WATCH`])
    /// so the answer lands at once, not at the thread's next look; the program's next
    /// round that receives ends the watch. A stream's ACKs (one a round after one a
    /// round) never ask.
    fn watch_if_apart(&self, core: &mut Core, n: usize) {
        if core.answer_apart(n) {
            if !self.shared.watch.swap(true, Ordering::AcqRel) {
                core.work.watches += 1;
                if let Some(t) = self.shared.thread.get() {
                    // the thread parks (no eventfd to signal): an unpark is enough
                    t.unpark();
                }
            }
        } else if self.shared.watch.load(Ordering::Relaxed) {
            // the program's own round took what came: the thread need not watch
            self.shared.watch.store(false, Ordering::Release);
        }
    }

    /// A post: counted as [`Nic::app_progress`], then what it queued is sent.
    pub fn app_transmit(&self, core: &mut Core) {
        self.shared.app_calls.fetch_add(1, Ordering::Relaxed);
        core.transmit(Instant::now());
    }

    /// `core`'s armed CQs changed: the thread keeps the device going while any is armed.
    pub fn note_armed(&self, core: &Core) {
        let before = self.shared.armed.swap(core.armed(), Ordering::Relaxed);
        if before == 0 && core.armed() > 0 {
            self.wake_thread();
        }
    }

    /// Wake the thread (an application about to sleep).
    pub fn wake_thread(&self) {
        let _ = self.shared.wake.signal();
        if let Some(t) = self.shared.thread.get() {
            t.unpark();
        }
    }

    /// Open the RoCE socket and start the thread, if not yet (the first QP's need).
    pub fn start_io(&self, core: &mut Core) -> Result<(), NicError> {
        if core.driver.is_some() {
            return Ok(());
        }
        let choice = BackendChoice::xdp_or_socket(
            std::env::var(XDP_ENV)
                .ok()
                .filter(|i| !i.is_empty())
                .as_deref(),
        );
        let rb = choice
            .open(self.info.ip, rocelink_transport_port(), true)
            .map_err(NicError::Bind)?;
        let size = match rb.backend.as_udp() {
            Some(sock) => {
                self.shared.sock_fd.store(sock.fd(), Ordering::Relaxed);
                if sock.gro() { 65_536 } else { 9_216 }
            }
            None => 9_216,
        };
        if let Some(x) = rb.xdp {
            let _ = self.shared.xdp.set(x);
        }
        let mut driver = Driver::with_backend(rb.backend, RecvBatch::new(64, size));
        // verbs programs wait for a request's completion before they look at what came
        // with it: the answer and the ACK behind it arrive as one
        driver.set_split_answers(false);
        core.driver = Some(driver);
        let shared = self.shared.clone();
        let name = format!("{}-progress", self.info.name);
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || crate::progress::run(&shared))
            .map_err(NicError::Bind)?;
        let _ = self.shared.thread.set(h.thread().clone());
        if let Ok(mut t) = self.thread.lock() {
            *t = Some(h);
        }
        Ok(())
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        if std::env::var_os("ROCELINK_VERBS_STATS").is_some()
            && let Ok(c) = self.lock()
        {
            crate::diag::warn(&format!(
                "{}: {:?}, {:?}, I/O errors {}",
                self.info.name,
                c.work,
                c.ep.stats(),
                c.io_errors
            ));
        }
        self.shared.stop.store(true, Ordering::Release);
        self.wake_thread();
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        // a child after fork has no thread of the parent's to join
        if FORK_GENERATION.load(Ordering::Relaxed) == self.generation
            && let Some(h) = handle
        {
            let _ = h.join();
        }
    }
}

/// RoCE v2's UDP port.
const fn rocelink_transport_port() -> u16 {
    4791
}
