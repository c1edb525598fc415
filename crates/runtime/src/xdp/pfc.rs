//! Priority flow control (802.1Qbb) on an owned port, both ways:
//!
//! * **Transmit** ([`Held`]): a pause received for a class holds that class's datagrams
//!   in a bounded queue (what overflows it is dropped and counted, as a device's buffer
//!   would) until the pause runs out at the link's rate or a frame with quanta 0 resumes
//!   it; held datagrams leave first, round robin among the classes, so each class keeps
//!   its order. A datagram's class is its DSCP's class selector (DSCP / 8), which is also
//!   the 802.1Q priority a tagged port sends it with.
//! * **Receive** ([`Watch`]): a thread of its own watches how full the AF_XDP receive ring
//!   is and, past a threshold, pauses the classes arriving ([`LevelPause`]) through an
//!   AF_PACKET socket of its own — so it asks even while the consumer is busy inside a
//!   batch and holds the port's lock — refreshes the pause while the ring stays full and
//!   resumes the classes once it drains.
//!
//! PFC frames are link-local: whoever shares the segment can pause the port, as on a
//! switch port with PFC on. A paused class costs the hold queue's memory, never more; the
//! other classes keep flowing.

use rocelink_io::packet::PacketSocket;
use rocelink_io::xdp::Level;
use rocelink_netstack::iface::UdpTx;
use rocelink_netstack::pfc::{CLASSES, LevelPause, PfcTx};
use rocelink_wire::bytes::Mac;
use rocelink_wire::ethernet::ethertype;
use rocelink_wire::pfc;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// With PFC on, frames the port lets wait in the AF_XDP transmit ring at most: what is
/// there is committed to the wire (a pause no longer stops it), as a NIC's transmit FIFO
/// past its pause point — about 90 µs of 1.4 KB frames at 10 Gbit/s. Without the cap the
/// ring's 2048 would reach the peer after its pause, more than its headroom.
pub(super) const TX_DEPTH: u32 = 64;

/// How an owned port takes part in priority flow control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PfcConfig {
    /// The link's rate: one pause quantum is 512 bit times at it.
    pub link_bps: u64,
    /// Datagrams held per paused class before the newest are dropped.
    pub hold: usize,
    /// Pause when the receive ring holds this many frames (0: half of it: the other half
    /// is the headroom for what arrives before the pause takes effect — a look every
    /// 200 µs, this thread's wait for a CPU, the peer's reaction).
    pub xoff: u32,
    /// Resume when it is down to this many (0: a quarter of it).
    pub xon: u32,
    /// Quanta of each pause sent.
    pub quanta: u16,
}

impl PfcConfig {
    /// PFC on a link of `gbps` Gbit/s: 4096 datagrams held per class, pauses of 0xFFFF
    /// quanta sent at half the receive ring, resumes at a quarter.
    pub fn new(gbps: f64) -> PfcConfig {
        PfcConfig {
            link_bps: (gbps.max(0.001) * 1e9) as u64,
            hold: 4096,
            xoff: 0,
            xon: 0,
            quanta: 0xFFFF,
        }
    }
}

/// Per-class PFC counters of a port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PfcClassStats {
    /// Pause frames received for the class (quanta > 0).
    pub pauses_in: u64,
    /// Resumes received (quanta 0).
    pub resumes_in: u64,
    /// How long the class was paused by the peer.
    pub paused: Duration,
    /// Datagrams held while the class was paused.
    pub held: u64,
    /// Datagrams dropped: the class's hold queue was full.
    pub dropped: u64,
    /// Pauses this port sent for the class (its receive ring filling).
    pub pauses_out: u64,
    /// Resumes it sent.
    pub resumes_out: u64,
    /// How long it kept the class paused.
    pub asked: Duration,
}

impl PfcClassStats {
    /// Whether anything happened to the class.
    pub fn is_idle(&self) -> bool {
        *self == PfcClassStats::default()
    }
}

/// The transmit side: datagrams held per class while paused.
#[derive(Debug)]
pub(super) struct Held {
    tx: PfcTx<(UdpTx, Vec<u8>)>,
    held: [u64; CLASSES],
    dropped: [u64; CLASSES],
}

impl Held {
    pub(super) fn new(cfg: &PfcConfig) -> Held {
        Held {
            tx: PfcTx::new(cfg.hold.max(1), cfg.link_bps),
            held: [0; CLASSES],
            dropped: [0; CLASSES],
        }
    }

    /// The class of a datagram marked `to`.
    pub(super) fn class(to: &UdpTx) -> u8 {
        rocelink_netstack::pfc::class_of(None, to.dscp)
    }

    /// Honour a PFC frame received at `now`.
    pub(super) fn handle_pause(&mut self, now: Instant, f: &pfc::Repr) {
        self.tx.handle_pause(now, f);
    }

    /// Whether a datagram of `class` must wait behind a pause (or behind what is held).
    pub(super) fn must_hold(&self, class: u8, now: Instant) -> bool {
        self.tx.is_paused(class, now) || self.tx.len(class) > 0
    }

    /// Hold a datagram of `class`; a full queue drops it (counted).
    pub(super) fn hold(&mut self, class: u8, to: UdpTx, bytes: Vec<u8>) {
        let c = usize::from(class & 7);
        match self.tx.push(class, (to, bytes)) {
            Ok(()) => self.held[c] += 1,
            Err(_) => self.dropped[c] += 1,
        }
    }

    /// The next held datagram that may go at `now`.
    pub(super) fn next(&mut self, now: Instant) -> Option<(UdpTx, Vec<u8>)> {
        self.tx.poll(now).map(|(_, item)| item)
    }

    /// When a held datagram may go next.
    pub(super) fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.tx.poll_timeout(now)
    }

    /// Copy the transmit side's counters into `out`.
    fn fill(&self, out: &mut [PfcClassStats; CLASSES]) {
        for (c, o) in out.iter_mut().enumerate() {
            let s = self.tx.stats[c];
            o.pauses_in = s.pauses;
            o.resumes_in = s.resumes;
            o.paused = s.paused;
            o.held = self.held[c];
            o.dropped = self.dropped[c];
        }
    }
}

/// The receive side's decisions and the socket that sends them.
#[derive(Debug)]
struct Asker {
    pause: LevelPause,
    sock: PacketSocket,
    /// The PFC frame, its payload rewritten for each one sent.
    frame: [u8; 60],
}

impl Asker {
    /// Send what the level `level` calls for.
    fn look(&mut self, now: Instant, level: u32, seen: u8) {
        if let Some(f) = self.pause.handle_level(now, level, seen) {
            f.emit(&mut self.frame[14..14 + pfc::PAYLOAD_LEN]);
            // no room in the socket: a pause is sent again at the next look anyway
            let _ = self.sock.send(&self.frame);
        }
    }
}

/// What the receive side shares between its thread and the port's consumer.
#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    /// Classes seen arriving (bit n = class n).
    seen: AtomicU8,
    level: Level,
    asker: Mutex<Asker>,
}

impl Shared {
    /// Look at the ring and send what it calls for; `wait`: block for the lock (the
    /// thread), else leave it to whoever holds it (the consumer).
    fn look(&self, wait: bool) {
        let guard = match self.asker.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if wait => {
                Some(self.asker.lock().unwrap_or_else(|p| p.into_inner()))
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut a) = guard {
            a.look(
                Instant::now(),
                self.level.get(),
                self.seen.load(Ordering::Relaxed),
            );
        }
    }
}

/// How often the watching thread looks at the ring: at 10 Gbit/s of 1.4 KB frames about
/// 180 arrive in between, well inside the half of the ring left above the threshold.
const TICK: Duration = Duration::from_micros(200);

/// The receive side: the thread that pauses the sender while the receive ring is full
/// (and the consumer, which looks too after each batch it takes, so a burst arriving while
/// it runs and the thread waits for a CPU is paused in time).
#[derive(Debug)]
pub(super) struct Watch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Watch `level` and send pauses from `mac` on `ifname`.
    pub(super) fn start(
        cfg: &PfcConfig,
        ifname: &str,
        mac: Mac,
        level: Level,
    ) -> io::Result<Watch> {
        let sock = PacketSocket::open(ifname, ethertype::MAC_CONTROL, 4096)?;
        let size = level.size();
        let xoff = if cfg.xoff == 0 { size / 2 } else { cfg.xoff };
        let xon = if cfg.xon == 0 { size / 4 } else { cfg.xon };
        let mut frame = [0u8; 60];
        frame[..6].copy_from_slice(&pfc::DST_MAC.0);
        frame[6..12].copy_from_slice(&mac.0);
        frame[12..14].copy_from_slice(&ethertype::MAC_CONTROL.to_be_bytes());
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            seen: AtomicU8::new(0),
            level,
            asker: Mutex::new(Asker {
                pause: LevelPause::new(xoff.min(size), xon, cfg.quanta, cfg.link_bps),
                sock,
                frame,
            }),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rocelink-pfc".into())
            .spawn(move || watch(&s))?;
        Ok(Watch {
            shared,
            thread: Some(thread),
        })
    }

    /// After a batch: note the classes of its frames (bit n = class n) and look at the
    /// ring.
    pub(super) fn after_batch(&self, classes: u8) {
        if self.shared.seen.load(Ordering::Relaxed) & classes != classes {
            self.shared.seen.fetch_or(classes, Ordering::Relaxed);
        }
        self.shared.look(false);
    }

    /// Copy the receive side's counters into `out`.
    fn fill(&self, out: &mut [PfcClassStats; CLASSES]) {
        let s = self
            .shared
            .asker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pause
            .stats;
        for (o, s) in out.iter_mut().zip(s) {
            o.pauses_out = s.pauses;
            o.resumes_out = s.resumes;
            o.asked = s.paused;
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The watching thread: look at the ring every [`TICK`] until told to stop; then resume
/// whatever is still paused rather than leave the sender paused.
fn watch(s: &Shared) {
    while !s.stop.load(Ordering::Relaxed) {
        s.look(true);
        std::thread::sleep(TICK);
    }
    let mut a = s.asker.lock().unwrap_or_else(|p| p.into_inner());
    if a.pause.paused() != 0 {
        a.look(Instant::now(), 0, 0);
    }
}

/// The port's PFC counters: the transmit side's and the receive side's.
pub(super) fn stats(held: Option<&Held>, watch: Option<&Watch>) -> [PfcClassStats; CLASSES] {
    let mut out = [PfcClassStats::default(); CLASSES];
    if let Some(h) = held {
        h.fill(&mut out);
    }
    if let Some(w) = watch {
        w.fill(&mut out);
    }
    out
}
