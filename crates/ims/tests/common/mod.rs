//! The IMS roles on the two ends of a simulated link, polled between the link's steps,
//! and a consumer that records what it was handed.
#![allow(dead_code, unreachable_pub)]

use rocelink_ims::{
    Frame, PatternSource, RateConsumer, Unit, UnitConfig, Worker, WorkerConfig, WorkerState,
};
use rocelink_transport::sim::{LinkConfig, Pair};
use rocelink_transport::{Endpoint, EndpointConfig};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub const WORKER: &str = "10.0.0.1:4791";
pub const SERVER: &str = "10.0.0.2:4791";

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// What the consumer saw: VA → (times consumed, intact).
pub type Seen = Rc<RefCell<(Vec<u64>, BTreeMap<u64, (u32, bool)>)>>;

pub struct Net {
    pub pair: Pair,
    pub server: Unit,
    pub worker: Worker,
    pub source: PatternSource,
    pub seen: Seen,
    pub rate: Option<RateConsumer>,
}

pub fn cfg_worker() -> WorkerConfig {
    WorkerConfig {
        packet_bytes: 1024,
        in_flight: 8,
        timeout: Duration::from_millis(30),
        wait: Duration::from_millis(2),
        retry: Duration::from_millis(10),
        setup_timeout: Duration::from_millis(500),
        ..WorkerConfig::new(addr(SERVER))
    }
}

pub fn cfg_server() -> UnitConfig {
    UnitConfig {
        ring_bytes: 256 * 1024,
        va_offset: u64::MAX - 64 * 1024 + 1, // the stream crosses the top of the VA space
        ..UnitConfig::default()
    }
}

pub fn net(
    w: WorkerConfig,
    s: UnitConfig,
    frame: usize,
    frames: u64,
    link: LinkConfig,
    seed: u64,
) -> Net {
    let mut a = Endpoint::new(EndpointConfig::new(addr(WORKER)));
    let mut b = Endpoint::new(EndpointConfig::new(addr(SERVER)));
    let server = Unit::new(&mut b, s).unwrap();
    let worker = Worker::new(&mut a, w, frame).unwrap();
    Net {
        pair: Pair::new(a, b, link, seed, Instant::now()),
        server,
        worker,
        source: PatternSource::new(frame, Some(frames)).unwrap(),
        seen: Rc::default(),
        rate: None,
    }
}

impl Net {
    pub fn poll(&mut self) {
        let now = self.pair.now;
        let seen = self.seen.clone();
        let mut record = move |f: &Frame<'_>| {
            let mut s = seen.borrow_mut();
            s.0.push(f.va);
            let e = s.1.entry(f.va).or_insert((0, true));
            e.0 += 1;
            e.1 &= f.intact;
        };
        match self.rate.as_mut() {
            Some(r) => {
                let mut both = Both(r, &mut record);
                self.server.poll(&mut self.pair.b, now, &mut both);
            }
            None => self.server.poll(&mut self.pair.b, now, &mut record),
        }
        self.worker.poll(&mut self.pair.a, now, &mut self.source);
    }

    /// Run until the worker finishes or `limit` of simulated time passes.
    pub fn run(&mut self, limit: Duration) {
        let end = self.pair.now + limit;
        for _ in 0..10_000_000 {
            self.poll();
            self.poll();
            let s = self.server.stats();
            let drained = s.frames_consumed == s.frames_delivered;
            if self.worker.finished() && drained || self.pair.now > end {
                return;
            }
            let wake = [
                self.worker.poll_timeout(),
                self.rate.and_then(|r| {
                    let c: &dyn rocelink_ims::Consumer = &r;
                    self.server.poll_timeout(c)
                }),
            ]
            .into_iter()
            .flatten()
            .min();
            if !self.pair.step_until(wake) {
                return;
            }
        }
        panic!("step bound reached");
    }

    pub fn consumed(&self) -> Vec<u64> {
        self.seen.borrow().0.clone()
    }
}

/// A rate consumer that also records.
pub struct Both<'a, F: FnMut(&Frame<'_>)>(&'a mut RateConsumer, &'a mut F);

impl<F: FnMut(&Frame<'_>)> rocelink_ims::Consumer for Both<'_, F> {
    fn ready(&mut self, now: Instant) -> bool {
        self.0.ready(now)
    }
    fn consume(&mut self, now: Instant, f: &Frame<'_>) {
        self.0.consume(now, f);
        (self.1)(f);
    }
    fn wake(&self) -> Option<Instant> {
        self.0.wake()
    }
}

/// The VAs frames 0..n go to.
pub fn vas(first: u64, frame: usize, n: u64) -> Vec<u64> {
    let stride = (frame as u64).div_ceil(64) * 64;
    (0..n).map(|i| first.wrapping_add(i * stride)).collect()
}

/// Every frame consumed exactly once, in order, intact; the worker done; the server's
/// table empty again.
pub fn assert_all_delivered(n: &Net, frame: usize, frames: u64) {
    assert_eq!(
        n.worker.state(),
        &WorkerState::Done,
        "{:?}",
        n.worker.stats()
    );
    let want = vas(cfg_server().va_offset, frame, frames);
    assert_eq!(n.consumed(), want, "each frame once, in order");
    let seen = n.seen.borrow();
    assert!(seen.1.values().all(|&(k, ok)| k == 1 && ok), "intact");
    let (ws, ss) = (n.worker.stats(), n.server.stats());
    assert_eq!(ws.frames, frames);
    assert_eq!(ss.frames_delivered, frames);
    assert_eq!(ss.frames_consumed, frames);
    assert_eq!(ss.image_crc_failures, 0);
    assert_eq!((n.server.workers(), n.server.channels()), (0, 0));
}

/// UC WRITE opcodes.
pub const WRITE_FIRST: u8 = 0x26;
pub const WRITE_MIDDLE: u8 = 0x27;
pub const WRITE_LAST: u8 = 0x28;

/// Rewrite the `nth` (0-based) data packet from the worker with `opcode` through `edit`
/// (bytes from the BTH on, ICRC recomputed afterwards), or drop it when `edit` is `None`.
pub fn tamper(
    n: &mut Net,
    opcode: u8,
    nth: usize,
    edit: Option<fn(&mut Vec<u8>)>,
) -> Rc<RefCell<usize>> {
    let seen = Rc::new(RefCell::new(0usize));
    let hits = Rc::new(RefCell::new(0usize));
    let (s, h) = (seen.clone(), hits.clone());
    let (src, dst) = (addr(WORKER), addr(SERVER));
    n.pair.set_filter(move |dir, bytes| {
        if dir != rocelink_transport::sim::Dir::AtoB || bytes.first() != Some(&opcode) {
            return true;
        }
        let i = *s.borrow();
        *s.borrow_mut() += 1;
        if i != nth {
            return true;
        }
        *h.borrow_mut() += 1;
        match edit {
            None => false,
            Some(f) => {
                f(bytes);
                rocelink_wire::icrc::fill_socket(src, dst, bytes).unwrap();
                true
            }
        }
    });
    hits
}
