//! The emulated probe: on a trigger it takes a shot — synthetic echoes of every channel
//! ([`Echoes`]) — and sends it to the host as UD SEND ONLY WITH IMMEDIATE messages, the
//! immediate numbering shot and message ([`imm`]), paced to a link rate if one is set.
//!
//! A trigger that comes while a shot is still being sent is missed (counted; periodic shots
//! are numbered as taken, so the stream has no hole), as on the
//! paper's probe when the trigger frequency outruns the link.

use crate::shot::{Echoes, Geometry, ShotWork};
use crate::{Error, ud_ready};
use rocelink_transport::{
    Access, CqId, Endpoint, QpError, QpInit, QpType, SendOp, SendWr, Sge, UdDest, WcStatus,
};
use rocelink_wire::ultrasound::{Command, TriggerRepr, imm};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Probe settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeConfig {
    /// The shots' shape unless a trigger says otherwise.
    pub geometry: Geometry,
    /// Seed of the echoes.
    pub seed: u64,
    /// Q_Key of the probe's own UD QP.
    pub qkey: u32,
    /// Link rate to pace messages to, Gbit/s of payload (`None`: as fast as they go).
    pub rate_gbps: Option<f64>,
    /// The probe's own trigger frequency in mHz, used by a start command that names none
    /// (`None`: such a command is refused).
    pub trigger_mhz: Option<u32>,
}

impl ProbeConfig {
    /// `geometry`, seed 1, unpaced.
    pub fn new(geometry: Geometry) -> ProbeConfig {
        ProbeConfig {
            geometry,
            seed: 1,
            qkey: 0x5553_0002,
            rate_gbps: None,
            trigger_mhz: None,
        }
    }
}

/// Counters of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ProbeStats {
    /// Triggers taken (commands and periodic ones).
    pub triggers: u64,
    /// Shots sent whole.
    pub shots: u64,
    /// Triggers missed because a shot was still being sent.
    pub missed: u64,
    /// Messages sent.
    pub messages: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Trigger commands refused (bad geometry, or a start at the probe's own frequency when
    /// it has none).
    pub refused: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sending {
    shot: u64,
    geometry: Geometry,
    dest: UdDest,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
struct Periodic {
    period: Duration,
    next: Instant,
    number: u64,
    left: Option<u64>,
    geometry: Geometry,
    dest: UdDest,
}

/// The probe over an endpoint.
#[derive(Debug)]
pub struct Probe {
    cfg: ProbeConfig,
    qpn: u32,
    cq: CqId,
    lkey: u32,
    echoes: Echoes,
    /// What the messages of the shot being sent share (its echo delays).
    work: ShotWork,
    /// Message slots in the send region, reused in turn once their send completed.
    slots: usize,
    next_slot: usize,
    unsignaled: usize,
    outstanding: usize,
    sending: Option<Sending>,
    periodic: Option<Periodic>,
    next_send: Option<Instant>,
    /// When it was last polled.
    polled: Option<Instant>,
    stats: ProbeStats,
}

/// Message slots in the send region.
const SLOTS: usize = 512;
/// Every this many messages one is signaled (its completion frees the slots before it).
const SIGNAL_EVERY: usize = 64;
/// Paced messages may catch up this many gaps after a late poll (a software clock wakes
/// tens of microseconds late; the average rate holds).
const BURST: u32 = 32;

impl Probe {
    /// A UD QP with Q_Key `cfg.qkey` and its send buffers.
    pub fn new(ep: &mut Endpoint, cfg: ProbeConfig) -> Result<Probe, Error> {
        cfg.geometry.check()?;
        if let Some(r) = cfg.rate_gbps.filter(|r| !(*r > 0.0 && r.is_finite())) {
            return Err(Error::Rate(r));
        }
        let keys = ep.register_mr(vec![0u8; SLOTS * 4096], 0, Access::NONE);
        let cq = ep.create_cq();
        let init = QpInit {
            max_send_wr: SLOTS,
            recv_cq: cq,
            send_cq: cq,
            ..QpInit::new(QpType::Ud)
        };
        let qpn = ep.create_qp(init)?;
        ud_ready(ep, qpn, cfg.qkey)?;
        Ok(Probe {
            echoes: Echoes::new(cfg.seed),
            work: ShotWork::default(),
            cfg,
            qpn,
            cq,
            lkey: keys.lkey,
            slots: SLOTS,
            next_slot: 0,
            unsignaled: 0,
            outstanding: 0,
            sending: None,
            periodic: None,
            next_send: None,
            polled: None,
            stats: ProbeStats::default(),
        })
    }

    /// The probe's UD QP.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Counters.
    pub fn stats(&self) -> &ProbeStats {
        &self.stats
    }

    /// True while a shot is being sent or periodic triggers run.
    pub fn busy(&self) -> bool {
        self.sending.is_some() || self.periodic.is_some()
    }

    /// Act on a trigger command from `from` (its IP; shots go to the QPN and port it names).
    pub fn handle_trigger(&mut self, now: Instant, t: &TriggerRepr, from: IpAddr) {
        let geometry = Geometry {
            samples: if t.samples == 0 {
                self.cfg.geometry.samples
            } else {
                t.samples
            },
            channels: if t.channels == 0 {
                self.cfg.geometry.channels
            } else {
                t.channels
            },
            ..self.cfg.geometry
        };
        if geometry.check().is_err() {
            self.stats.refused += 1;
            return;
        }
        let port = if t.port == 0 { 4791 } else { t.port };
        let dest = UdDest {
            addr: SocketAddr::new(from, port),
            qpn: t.qpn,
            qkey: t.qkey,
        };
        match t.command {
            Command::Shot => {
                self.fire(t.number, geometry, dest);
            }
            Command::Start { millihertz, count } => {
                let Some(millihertz) = Some(millihertz)
                    .filter(|&m| m > 0)
                    .or(self.cfg.trigger_mhz.filter(|&m| m > 0))
                else {
                    self.stats.refused += 1;
                    return;
                };
                self.periodic = Some(Periodic {
                    period: Duration::from_secs_f64(1000.0 / f64::from(millihertz)),
                    next: now,
                    number: t.number,
                    left: (count > 0).then_some(count),
                    geometry,
                    dest,
                });
            }
            Command::Stop => self.periodic = None,
            // a probe's own message, never a command to it
            Command::Challenge => self.stats.refused += 1,
        }
    }

    /// A trigger: take shot `shot` unless one is still being sent. True when taken.
    fn fire(&mut self, shot: u64, geometry: Geometry, dest: UdDest) -> bool {
        self.stats.triggers += 1;
        if self.sending.is_some() {
            self.stats.missed += 1;
            return false;
        }
        self.sending = Some(Sending {
            shot,
            geometry,
            dest,
            next: 0,
        });
        true
    }

    /// Run the periodic triggers that are due and send what pacing and the send slots allow.
    pub fn poll(&mut self, ep: &mut Endpoint, now: Instant) -> Result<(), Error> {
        self.polled = Some(now);
        while let Some(wc) = ep.poll_cq(self.cq) {
            if wc.status == WcStatus::Success {
                self.outstanding -= (wc.wr_id as usize).min(self.outstanding);
            } else {
                self.outstanding = 0;
            }
        }
        while let Some(p) = self.periodic.filter(|p| p.next <= now) {
            // periodic shots are numbered as taken: a missed trigger leaves no hole in the
            // stream (the probe counts it), so the host's receives stay aligned
            let taken = self.fire(p.number, p.geometry, p.dest);
            let left = p.left.map(|n| n - 1);
            self.periodic = (left != Some(0)).then_some(Periodic {
                next: p.next + p.period,
                number: p.number + u64::from(taken),
                left,
                ..p
            });
        }
        self.send(ep, now)
    }

    fn send(&mut self, ep: &mut Endpoint, now: Instant) -> Result<(), Error> {
        while let Some(s) = self.sending {
            if self.next_send.is_some_and(|t| t > now) || self.outstanding + 1 >= self.slots {
                return Ok(());
            }
            let g = s.geometry;
            let range = g.message_range(s.next);
            let len = range.len();
            let at = self.next_slot * 4096;
            let buf = ep
                .mr_mut(self.lkey)
                .and_then(|m| m.slice_mut(at as u64, len as u64, Access::NONE))
                .map_err(QpError::LocalAccess)?;
            self.echoes
                .fill_with(&g, s.shot, range, buf, &mut self.work);
            let last = s.next + 1 == g.messages();
            self.unsignaled += 1;
            let signaled = last || self.unsignaled >= SIGNAL_EVERY;
            let wr = SendWr {
                // a signaled completion frees every slot up to it
                wr_id: if signaled { self.unsignaled as u64 } else { 0 },
                op: SendOp::UdSend {
                    dest: s.dest,
                    imm: Some(imm::encode(s.shot, s.next)),
                },
                sg_list: Sge {
                    lkey: self.lkey,
                    va: at as u64,
                    len: len as u32,
                }
                .into(),
                signaled,
                solicited: false,
                marks: 0,
            };
            ep.post_send(self.qpn, wr)?;
            if signaled {
                self.unsignaled = 0;
            }
            self.outstanding += 1;
            self.next_slot = (self.next_slot + 1) % self.slots;
            self.stats.messages += 1;
            self.stats.bytes += len as u64;
            if let Some(r) = self.cfg.rate_gbps {
                let gap = Duration::from_secs_f64(len as f64 * 8.0 / (r * 1e9));
                // a shot starts at the link rate: no credit from the idle time before it
                let base = match self.next_send {
                    Some(t) if s.next > 0 => t.max(now.checked_sub(gap * BURST).unwrap_or(now)),
                    _ => now,
                };
                self.next_send = Some(base + gap);
            }
            self.sending = if last {
                self.stats.shots += 1;
                None
            } else {
                Some(Sending {
                    next: s.next + 1,
                    ..s
                })
            };
        }
        Ok(())
    }

    /// When [`Probe::poll`] has something to do next without a datagram or a trigger (the
    /// last poll's time: at once, while a shot is being sent unpaced).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let periodic = self.periodic.map(|p| p.next);
        let paced = self.sending.and_then(|_| self.next_send.max(self.polled));
        match (periodic, paced) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
