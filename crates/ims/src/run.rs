//! Both roles over UDP: an endpoint driven by `rocelink-runtime`'s [`Driver`], the role
//! polled after every datagram and on its timers, until it finishes, `stop` is set, or
//! the deadline passes. `progress` is called about every `every`.

use crate::server::{Consumer, Server};
use crate::source::FrameSource;
use crate::worker::Worker;
use rocelink_runtime::Driver;
use rocelink_transport::Endpoint;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When a run ends and how often it reports.
#[derive(Debug, Clone, Copy)]
pub struct RunOpts<'a> {
    /// Set (e.g. by Ctrl-C) to end the run: a server stops, a worker finishes the frames
    /// in flight and closes its channels.
    pub stop: &'a AtomicBool,
    /// End at this time at the latest.
    pub deadline: Option<Instant>,
    /// Call `progress` about this often.
    pub every: Duration,
}

/// Longest sleep between looks at `stop` and the progress clock.
const TICK: Duration = Duration::from_millis(50);

/// What the loop needs of a role.
trait Role {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant);
    fn wake(&self) -> Option<Instant>;
    fn finished(&self) -> bool;
    /// `stop` was set: true to end now (a worker instead finishes what is in flight).
    fn stop(&mut self) -> bool;
}

struct Serving<'a> {
    server: &'a mut Server,
    consumer: &'a mut dyn Consumer,
}

impl Role for Serving<'_> {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        self.server.poll(ep, now, self.consumer);
    }
    fn wake(&self) -> Option<Instant> {
        self.server.poll_timeout(self.consumer)
    }
    fn finished(&self) -> bool {
        false
    }
    fn stop(&mut self) -> bool {
        true
    }
}

struct Sending<'a> {
    worker: &'a mut Worker,
    source: &'a mut dyn FrameSource,
}

impl Role for Sending<'_> {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        self.worker.poll(ep, now, self.source);
    }
    fn wake(&self) -> Option<Instant> {
        self.worker.poll_timeout()
    }
    fn finished(&self) -> bool {
        self.worker.finished()
    }
    fn stop(&mut self) -> bool {
        self.worker.stop();
        false
    }
}

/// Poll `role` after every datagram and on its timers until it finishes, `stop` ends it
/// or the deadline passes; `progress` about every `opts.every`.
fn drive<R: Role>(
    drv: &mut Driver,
    ep: &mut Endpoint,
    role: &mut R,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&R),
) -> io::Result<()> {
    let RunOpts {
        stop,
        deadline,
        every,
    } = opts;
    let mut shown = Instant::now();
    loop {
        let now = Instant::now();
        let ended = stop.load(Ordering::Relaxed) && role.stop();
        role.poll(ep, now);
        if ended || role.finished() || deadline.is_some_and(|d| now >= d) {
            // the last answers go out
            drv.run(ep, now + Duration::from_millis(20), |_| false)?;
            return Ok(());
        }
        if now >= shown + every {
            progress(role);
            shown = now;
        }
        let mut wake = now + TICK;
        if let Some(t) = role.wake() {
            wake = wake.min(t);
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        drv.run(ep, wake, |ep| {
            role.poll(ep, Instant::now());
            role.finished() || role.wake().is_some_and(|t| t < wake)
        })?;
    }
}

/// Serve until `stop` is set or `deadline` passes.
pub fn serve(
    drv: &mut Driver,
    ep: &mut Endpoint,
    server: &mut Server,
    consumer: &mut dyn Consumer,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Server),
) -> io::Result<()> {
    let mut role = Serving { server, consumer };
    drive(drv, ep, &mut role, opts, &mut |r| progress(r.server))
}

/// Stream from `source` until the worker finishes (every frame ACKed and both channels
/// down, or a failure), `stop` is set (then the frames in flight are finished and the
/// channels closed), or `deadline` passes.
pub fn send(
    drv: &mut Driver,
    ep: &mut Endpoint,
    worker: &mut Worker,
    source: &mut dyn FrameSource,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Worker),
) -> io::Result<()> {
    let mut role = Sending { worker, source };
    drive(drv, ep, &mut role, opts, &mut |r| progress(r.worker))
}
