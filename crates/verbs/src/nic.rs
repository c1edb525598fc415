//! One device's RoCE v2 port in this process: the endpoint (regions, QPs, CQs), its UDP
//! socket once a QP needs one, the progress thread, and the CQs armed for an event.
//!
//! Progress is made by whoever calls: an application polling its CQ or posting work runs
//! the endpoint itself ([`Nic::app_progress`]), so a busy-polling program on a small
//! machine is not fighting a second busy thread; the device's own thread
//! ([`crate::progress`]) covers what no call drives — a program asleep on a completion
//! channel, spinning on memory a peer writes, or not calling at all.

use crate::channel::{Channel, CqEvent};
use crate::devices::DeviceInfo;
use rocelink_io::backend::Backend;
use rocelink_io::event::EventFd;
use rocelink_io::udp::RecvBatch;
use rocelink_runtime::xdp::XdpPort;
use rocelink_runtime::{BackendChoice, Driver};
use rocelink_transport::{CqCounts, CqId, Endpoint, EndpointConfig, IcrcPolicy};
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

/// A CQ armed for one event (`ibv_req_notify_cq`).
#[derive(Debug)]
struct Armed {
    cq: CqId,
    solicited_only: bool,
    at: CqCounts,
    channel: Arc<Channel>,
    event: CqEvent,
}

/// The state every call and the thread share, under one lock.
#[derive(Debug)]
pub struct Core {
    /// The endpoint: regions, QPs, CQs.
    pub ep: Endpoint,
    driver: Option<Driver<Box<dyn Backend + Send>>>,
    armed: Vec<Armed>,
    /// I/O errors seen while progressing (the socket keeps going).
    pub io_errors: u64,
    /// Who did the work.
    pub work: Work,
}

/// Who ran the endpoint, and how much came of it: the program's calls or the device's
/// thread (`ROCELINK_VERBS_STATS=1` prints them when the device closes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Rounds run by the program's calls.
    pub app_rounds: u64,
    /// Datagrams those received.
    pub app_datagrams: u64,
    /// Rounds run by the thread.
    pub thread_rounds: u64,
    /// Datagrams those received.
    pub thread_datagrams: u64,
}

impl Core {
    /// Run the endpoint once without waiting (timers, sends, one batch of receives), then
    /// wake the CQs whose event came. Returns the datagrams handled and whether every
    /// datagram went out.
    pub fn progress(&mut self, now: Instant) -> (usize, bool) {
        let r = match self.driver.as_mut() {
            Some(d) => d.progress(&mut self.ep, now).unwrap_or_else(|_| {
                self.io_errors += 1;
                (0, true)
            }),
            None => (0, true),
        };
        self.settle();
        r
    }

    /// Send what is ready (after a post), without receiving.
    pub fn transmit(&mut self, now: Instant) {
        if let Some(d) = self.driver.as_mut()
            && d.transmit(&mut self.ep, now).is_err()
        {
            self.io_errors += 1;
        }
        self.settle();
    }

    /// Wake every armed CQ that got a completion it waits for since it was armed.
    pub fn settle(&mut self) {
        let ep = &self.ep;
        self.armed.retain(|a| {
            let now = ep.cq_counts(a.cq).unwrap_or_default();
            let due = if a.solicited_only {
                now.solicited > a.at.solicited
            } else {
                now.all > a.at.all
            };
            if due {
                a.channel.push(a.event);
            }
            !due
        });
    }

    /// Arm `cq` for one event on `channel` (again: once).
    pub fn arm(&mut self, cq: CqId, solicited_only: bool, channel: Arc<Channel>, event: CqEvent) {
        let at = self.ep.cq_counts(cq).unwrap_or_default();
        if let Some(a) = self.armed.iter_mut().find(|a| a.cq == cq) {
            // armed twice: the weaker request (any completion) wins
            a.solicited_only &= solicited_only;
            return;
        }
        self.armed.push(Armed {
            cq,
            solicited_only,
            at,
            channel,
            event,
        });
    }

    /// Forget `cq`'s arming (it is being destroyed).
    pub fn disarm(&mut self, cq: CqId) {
        self.armed.retain(|a| a.cq != cq);
    }

    /// CQs armed.
    pub fn armed(&self) -> usize {
        self.armed.len()
    }

    /// Whether the socket is open.
    pub fn has_io(&self) -> bool {
        self.driver.is_some()
    }

    /// The earliest timer.
    pub fn next_timer(&self) -> Option<Instant> {
        self.ep.poll_timeout()
    }
}

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
        let core = Core {
            ep: Endpoint::new(cfg),
            driver: None,
            armed: Vec::new(),
            io_errors: 0,
            work: Work::default(),
        };
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
            }),
            thread: Mutex::new(None),
            generation: FORK_GENERATION.load(Ordering::Relaxed),
        })
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
        self.note_armed(core);
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
        if let Ok(t) = self.thread.lock()
            && let Some(h) = t.as_ref()
        {
            h.thread().unpark();
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
            eprintln!(
                "rocelink-verbs: {}: {:?}, {:?}, I/O errors {}",
                self.info.name,
                c.work,
                c.ep.stats(),
                c.io_errors
            );
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
