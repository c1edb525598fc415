//! What a stream benchmark found, over its rounds: each receiver's medians, its figures per
//! CPU, and rocelink's ratios against the baselines that ran beside it in the same round.
//! [`StreamReport`] serialises as `rocelink bench stream --json` prints it.

use super::{StreamConfig, StreamResult, medians};
use crate::Spread;
use serde::ser::{SerializeMap, Serializer};

/// The analysis of [`stream_rounds`](super::stream_rounds)' rounds.
#[derive(Debug)]
pub struct StreamReport<'a> {
    cfg: &'a StreamConfig,
    backend: &'a str,
    rounds: &'a [Vec<StreamResult>],
    medians: Vec<StreamResult>,
}

/// `a / b`, 0 when `b` is not positive.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

fn find<'r>(r: &'r [StreamResult], n: &str) -> Option<&'r StreamResult> {
    r.iter().find(|x| x.name == n)
}

impl<'a> StreamReport<'a> {
    /// The report of `rounds` run with `cfg` over `backend` ("udp", "xdp").
    pub fn new(
        cfg: &'a StreamConfig,
        backend: &'a str,
        rounds: &'a [Vec<StreamResult>],
    ) -> StreamReport<'a> {
        StreamReport {
            cfg,
            backend,
            rounds,
            medians: medians(rounds),
        }
    }

    /// Each receiver's medians over the rounds, in the order they ran.
    pub fn medians(&self) -> &[StreamResult] {
        &self.medians
    }

    /// The rounds.
    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }

    /// Over a veth pair: a receiver's CPU includes the machine's softirq time.
    pub fn over_veth(&self) -> bool {
        self.cfg.veth.is_some()
    }

    /// CPU % of a core: the receiver thread, plus softirq over veth.
    pub fn cpu(&self, x: &StreamResult) -> f64 {
        x.cpu_percent + if self.over_veth() { x.irq_percent } else { 0.0 }
    }

    /// Verified Gbit/s per CPU-second.
    pub fn per_cpu(&self, x: &StreamResult) -> f64 {
        let cpu = self.cpu(x);
        if cpu > 0.0 {
            x.gbps / (cpu / 100.0)
        } else {
            0.0
        }
    }

    /// Whether receiver `n` ran.
    pub fn ran(&self, n: &str) -> bool {
        find(&self.medians, n).is_some()
    }

    /// `f(rocelink, n)` in each round, over the rounds.
    pub fn spread(&self, n: &str, f: impl Fn(&StreamResult, &StreamResult) -> f64) -> Spread {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| Some(f(find(r, "rocelink")?, find(r, n)?)))
            .collect();
        Spread::of(&v)
    }

    /// rocelink's goodput against each baseline that ran beside it.
    pub fn goodput_ratios(&self) -> Vec<(&'static str, Spread)> {
        self.against(&["sink", "recv1"], |o, t| ratio(o.gbps, t.gbps))
    }

    /// rocelink's CPU against each socket baseline that ran beside it: at a paced rate its
    /// CPU per Gbit/s of goodput against theirs, unpaced its verified Gbit/s per CPU-second
    /// against theirs.
    pub fn cpu_ratios(&self) -> Vec<(&'static str, Spread)> {
        let paced = self.cfg.rate_gbps.is_some();
        self.against(&["sink", "sink-ring", "recv1"], |o, t| {
            if paced {
                ratio(self.per_cpu(t), self.per_cpu(o))
            } else {
                ratio(self.per_cpu(o), self.per_cpu(t))
            }
        })
    }

    /// AF_XDP against rocelink's socket path, when both ran: (goodput, per CPU).
    pub fn xdp_ratios(&self) -> Option<(Spread, Spread)> {
        (self.ran("xdp") && self.ran("rocelink")).then(|| {
            (
                self.spread("xdp", |o, t| ratio(t.gbps, o.gbps)),
                self.spread("xdp", |o, t| ratio(self.per_cpu(t), self.per_cpu(o))),
            )
        })
    }

    fn against(
        &self,
        names: &[&'static str],
        f: impl Fn(&StreamResult, &StreamResult) -> f64,
    ) -> Vec<(&'static str, Spread)> {
        names
            .iter()
            .filter(|n| self.ran("rocelink") && self.ran(n))
            .map(|&n| (n, self.spread(n, &f)))
            .collect()
    }

    fn row(&self, x: &StreamResult) -> serde_json::Value {
        serde_json::json!({"name": x.name, "gbps": x.gbps, "pps": x.pps, "loss": x.loss,
            "cpu_percent": x.cpu_percent, "cpu_user_percent": x.cpu_user_percent,
            "irq_percent": x.irq_percent, "gbps_per_cpu": self.per_cpu(x), "sent": x.sent,
            "received": x.received, "frames_good": x.frames.0, "frames_damaged": x.frames.1})
    }

    fn goodput_of(&self, baseline: &str) -> f64 {
        self.goodput_ratios()
            .iter()
            .find(|g| g.0 == baseline)
            .map_or(0.0, |g| g.1.median)
    }
}

/// The settings (`payload`, `frame`, `seconds`, `rate_gbps`, `gso`, `gro`, `backend`),
/// `runs`, each receiver's medians under `results`, the ratios' medians
/// (`ratio_rocelink_to_sink`, `ratio_rocelink_to_recv1`, `ratio_xdp_to_rocelink_per_cpu`,
/// and `cpu_ratio_rocelink_to` paced or `per_cpu_ratio_rocelink_to` unpaced, by baseline),
/// and with several rounds every round's rows under `rounds`.
impl serde::Serialize for StreamReport<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.cfg;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("payload", &c.payload)?;
        m.serialize_entry("frame", &c.frame)?;
        m.serialize_entry("seconds", &c.seconds)?;
        m.serialize_entry("rate_gbps", &c.rate_gbps)?;
        m.serialize_entry("gso", &c.gso)?;
        m.serialize_entry("gro", &c.gro)?;
        m.serialize_entry("backend", self.backend)?;
        m.serialize_entry("runs", &self.rounds.len())?;
        let rows: Vec<_> = self.medians.iter().map(|x| self.row(x)).collect();
        m.serialize_entry("results", &rows)?;
        let xdp = self.xdp_ratios().map_or(0.0, |(_, per_cpu)| per_cpu.median);
        m.serialize_entry("ratio_xdp_to_rocelink_per_cpu", &xdp)?;
        m.serialize_entry("ratio_rocelink_to_sink", &self.goodput_of("sink"))?;
        m.serialize_entry("ratio_rocelink_to_recv1", &self.goodput_of("recv1"))?;
        let cpu: serde_json::Map<String, serde_json::Value> = self
            .cpu_ratios()
            .into_iter()
            .map(|(n, s)| (n.to_string(), s.median.into()))
            .collect();
        let key = match c.rate_gbps {
            Some(_) => "cpu_ratio_rocelink_to",
            None => "per_cpu_ratio_rocelink_to",
        };
        m.serialize_entry(key, &cpu)?;
        if self.rounds.len() > 1 {
            let rounds: Vec<Vec<_>> = self
                .rounds
                .iter()
                .map(|r| r.iter().map(|x| self.row(x)).collect())
                .collect();
            m.serialize_entry("rounds", &rounds)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &'static str, gbps: f64, cpu: f64) -> StreamResult {
        super::super::tests::result(name, gbps, cpu, 1)
    }

    #[test]
    fn ratios_are_taken_round_by_round_against_what_ran_beside_rocelink() {
        let rounds = vec![
            vec![result("sink", 10.0, 50.0), result("rocelink", 5.0, 100.0)],
            vec![result("sink", 8.0, 50.0), result("rocelink", 6.0, 100.0)],
            vec![result("sink", 10.0, 40.0), result("rocelink", 9.0, 100.0)],
        ];
        let cfg = StreamConfig::default();
        let rep = StreamReport::new(&cfg, "udp", &rounds);
        let g = rep.goodput_ratios();
        assert_eq!(g.len(), 1, "recv1 did not run: no ratio against it");
        assert_eq!((g[0].0, g[0].1.median), ("sink", 0.75));
        assert_eq!((g[0].1.min, g[0].1.max), (0.5, 0.9));
        // unpaced: Gbit/s per CPU-second, ours over theirs (loopback: no softirq added)
        let c = rep.cpu_ratios();
        assert_eq!(c[0].1.median, 0.36); // of 0.25, 0.375, 0.36
        let j = serde_json::to_value(&rep).unwrap();
        assert_eq!(j["runs"], 3);
        assert_eq!(j["ratio_rocelink_to_sink"], 0.75);
        assert_eq!(j["ratio_rocelink_to_recv1"], 0.0);
        assert_eq!(j["per_cpu_ratio_rocelink_to"]["sink"], 0.36);
        assert!(j.get("cpu_ratio_rocelink_to").is_none());
        assert_eq!(j["rounds"].as_array().unwrap().len(), 3);
        assert_eq!(j["results"][1]["gbps_per_cpu"], 6.0);
        // paced: CPU per Gbit/s, theirs over ours, under the other key
        let paced = StreamConfig {
            rate_gbps: Some(5.0),
            ..StreamConfig::default()
        };
        let j = serde_json::to_value(StreamReport::new(&paced, "udp", &rounds[..1])).unwrap();
        assert_eq!(j["cpu_ratio_rocelink_to"]["sink"], 4.0);
        assert!(j.get("rounds").is_none());
    }
}
