//! Both roles over UDP, in `rocelink-runtime`'s loop ([`drive`]): an endpoint driven by a
//! [`Driver`], the role polled after every datagram and on its timers, until it finishes,
//! `stop` is set, or the deadline passes. `progress` is called about every `every`.

use crate::source::FrameSource;
use crate::unit::{Consumer, Unit};
use crate::worker::Worker;
pub use rocelink_runtime::RunOpts;
use rocelink_runtime::{Driver, Plan, Role, drive};
use rocelink_transport::Endpoint;
use std::io;
use std::time::{Duration, Instant};

struct Serving<'a> {
    server: &'a mut Unit,
    consumer: &'a mut dyn Consumer,
}

impl Role for Serving<'_> {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<()> {
        self.server.poll(ep, now, self.consumer);
        Ok(())
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
    fn predict(&mut self, ep: &Endpoint, plan: &mut Plan) -> bool {
        // the rest of a WRITE under way lands in the channel's ring (not over a frame
        // delivered and not consumed); the packet that starts the next one comes alone (it
        // says where that one goes)
        if !self
            .server
            .landing_qpns(ep)
            .any(|q| plan.expect_write(ep, q))
        {
            plan.next_alone();
        }
        true
    }
}

struct Sending<'a> {
    worker: &'a mut Worker,
    source: &'a mut dyn FrameSource,
}

impl Role for Sending<'_> {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<()> {
        self.worker.poll(ep, now, self.source);
        Ok(())
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

/// Longest a stopping buffer unit waits for its consumer to take the frames delivered.
pub const DRAIN: Duration = Duration::from_secs(30);

/// Serve until `stop` is set or `deadline` passes; then hand the consumer the frames
/// delivered and not yet taken, ACKing each (waiting for it up to [`DRAIN`], unless it is
/// [done](Consumer::done)), and discard the rest, never ACKed. Returns how many the
/// consumer could not take in that time (0: it took them all, or was done).
pub fn serve(
    drv: &mut Driver,
    ep: &mut Endpoint,
    server: &mut Unit,
    consumer: &mut dyn Consumer,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Unit),
) -> io::Result<usize> {
    let mut role = Serving {
        server,
        consumer: &mut *consumer,
    };
    drive(drv, ep, &mut role, opts, &mut |r| progress(r.server))?;
    let end = Instant::now() + DRAIN;
    loop {
        let now = Instant::now();
        let left = server.drain(ep, now, consumer);
        // the ACKs of the frames just taken
        drv.transmit(ep, now)?;
        if left == 0 || consumer.done() || now >= end {
            server.discard(ep);
            return Ok(if consumer.done() { 0 } else { left });
        }
        let wake = consumer.wake().unwrap_or(now + Duration::from_millis(1));
        std::thread::sleep(
            wake.saturating_duration_since(now)
                .min(Duration::from_millis(10)),
        );
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
    let mut role = Sending { worker, source };
    drive(drv, ep, &mut role, opts, &mut |r| progress(r.worker))
}
