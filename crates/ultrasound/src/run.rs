//! Probe and host over UDP, in `rocelink-runtime`'s loop ([`drive`]).
//!
//! * [`probe`] — the probe listens for trigger commands on a plain UDP socket beside its
//!   RoCE one and sends shots where they say. Idle, it sleeps on the trigger socket, so a
//!   trigger is taken the moment it arrives.
//! * [`host`] — the host receives shots and, as [`Triggering`] says, triggers the probe:
//!   not at all, once with a start command (periodic shots), or one shot at a time, each
//!   trigger sent when the shot before was handed on (the round-trip measurement).

use crate::{Gate, GateConfig, GateStats, Host, Probe, ShotReport, Verdict};
use rocelink_io::backend::Backend;
use rocelink_io::udp::wait_readable_any;
use rocelink_runtime::{Driver, Role, RunOpts, drive};
use rocelink_transport::Endpoint;
use rocelink_wire::ultrasound::{Command, TRIGGER_LEN, TriggerRepr};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Counters of the trigger channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TriggerStats {
    /// Trigger commands sent (host) or taken (probe).
    pub commands: u64,
    /// Datagrams on the trigger port that were not trigger commands (probe).
    pub malformed: u64,
    /// One-at-a-time triggers whose shot never came within the timeout (host).
    pub unanswered: u64,
    /// Challenges received and answered (host).
    pub challenges: u64,
    /// What the probe's gate decided (probe).
    pub gate: GateStats,
}

struct Probing<'a> {
    probe: &'a mut Probe,
    triggers: &'a UdpSocket,
    gate: Gate,
    /// The probe's RoCE port, told in challenges.
    port: u16,
    stats: TriggerStats,
}

impl Probing<'_> {
    /// Take every trigger command waiting on the socket that passes the gate; answer the
    /// others that need a challenge.
    fn take_triggers(&mut self, now: Instant) -> io::Result<()> {
        let mut buf = [0u8; 2 * TRIGGER_LEN];
        loop {
            match self.triggers.recv_from(&mut buf) {
                Ok((n, from)) => match TriggerRepr::parse(&buf[..n]) {
                    Ok(t) => {
                        let me = (self.probe.qpn(), self.port);
                        match self.gate.check(now, from, &t, self.probe.busy(), me) {
                            Verdict::Take => {
                                self.stats.commands += 1;
                                self.probe.handle_trigger(now, &t, from.ip());
                            }
                            Verdict::Challenge(c) => {
                                // no bigger than what came: nothing is amplified
                                let _ = self.triggers.send_to(&c.emit(), from);
                            }
                            Verdict::Refuse => {}
                        }
                        self.stats.gate = self.gate.stats();
                    }
                    Err(_) => self.stats.malformed += 1,
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // an ICMP port unreachable from an earlier send, say: not ours to act on
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Role for Probing<'_> {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<()> {
        self.take_triggers(now)?;
        // Error::other: the runner's roles speak io::Error; the typed error rides inside
        self.probe.poll(ep, now).map_err(io::Error::other)
    }
    fn wake(&self) -> Option<Instant> {
        self.probe.poll_timeout()
    }
    fn finished(&self) -> bool {
        false
    }
    fn stop(&mut self) -> bool {
        true
    }
    fn idle(&mut self, until: Instant) -> io::Result<bool> {
        // nothing comes to a probe over RoCE: wait on the trigger socket instead
        let wait = until.saturating_duration_since(Instant::now());
        wait_readable_any(&[self.triggers.as_raw_fd()], Some(wait))?;
        Ok(true)
    }
}

/// Run `probe` over `drv`: trigger commands from `triggers` (made non-blocking here) that
/// pass `gate`, shots sent until `opts` ends the run. Returns the trigger channel's
/// counters.
pub fn probe<B: Backend>(
    drv: &mut Driver<B>,
    ep: &mut Endpoint,
    probe: &mut Probe,
    triggers: &UdpSocket,
    gate: GateConfig,
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Probe),
) -> io::Result<TriggerStats> {
    triggers.set_nonblocking(true)?;
    let port = ep.config().local.port();
    let mut role = Probing {
        probe,
        triggers,
        gate: Gate::new(gate),
        port,
        stats: TriggerStats::default(),
    };
    drive(drv, ep, &mut role, opts, &mut |r| progress(r.probe))?;
    Ok(role.stats)
}

/// How the host triggers the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Triggering {
    /// Not at all: the probe is triggered by someone else.
    None,
    /// One start command: `millihertz` (0: the probe's own frequency), `count` shots (0:
    /// until the run ends, then a stop command).
    Periodic {
        /// The probe's trigger address.
        probe: SocketAddr,
        /// Trigger frequency in mHz.
        millihertz: u32,
        /// Shots (0: until the end of the run).
        count: u64,
    },
    /// One shot at a time: shot n+1 is triggered when shot n was handed on, or `timeout`
    /// after its trigger (then counted as unanswered; three in a row end the run).
    OneByOne {
        /// The probe's trigger address.
        probe: SocketAddr,
        /// Shots.
        count: u64,
        /// Longest wait for a shot.
        timeout: Duration,
    },
}

/// What a trigger command sent by the host says besides its command and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerTarget {
    /// The host's RoCE UDP port.
    pub port: u16,
    /// The host's Q_Key.
    pub qkey: u32,
}

/// How long a probe may take to answer the first command (with its challenge).
pub const ANSWER: Duration = Duration::from_secs(1);

/// With the probe's cookie in hand, how often the host looks for a new challenge (a
/// restarted probe's): the role is polled after every received batch, and a look is a
/// system call.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// One-at-a-time triggers unanswered in a row after which the run ends.
const GIVE_UP: u32 = 3;

struct Hosting<'a> {
    host: &'a mut Host,
    sock: UdpSocket,
    plan: Triggering,
    target: TriggerTarget,
    sink: &'a mut dyn FnMut(&ShotReport, Option<&[u8]>),
    /// Shots to hand on before the run ends.
    want: Option<u64>,
    started: bool,
    /// Periodic with a count: when the last shot is due (from the start command).
    last_due: Option<Instant>,
    /// One by one: triggers unanswered in a row.
    silent: u32,
    /// One by one: the next trigger number and the shot waited for.
    next: u64,
    waiting: Option<(u64, Instant)>,
    /// The probe's cookie for us, once its challenge came.
    cookie: Option<u64>,
    /// The last command sent, to send again with the cookie.
    last: Option<(Command, u64, SocketAddr)>,
    /// When the first command went out (the probe must answer within [`ANSWER`]).
    asked: Option<Instant>,
    /// The probe's port is closed (an ICMP port unreachable came back).
    refused: bool,
    /// When the trigger socket was last looked at.
    looked: Option<Instant>,
    t0: Instant,
    stats: TriggerStats,
}

impl Hosting<'_> {
    fn send(&mut self, command: Command, number: u64, to: SocketAddr) -> io::Result<()> {
        let g = self.host.geometry();
        let t = TriggerRepr {
            command,
            number,
            host_ns: self.t0.elapsed().as_nanos() as u64,
            qpn: self.host.qpn(),
            qkey: self.target.qkey,
            port: self.target.port,
            samples: g.samples,
            channels: g.channels,
            cookie: self.cookie.unwrap_or(0),
        };
        self.sock.send_to(&t.emit(), to)?;
        self.last = Some((command, number, to));
        self.asked.get_or_insert_with(Instant::now);
        self.stats.commands += 1;
        Ok(())
    }

    /// Take the probe's challenges: keep its cookie and QPN (shots are taken only from
    /// it), and send the command it challenged again with the cookie.
    fn take_challenges(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 2 * TRIGGER_LEN];
        loop {
            let (n, from) = match self.sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // an ICMP unreachable from an earlier send: nothing listens there
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.refused = self.cookie.is_none();
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Ok(t) = TriggerRepr::parse(&buf[..n]) else {
                continue;
            };
            let Some((command, number, to)) = self.last else {
                continue;
            };
            if t.command != Command::Challenge || from != to || self.cookie == Some(t.cookie) {
                continue;
            }
            self.stats.challenges += 1;
            self.cookie = Some(t.cookie);
            self.host.accept_from(to.ip(), Some(t.qpn));
            if let (Command::Shot, Some((shot, _))) = (command, self.waiting) {
                // the round trip starts now, not at the challenged send
                let at = Instant::now();
                self.host.note_trigger(shot, at);
                self.waiting = Some((shot, at));
            }
            self.send(command, number, to)?;
        }
    }

    /// A probe answers a first command at once (its challenge): one that says nothing for
    /// [`ANSWER`] — or whose port is closed — is not there.
    fn check_answered(&self, now: Instant) -> io::Result<()> {
        let (Some(at), None, Some((_, _, to))) = (self.asked, self.cookie, self.last) else {
            return Ok(());
        };
        if self.refused || now.saturating_duration_since(at) >= ANSWER {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "no probe answers at {to}{}: is `rocelink probe` running there, and does it allow this host?",
                    if self.refused { " (port closed)" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    /// The probe's trigger address, if the host triggers one.
    fn probe_addr(&self) -> Option<SocketAddr> {
        match self.plan {
            Triggering::None => None,
            Triggering::Periodic { probe, .. } | Triggering::OneByOne { probe, .. } => Some(probe),
        }
    }

    fn handed(&self) -> u64 {
        self.host.stats().shots
    }
}

impl Role for Hosting<'_> {
    fn predict(&mut self, ep: &Endpoint, plan: &mut rocelink_runtime::Plan) -> bool {
        // UD SEND ONLY WITH IMMEDIATE: BTH, DETH, ImmDt
        const HEADERS: usize = rocelink_wire::ib::BTH_LEN + 8 + 4;
        if !self.host.config().land {
            return false;
        }
        plan.lkey = self.host.lkey();
        for (at, len) in self.host.expected(ep) {
            if !plan.expect(HEADERS, at, len) {
                break;
            }
        }
        true
    }

    fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<()> {
        // until the first challenge, every poll looks; then every LOOK_EVERY
        if self.cookie.is_none() || self.looked.is_none_or(|t| now >= t + LOOK_EVERY) {
            self.looked = Some(now);
            self.take_challenges()?;
        }
        self.check_answered(now)?;
        // Error::other: the runner's roles speak io::Error; the typed error rides inside
        self.host
            .poll(ep, now, self.sink)
            .map_err(io::Error::other)?;
        match self.plan {
            Triggering::None => {}
            Triggering::Periodic {
                probe,
                millihertz,
                count,
            } => {
                if !self.started {
                    self.started = true;
                    let first = self.host.next_shot();
                    self.send(Command::Start { millihertz, count }, first, probe)?;
                    if count > 0 && millihertz > 0 {
                        let period = Duration::from_secs_f64(1000.0 / f64::from(millihertz));
                        // a shot is given up `timeout` after its last message: so is the run
                        let slack = self.host.config().timeout;
                        self.last_due = Some(now + period.saturating_mul(count as u32) + slack);
                    }
                }
            }
            Triggering::OneByOne {
                probe,
                count,
                timeout,
            } => {
                if let Some((shot, at)) = self.waiting {
                    if self.host.next_shot() > shot {
                        self.waiting = None;
                        self.silent = 0;
                    } else if now >= at + timeout {
                        self.stats.unanswered += 1;
                        self.silent += 1;
                        self.waiting = None;
                    }
                }
                if self.waiting.is_none() && self.next < count && self.silent < GIVE_UP {
                    let shot = self.host.next_shot().max(self.next);
                    let at = Instant::now();
                    self.host.note_trigger(shot, at);
                    self.send(Command::Shot, shot, probe)?;
                    self.next = shot + 1;
                    self.waiting = Some((shot, at));
                }
            }
        }
        Ok(())
    }
    fn wake(&self) -> Option<Instant> {
        let mut t = self.host.poll_timeout();
        if let (Triggering::OneByOne { timeout, .. }, Some((_, at))) = (self.plan, self.waiting) {
            t = Some(t.map_or(at + timeout, |x| x.min(at + timeout)));
        }
        if self.last.is_some() && self.cookie.is_none() {
            // a challenge comes on the trigger socket, which the driver does not watch
            let soon = Instant::now() + Duration::from_millis(1);
            t = Some(t.map_or(soon, |x| x.min(soon)));
        }
        t
    }
    fn finished(&self) -> bool {
        let ended = match self.plan {
            // every shot answered, or nobody answers
            Triggering::OneByOne { count, .. } => {
                self.waiting.is_none() && (self.next >= count || self.silent >= GIVE_UP)
            }
            // the last shot was due a while ago and nothing more arrives (the shots the
            // probe missed never will)
            Triggering::Periodic { .. } => self.last_due.is_some_and(|due| {
                let now = Instant::now();
                now >= due && self.host.poll_timeout().is_none_or(|t| now >= t)
            }),
            Triggering::None => false,
        };
        ended || self.want.is_some_and(|w| self.handed() >= w)
    }
    fn stop(&mut self) -> bool {
        true
    }
    /// The host answers nothing over RoCE: the shots after the last one wanted (the probe
    /// sends until the stop command reaches it) stay unread instead of being counted as
    /// dropped for want of a posted receive.
    fn linger(&self) -> Duration {
        Duration::ZERO
    }
}

/// Run `host` over `drv`, triggering the probe as `plan` says (from an unbound UDP socket
/// of the host's address family), every shot handed to `sink`, until `shots` were handed on,
/// the one-at-a-time triggers are all answered, or `opts` ends the run. A periodic start
/// is followed by a stop command at the end.
#[allow(clippy::too_many_arguments)]
pub fn host<B: Backend>(
    drv: &mut Driver<B>,
    ep: &mut Endpoint,
    host: &mut Host,
    plan: Triggering,
    target: TriggerTarget,
    shots: Option<u64>,
    sink: &mut dyn FnMut(&ShotReport, Option<&[u8]>),
    opts: RunOpts<'_>,
    progress: &mut dyn FnMut(&Host),
) -> io::Result<TriggerStats> {
    let local = drv.socket().local_addr();
    let sock = UdpSocket::bind(SocketAddr::new(local.ip(), 0))?;
    sock.set_nonblocking(true)?;
    let mut role = Hosting {
        host,
        sock,
        plan,
        target,
        sink,
        want: shots,
        started: false,
        last_due: None,
        silent: 0,
        next: 0,
        waiting: None,
        cookie: None,
        last: None,
        asked: None,
        refused: false,
        looked: None,
        t0: Instant::now(),
        stats: TriggerStats::default(),
    };
    if let Some(p) = role.probe_addr() {
        // shots only from the probe triggered (its QP once its challenge names it)
        role.host.accept_from(p.ip(), None);
    }
    let run = drive(drv, ep, &mut role, opts, &mut |r| progress(r.host));
    if let (Triggering::Periodic { probe, .. }, true) = (plan, role.started) {
        let next = role.host.next_shot();
        role.send(Command::Stop, next, probe)?;
    }
    run?;
    Ok(role.stats)
}
