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

/// Serve until `stop` is set or `deadline` passes.
pub fn serve(
    drv: &mut Driver,
    ep: &mut Endpoint,
    server: &mut Server,
    consumer: &mut dyn Consumer,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Server),
) -> io::Result<()> {
    let RunOpts {
        stop,
        deadline,
        every,
    } = opts;
    let mut shown = Instant::now();
    loop {
        let now = Instant::now();
        server.poll(ep, now, consumer);
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
            // the last answers go out
            drv.run(ep, now + Duration::from_millis(20), |_| false)?;
            return Ok(());
        }
        if now >= shown + every {
            progress(server);
            shown = now;
        }
        let mut wake = now + TICK;
        if let Some(t) = server.poll_timeout(consumer) {
            wake = wake.min(t);
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        drv.run(ep, wake, |ep| {
            let now = Instant::now();
            server.poll(ep, now, consumer);
            server.poll_timeout(consumer).is_some_and(|t| t < wake)
        })?;
    }
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
    let RunOpts {
        stop,
        deadline,
        every,
    } = opts;
    let mut shown = Instant::now();
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            worker.stop();
        }
        worker.poll(ep, now, source);
        if worker.finished() || deadline.is_some_and(|d| now >= d) {
            drv.run(ep, now + Duration::from_millis(20), |_| false)?;
            return Ok(());
        }
        if now >= shown + every {
            progress(worker);
            shown = now;
        }
        let mut wake = now + TICK;
        if let Some(t) = worker.poll_timeout() {
            wake = wake.min(t);
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        drv.run(ep, wake, |ep| {
            worker.poll(ep, Instant::now(), source);
            worker.finished() || worker.poll_timeout().is_some_and(|t| t < wake)
        })?;
    }
}
