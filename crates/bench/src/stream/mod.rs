//! `rocelink bench stream`: the settings, the result, and the rounds (see the crate
//! documentation for the receivers). [`sender`] replays the frames, [`receivers`] holds
//! the receivers, [`run`] one sender against one receiver, [`no_loss`] the bisection for
//! the highest lossless rate.

use crate::{median, veth};
use std::net::Ipv4Addr;
use std::time::Duration;

pub mod no_loss;
pub mod receivers;
pub mod report;
pub mod run;
pub mod sender;

/// Stream benchmark settings.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Payload bytes per data packet (a multiple of 128).
    pub payload: usize,
    /// Frame size in bytes.
    pub frame: usize,
    /// Seconds each receiver runs.
    pub seconds: f64,
    /// Paced payload rate in Gbit/s (`None`: as fast as the sender can).
    pub rate_gbps: Option<f64>,
    /// Sender uses UDP GSO (gather).
    pub gso: bool,
    /// Receivers ask for UDP GRO.
    pub gro: bool,
    /// Pin the sender and the receivers to [`StreamConfig::cpus`].
    pub pin: bool,
    /// The sender's CPU and the receivers' (0 and 1 by default).
    pub cpus: (usize, usize),
    /// Loopback addresses (device, host).
    pub device: Ipv4Addr,
    /// Host address.
    pub host: Ipv4Addr,
    /// Receivers to run, in order (names from [`ALL_RECEIVERS`]).
    pub receivers: Vec<&'static str>,
    /// Messages per `recvmmsg` for rocelink's fast path (0: its default).
    pub batch: usize,
    /// rocelink spins on the socket instead of sleeping.
    pub busy_poll: bool,
    /// rocelink's receive coalescing, on the socket and AF_XDP paths alike
    /// (`ReceiverConfig::rx_coalesce`, `XdpPortConfig::rx_coalesce`; zero: off).
    pub coalesce: Duration,
    /// Socket receive buffer of the sink and of rocelink's receiver (recv1 gets HSB's).
    pub rcvbuf: usize,
    /// Run over this veth link instead of loopback (`device`/`host` are then its
    /// addresses): the sender in its namespace A, the receivers in B.
    pub veth: Option<veth::Veth>,
    /// Set (by a Ctrl-C handler) to end the run early: the receiver running then stops
    /// at once and nothing more starts; the call returns an `Interrupted` error.
    pub stop: rocelink_runtime::Stopper,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            payload: 4096,
            frame: 1 << 20,
            seconds: 3.0,
            rate_gbps: None,
            gso: true,
            gro: true,
            pin: true,
            cpus: (0, 1),
            device: Ipv4Addr::new(127, 0, 77, 2),
            host: Ipv4Addr::new(127, 0, 77, 1),
            receivers: RECEIVERS.to_vec(),
            batch: 0,
            busy_poll: false,
            coalesce: Duration::ZERO,
            rcvbuf: 64 << 20,
            veth: None,
            stop: rocelink_runtime::Stopper::new(),
        }
    }
}

/// One receiver's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// `sink`, `recv1` or `rocelink`.
    pub name: &'static str,
    /// Payload goodput in Gbit/s (bytes placed, or counted for the sink).
    pub gbps: f64,
    /// Datagrams per second received.
    pub pps: f64,
    /// Fraction of sent datagrams not received.
    pub loss: f64,
    /// Receiver thread CPU, percent of one core.
    pub cpu_percent: f64,
    /// The part of it in user space (the rest is the kernel's: system calls and copies).
    pub cpu_user_percent: f64,
    /// The machine's softirq and hardirq time over the run, percent of one core (the
    /// kernel's receive path on veth; on loopback it runs in the sender's system calls).
    pub irq_percent: f64,
    /// Datagrams sent / received.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Frames reported (good, damaged) by frame-aware receivers.
    pub frames: (u64, u64),
}

pub(crate) const QP: u32 = 0x77;
pub(crate) const RKEY: u32 = 0x7777;
pub(crate) const PAGES: u32 = 4;

/// The receivers [`stream`] runs by default, in order.
pub const RECEIVERS: [&str; 3] = ["sink", "recv1", "rocelink"];

/// Every receiver: the default three, `generic` (rocelink's receiver with the fast path
/// off: every datagram through the generic transport endpoint) and `xdp` (over AF_XDP, on
/// a veth link).
pub const ALL_RECEIVERS: [&str; 6] = ["sink", "sink-ring", "recv1", "rocelink", "generic", "xdp"];

pub(super) fn check(cfg: &StreamConfig) -> crate::Result<()> {
    if cfg.payload == 0 || !cfg.payload.is_multiple_of(128) || cfg.payload > 8064 {
        return Err(crate::BenchError::Setting(
            "payload must be a multiple of 128 up to 8064".into(),
        ));
    }
    if let Some(n) = cfg.receivers.iter().find(|n| !ALL_RECEIVERS.contains(n)) {
        return Err(crate::BenchError::Setting(format!(
            "no receiver {n:?} (have: {})",
            ALL_RECEIVERS.join(", ")
        )));
    }
    Ok(())
}

/// Run the configured receivers against the same sender, one after the other.
pub fn stream(cfg: &StreamConfig) -> crate::Result<Vec<StreamResult>> {
    check(cfg)?;
    cfg.receivers.iter().map(|n| run::run_one(cfg, n)).collect()
}

/// [`stream`] `runs` times, the receivers alternating in each round (so the ratios of a
/// round compare runs minutes apart at most). Stopped ([`StreamConfig::stop`]) after a
/// round completed, it returns the rounds that did.
pub fn stream_rounds(cfg: &StreamConfig, runs: usize) -> crate::Result<Vec<Vec<StreamResult>>> {
    let mut rounds = Vec::new();
    for _ in 0..runs.max(1) {
        match stream(cfg) {
            Ok(r) => rounds.push(r),
            Err(crate::BenchError::Stopped) if !rounds.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(rounds)
}

/// Each receiver's medians over `rounds` (every figure the median of its own).
pub fn medians(rounds: &[Vec<StreamResult>]) -> Vec<StreamResult> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|f| {
            let all: Vec<&StreamResult> = rounds
                .iter()
                .filter_map(|r| r.iter().find(|x| x.name == f.name))
                .collect();
            let m = |g: fn(&StreamResult) -> f64| median(all.iter().map(|x| g(x)));
            let mu = |g: fn(&StreamResult) -> u64| median(all.iter().map(|x| g(x) as f64)) as u64;
            StreamResult {
                name: f.name,
                gbps: m(|x| x.gbps),
                pps: m(|x| x.pps),
                loss: m(|x| x.loss),
                cpu_percent: m(|x| x.cpu_percent),
                cpu_user_percent: m(|x| x.cpu_user_percent),
                irq_percent: m(|x| x.irq_percent),
                sent: mu(|x| x.sent),
                received: mu(|x| x.received),
                frames: (mu(|x| x.frames.0), mu(|x| x.frames.1)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver's result with these figures (the report's tests use it too).
    pub(super) fn result(name: &'static str, gbps: f64, cpu: f64, frames: u64) -> StreamResult {
        StreamResult {
            name,
            gbps,
            pps: 0.0,
            loss: 0.0,
            cpu_percent: cpu,
            cpu_user_percent: 0.0,
            irq_percent: 0.0,
            sent: 10,
            received: frames * 2,
            frames: (frames, 0),
        }
    }

    #[test]
    fn medians_are_per_receiver_and_per_figure() {
        let rounds = vec![
            vec![
                result("sink", 5.0, 30.0, 0),
                result("rocelink", 6.0, 40.0, 7),
            ],
            // a round may list them in another order
            vec![
                result("rocelink", 4.0, 50.0, 9),
                result("sink", 7.0, 20.0, 0),
            ],
            vec![
                result("sink", 6.0, 25.0, 0),
                result("rocelink", 5.0, 45.0, 8),
            ],
        ];
        let m = medians(&rounds);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].name, m[0].gbps, m[0].cpu_percent),
            ("sink", 6.0, 25.0)
        );
        assert_eq!(
            (
                m[1].name,
                m[1].gbps,
                m[1].cpu_percent,
                m[1].frames,
                m[1].received
            ),
            ("rocelink", 5.0, 45.0, (8, 0), 16)
        );
        assert!(medians(&[]).is_empty());
    }
}
