//! The loop every role runs in: a sans-IO role polled after every datagram and on its
//! timers, over one [`Driver`], until it finishes, a stop flag is set, or a deadline
//! passes, with a progress callback about every so often.
//!
//! A role says what it needs through [`Role`]; IMS's buffer unit and worker, the ultrasound
//! probe and host all run in [`drive`].

use crate::driver::Driver;
use crate::landing::Plan;
use rocelink_io::backend::Backend;
use rocelink_transport::Endpoint;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When a run ends and how often it reports.
#[derive(Debug, Clone, Copy)]
pub struct RunOpts<'a> {
    /// Set (e.g. by Ctrl-C) to end the run: [`Role::stop`] decides whether at once or after
    /// the work in flight.
    pub stop: &'a AtomicBool,
    /// End at this time at the latest.
    pub deadline: Option<Instant>,
    /// Call `progress` about this often.
    pub every: Duration,
}

/// Longest sleep between looks at `stop` and the progress clock.
pub const TICK: Duration = Duration::from_millis(50);

/// What [`drive`] needs of a role.
pub trait Role {
    /// Take what the endpoint has for the role and give it new work.
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<()>;
    /// When the role has something to do without a datagram, if ever (`now` or earlier:
    /// at once).
    fn wake(&self) -> Option<Instant>;
    /// The role is done: the run ends.
    fn finished(&self) -> bool;
    /// `stop` was set: true to end now (false to finish what is in flight first).
    fn stop(&mut self) -> bool;
    /// Wait for the role's own input until `until` instead of for a datagram, when the role
    /// expects none on the endpoint (a sender that listens elsewhere). Called only with
    /// nothing left to send. Return false (the default) to let the driver wait.
    fn idle(&mut self, _until: Instant) -> io::Result<bool> {
        Ok(false)
    }
    /// Where the next datagrams' payloads go, for the driver to receive them straight
    /// there (see [`crate::landing`]): fill `plan` and return true. The default, false,
    /// receives the copying way.
    fn predict(&mut self, _ep: &Endpoint, _plan: &mut Plan) -> bool {
        false
    }
    /// How long the driver goes on after the end, so the last answers (ACKs, a final
    /// status) go out: [`LINGER`] by default. A role that answers nothing on the endpoint
    /// returns zero: what is queued is still sent, but nothing more is received — what
    /// arrives after the end is not the run's, and taking it without the role (no receive
    /// posted again) would count it as dropped.
    fn linger(&self) -> Duration {
        LINGER
    }
}

/// How long [`drive`] runs the driver after the end by default (see [`Role::linger`]).
pub const LINGER: Duration = Duration::from_millis(20);

/// Poll `role` after every datagram and on its timers until it finishes, `stop` ends it
/// or the deadline passes; `progress` about every `opts.every`. After the end the driver
/// runs [`Role::linger`] more (20 ms by default), so the last answers go out.
pub fn drive<B: Backend, R: Role>(
    drv: &mut Driver<B>,
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
    let mut failed = None;
    loop {
        let now = Instant::now();
        let ended = stop.load(Ordering::Relaxed) && role.stop();
        role.poll(ep, now)?;
        if ended || role.finished() || deadline.is_some_and(|d| now >= d) {
            drv.run(ep, now + role.linger(), |_| false)?;
            drv.publish(ep);
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
        // send what the poll produced; then either the role waits on its own input or the
        // driver waits for datagrams
        let all_sent = drv.transmit(ep, now)?;
        if all_sent && ep.poll_timeout().is_none_or(|t| t >= wake) && role.idle(wake)? {
            continue;
        }
        // the role both predicts (before a receive) and is polled (after each datagram),
        // never at once
        let shared = std::cell::RefCell::new(&mut *role);
        drv.run_landing(
            ep,
            wake,
            &mut |ep, plan| shared.borrow_mut().predict(ep, plan),
            |ep| {
                let mut role = shared.borrow_mut();
                if let Err(e) = role.poll(ep, Instant::now()) {
                    failed = Some(e);
                    return true;
                }
                role.finished() || role.wake().is_some_and(|t| t < wake)
            },
        )?;
        if let Some(e) = failed.take() {
            return Err(e);
        }
    }
}
