//! The emulated probe as a session: one thread per link, each a [`Probe`] on its own RoCE
//! socket with its own trigger socket, behind the trigger gate.

use super::{EVERY, LinkAddrs, Session, Stopper, bind_link, join_all, link_error};
use crate::run::{self, TriggerStats};
use crate::{Error, GateConfig, GateStats, Geometry, Probe, ProbeConfig, ProbeStats};
use rocelink_runtime::RunOpts;
use rocelink_runtime::counters::Board;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a probe session is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ProbeSessionConfig {
    /// Where its links are.
    pub links: LinkAddrs,
    /// The UDP port each link takes trigger commands on (4792).
    pub trigger_port: u16,
    /// The shot of one link (the probe's channels split over the links).
    pub geometry: Geometry,
    /// Seed of the echoes of link 0 (link i uses seed + i).
    pub seed: u64,
    /// Pace each link to this many Gbit/s of payload (`None`: as fast as it goes).
    pub rate_gbps: Option<f64>,
    /// The probe's own trigger frequency, for a start command that names none.
    pub trigger_hz: f64,
    /// Who may trigger it.
    pub gate: GateConfig,
    /// End after this long (`None`: when stopped).
    pub duration: Option<Duration>,
}

impl ProbeSessionConfig {
    /// One link at `127.0.0.1:4791`, triggers on 4792, 1 kHz, loopback hosts only.
    pub fn new(geometry: Geometry) -> ProbeSessionConfig {
        ProbeSessionConfig {
            links: LinkAddrs {
                addrs: vec![[127, 0, 0, 1].into()],
                port: 4791,
                chosen: false,
            },
            trigger_port: 4792,
            geometry,
            seed: 1,
            rate_gbps: None,
            trigger_hz: 1000.0,
            gate: GateConfig::default(),
            duration: None,
        }
    }
}

/// Where one link of a running probe is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeLink {
    /// Its RoCE address.
    pub local: SocketAddr,
    /// Its UD QP.
    pub qpn: u32,
    /// Where it takes trigger commands.
    pub triggers: SocketAddr,
}

/// What a probe session did, summed over its links.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ProbeSummary {
    /// Links.
    pub links: usize,
    /// Shots, triggers and bytes.
    pub probe: ProbeStats,
    /// Trigger commands taken, malformed, and what the gate refused.
    pub triggers: TriggerStats,
    /// How long it ran.
    pub seconds: f64,
    /// Shot bytes sent over that time, Gbit/s.
    pub gbps: f64,
}

/// A running probe.
#[derive(Debug)]
pub struct ProbeSession {
    links: Vec<ProbeLink>,
    live: Arc<Mutex<Vec<ProbeStats>>>,
    stop: Stopper,
    threads: Vec<JoinHandle<Result<(ProbeStats, TriggerStats), Error>>>,
    started: Instant,
}

impl ProbeSession {
    /// Bind every link and start sending shots as triggers come. Counters go to `board`
    /// (link `linkN`) when given. Every setting is checked before anything is bound.
    pub fn start(cfg: ProbeSessionConfig, board: Option<Board>) -> Result<ProbeSession, Error> {
        cfg.geometry.check()?;
        let stop = Stopper::new();
        let started = Instant::now();
        let deadline = cfg.duration.map(|d| started + d);
        let n = cfg.links.addrs.len();
        let live = Arc::new(Mutex::new(vec![ProbeStats::default(); n]));
        let mut links = Vec::new();
        let mut parts = Vec::new();
        for (i, ip) in cfg.links.addrs.iter().enumerate() {
            let (mut drv, mut ep, local) = bind_link(i, *ip, cfg.links.port, cfg.links.chosen)?;
            if let Some(b) = &board {
                drv.publish_to(b.clone(), &format!("link{i}"));
            }
            let taddr = SocketAddr::new(local.ip(), cfg.trigger_port);
            let trig = UdpSocket::bind(taddr).map_err(|e| Error::Bind {
                link: i,
                source: std::io::Error::new(
                    e.kind(),
                    format!("cannot bind the trigger socket {taddr}: {e}"),
                ),
            })?;
            let pcfg = ProbeConfig {
                seed: cfg.seed + i as u64,
                rate_gbps: cfg.rate_gbps,
                trigger_mhz: Some((cfg.trigger_hz * 1000.0).round().max(1.0) as u32),
                ..ProbeConfig::new(cfg.geometry)
            };
            let probe = Probe::new(&mut ep, pcfg)?;
            links.push(ProbeLink {
                local,
                qpn: probe.qpn(),
                triggers: taddr,
            });
            parts.push((drv, ep, probe, trig));
        }
        let threads = parts
            .into_iter()
            .enumerate()
            .map(|(i, (mut drv, mut ep, mut probe, trig))| {
                let (stop, live, board, gate) =
                    (stop.clone(), live.clone(), board.clone(), cfg.gate.clone());
                let bytes = cfg.geometry.message_bytes;
                std::thread::spawn(move || {
                    let opts = RunOpts {
                        stop: stop.flag(),
                        deadline,
                        every: EVERY,
                    };
                    let publish = |p: &Probe| {
                        live.lock().unwrap_or_else(PoisonError::into_inner)[i] = *p.stats();
                    };
                    let t =
                        run::probe(&mut drv, &mut ep, &mut probe, &trig, gate, opts, &mut |p| {
                            publish(p)
                        })
                        .map_err(|e| link_error(i, bytes, e))?;
                    publish(&probe);
                    if let Some(b) = &board {
                        b.set_link(drv.link(&format!("link{i}"), &ep));
                    }
                    Ok((*probe.stats(), t))
                })
            })
            .collect();
        Ok(ProbeSession {
            links,
            live,
            stop,
            threads,
            started,
        })
    }

    /// Where each link is.
    pub fn links(&self) -> &[ProbeLink] {
        &self.links
    }
}

/// Its progress is the counters so far, summed over the links (updated every 100 ms); it
/// reports no events. It ends by its duration, a link's failure, or a stop.
impl Session for ProbeSession {
    type Progress = ProbeStats;
    type Event = rocelink_runtime::NoEvent;
    type Summary = ProbeSummary;
    type Error = Error;

    fn progress(&self) -> ProbeStats {
        sum(&self.live.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn next_event(&self, timeout: Duration) -> Option<Self::Event> {
        rocelink_runtime::session::no_event(timeout, || self.is_finished())
    }

    fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    fn wait(self) -> Result<ProbeSummary, Error> {
        let per = join_all(self.threads)?;
        let probe = sum(&per.iter().map(|(p, _)| *p).collect::<Vec<_>>());
        let mut triggers = TriggerStats::default();
        for (_, t) in &per {
            triggers.commands += t.commands;
            triggers.malformed += t.malformed;
            triggers.gate = add_gate(triggers.gate, t.gate);
        }
        let seconds = self.started.elapsed().as_secs_f64();
        Ok(ProbeSummary {
            links: per.len(),
            gbps: rocelink_runtime::session::gbps(probe.bytes, seconds),
            probe,
            triggers,
            seconds,
        })
    }
}

fn sum(v: &[ProbeStats]) -> ProbeStats {
    v.iter().fold(ProbeStats::default(), |a, p| ProbeStats {
        triggers: a.triggers + p.triggers,
        shots: a.shots + p.shots,
        missed: a.missed + p.missed,
        messages: a.messages + p.messages,
        bytes: a.bytes + p.bytes,
        refused: a.refused + p.refused,
    })
}

fn add_gate(a: GateStats, b: GateStats) -> GateStats {
    GateStats {
        taken: a.taken + b.taken,
        challenges: a.challenges + b.challenges,
        challenges_dropped: a.challenges_dropped + b.challenges_dropped,
        not_allowed: a.not_allowed + b.not_allowed,
        not_owner: a.not_owner + b.not_owner,
    }
}
