//! Who may command the probe: the trigger port's trust rules, sans-IO.
//!
//! * Only hosts in the allow list ([`GateConfig::allow`], loopback by default) are heard at
//!   all; others are dropped and counted.
//! * A host proves it receives at its address before the probe sends it anything more than
//!   it sent: a command without the cookie the probe derives for its address and port (a
//!   keyed hash, secret to this probe run) gets a 64-byte challenge back, as QUIC validates
//!   an address. A spoofed sender never sees the cookie, so it cannot start a stream towards
//!   someone else: nothing is amplified.
//! * The host whose validated command started a session owns the probe: commands from
//!   anyone else are refused until it sends a stop, or the probe is idle and the owner
//!   silent for [`GateConfig::idle`].
//! * Challenges are rate-limited ([`GateConfig::challenges_per_sec`]).

pub use rocelink_io::prefix::Prefix;
use rocelink_wire::ultrasound::{Command, TriggerRepr};
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// The trigger port's rules.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GateConfig {
    /// Hosts heard at all.
    pub allow: Vec<Prefix>,
    /// The owner of a session lets go after this long silent with the probe idle.
    pub idle: Duration,
    /// Challenges sent per second at most (bursts of a tenth of that, at least 8).
    pub challenges_per_sec: u32,
}

impl GateConfig {
    /// The defaults, also allowing `host`.
    pub fn allowing(host: IpAddr) -> GateConfig {
        let mut g = GateConfig::default();
        g.allow.push(Prefix::host(host));
        g
    }
}

impl Default for GateConfig {
    /// Loopback only, 2 s idle, 1000 challenges per second.
    fn default() -> Self {
        GateConfig {
            allow: Prefix::loopback().to_vec(),
            idle: Duration::from_secs(2),
            challenges_per_sec: 1000,
        }
    }
}

/// What the gate counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct GateStats {
    /// Commands taken.
    pub taken: u64,
    /// Challenges sent (a command without the sender's cookie).
    pub challenges: u64,
    /// Challenges not sent (rate limit).
    pub challenges_dropped: u64,
    /// Commands from a host not in the allow list.
    pub not_allowed: u64,
    /// Validated commands from a host other than the session's owner.
    pub not_owner: u64,
}

/// What to do with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Act on it.
    Take,
    /// Send this challenge back to the sender, and do nothing else.
    Challenge(TriggerRepr),
    /// Drop it (counted).
    Refuse,
}

/// The probe's trigger gate.
#[derive(Debug, Clone)]
pub struct Gate {
    cfg: GateConfig,
    keys: std::collections::hash_map::RandomState,
    owner: Option<(SocketAddr, Instant)>,
    tokens: f64,
    refilled: Option<Instant>,
    stats: GateStats,
}

impl Gate {
    /// A gate with a fresh secret.
    pub fn new(cfg: GateConfig) -> Gate {
        Gate {
            tokens: Gate::burst(cfg.challenges_per_sec),
            cfg,
            keys: std::collections::hash_map::RandomState::new(),
            owner: None,
            refilled: None,
            stats: GateStats::default(),
        }
    }

    fn burst(rate: u32) -> f64 {
        (f64::from(rate) / 10.0).max(8.0)
    }

    /// Counters.
    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// The host that owns the probe now, if any.
    pub fn owner(&self) -> Option<SocketAddr> {
        self.owner.map(|(a, _)| a)
    }

    /// The cookie of `from` (never 0).
    pub fn cookie(&self, from: SocketAddr) -> u64 {
        self.keys.hash_one(from) | 1
    }

    /// Judge command `t` from `from` at `now`; `busy` says whether the probe is still
    /// sending or triggering for its owner; `qpn` and `port` are the probe's RoCE QPN and
    /// port, told in a challenge.
    pub fn check(
        &mut self,
        now: Instant,
        from: SocketAddr,
        t: &TriggerRepr,
        busy: bool,
        (qpn, port): (u32, u16),
    ) -> Verdict {
        if t.command == Command::Challenge {
            return Verdict::Refuse; // only a probe sends those
        }
        if !self.cfg.allow.iter().any(|p| p.contains(from.ip())) {
            self.stats.not_allowed += 1;
            return Verdict::Refuse;
        }
        let cookie = self.cookie(from);
        if t.cookie != cookie {
            if !self.take_token(now) {
                self.stats.challenges_dropped += 1;
                return Verdict::Refuse;
            }
            self.stats.challenges += 1;
            return Verdict::Challenge(TriggerRepr {
                command: Command::Challenge,
                number: t.number,
                host_ns: t.host_ns,
                qpn,
                qkey: 0,
                port,
                samples: 0,
                channels: 0,
                cookie,
            });
        }
        if let Some((owner, last)) = self.owner
            && owner != from
        {
            let released = !busy && now.saturating_duration_since(last) >= self.cfg.idle;
            if !released {
                self.stats.not_owner += 1;
                return Verdict::Refuse;
            }
        }
        self.stats.taken += 1;
        self.owner = (t.command != Command::Stop).then_some((from, now));
        Verdict::Take
    }

    fn take_token(&mut self, now: Instant) -> bool {
        if let Some(t) = self.refilled {
            let dt = now.saturating_duration_since(t).as_secs_f64();
            let rate = f64::from(self.cfg.challenges_per_sec);
            self.tokens = (self.tokens + dt * rate).min(Gate::burst(self.cfg.challenges_per_sec));
        }
        self.refilled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(command: Command, cookie: u64) -> TriggerRepr {
        TriggerRepr {
            command,
            number: 0,
            host_ns: 0,
            qpn: 5,
            qkey: 1,
            port: 4791,
            samples: 0,
            channels: 0,
            cookie,
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    #[test]
    fn prefixes() {
        let p: Prefix = "10.1.0.0/16".parse().unwrap_or(Prefix::ANY_V4);
        assert!(p.contains("10.1.200.3".parse().unwrap_or(IpAddr::from([0; 4]))));
        assert!(!p.contains("10.2.0.1".parse().unwrap_or(IpAddr::from([0; 4]))));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("nope".parse::<Prefix>().is_err());
        let any: Prefix = "any".parse().unwrap_or(Prefix::loopback()[0]);
        assert!(any.contains(IpAddr::from([8, 8, 8, 8])));
        assert_eq!(any.to_string(), "any");
    }

    #[test]
    fn a_command_is_taken_only_with_the_senders_cookie() {
        let mut g = Gate::new(GateConfig::default());
        let now = Instant::now();
        let host = addr("127.0.0.2:5000");
        let start = cmd(
            Command::Start {
                millihertz: 1000,
                count: 0,
            },
            0,
        );
        let Verdict::Challenge(c) = g.check(now, host, &start, false, (9, 4791)) else {
            panic!("no challenge");
        };
        assert_eq!(
            (c.command, c.qpn, c.cookie),
            (Command::Challenge, 9, g.cookie(host))
        );
        // the cookie of one address and port is not another's
        let other = addr("127.0.0.2:5001");
        assert_ne!(g.cookie(other), c.cookie);
        let echoed = TriggerRepr {
            cookie: c.cookie,
            ..start
        };
        assert!(matches!(
            g.check(now, other, &echoed, false, (9, 4791)),
            Verdict::Challenge(_)
        ));
        assert_eq!(g.check(now, host, &echoed, false, (9, 4791)), Verdict::Take);
        assert_eq!(g.owner(), Some(host));
    }

    #[test]
    fn only_the_owner_stops_or_changes_a_session_until_it_lets_go() {
        let mut g = Gate::new(GateConfig::default());
        let now = Instant::now();
        let (a, b) = (addr("127.0.0.2:5000"), addr("127.0.0.3:5000"));
        let start = |x: SocketAddr, g: &Gate| {
            cmd(
                Command::Start {
                    millihertz: 1000,
                    count: 0,
                },
                g.cookie(x),
            )
        };
        assert_eq!(g.check(now, a, &start(a, &g), false, (9, 1)), Verdict::Take);
        let stop_b = cmd(Command::Stop, g.cookie(b));
        assert_eq!(g.check(now, b, &stop_b, true, (9, 1)), Verdict::Refuse);
        assert_eq!(
            g.check(now, b, &start(b, &g), true, (9, 1)),
            Verdict::Refuse
        );
        assert_eq!(g.stats().not_owner, 2);
        // busy: the owner keeps it however long it is silent
        let later = now + Duration::from_secs(60);
        assert_eq!(
            g.check(later, b, &start(b, &g), true, (9, 1)),
            Verdict::Refuse
        );
        // idle and silent for 2 s: anyone may take it
        assert_eq!(
            g.check(later, b, &start(b, &g), false, (9, 1)),
            Verdict::Take
        );
        // the owner's stop lets go at once
        assert_eq!(
            g.check(later, b, &cmd(Command::Stop, g.cookie(b)), true, (9, 1)),
            Verdict::Take
        );
        assert_eq!(g.owner(), None);
        assert_eq!(
            g.check(later, a, &start(a, &g), true, (9, 1)),
            Verdict::Take
        );
    }

    #[test]
    fn hosts_outside_the_allow_list_get_nothing_and_challenges_are_limited() {
        let mut g = Gate::new(GateConfig {
            challenges_per_sec: 100,
            ..GateConfig::default()
        });
        let now = Instant::now();
        let far = addr("192.0.2.7:5000");
        let start = cmd(
            Command::Start {
                millihertz: 1000,
                count: 0,
            },
            0,
        );
        assert_eq!(g.check(now, far, &start, false, (9, 1)), Verdict::Refuse);
        assert_eq!(g.stats().not_allowed, 1);
        let mut sent = 0;
        for port in 0..1000u16 {
            let from = SocketAddr::new(IpAddr::from([127, 0, 0, 9]), 1000 + port);
            sent += usize::from(matches!(
                g.check(now, from, &start, false, (9, 1)),
                Verdict::Challenge(_)
            ));
        }
        assert_eq!(sent, 10, "a burst of a tenth of a second's worth");
        assert_eq!(g.stats().challenges_dropped, 990);
    }
}
