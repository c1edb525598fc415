//! The JSON line `rocelink perf --json` prints for each row, as types: the CLI writes them
//! and `bench perf` reads them back, so no program spells a key of another's output.
//! Figures are rounded as perftest's text columns show them (two decimals; six for the
//! message rate).

use super::{BwRow, LatRow};
use serde::{Deserialize, Serialize};

/// How bandwidth is shown: perftest's MiB/sec, or Gb/sec (`--report_gbits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BwUnit {
    /// 2^20 bytes per second.
    #[serde(rename = "MiB/sec")]
    MibPerSec,
    /// 10^9 bits per second.
    #[serde(rename = "Gb/sec")]
    GbitPerSec,
}

impl BwUnit {
    /// `bytes_per_sec` in this unit.
    pub fn of(self, bytes_per_sec: f64) -> f64 {
        match self {
            BwUnit::MibPerSec => bytes_per_sec / 1_048_576.0,
            BwUnit::GbitPerSec => bytes_per_sec * 8.0 / 1e9,
        }
    }

    /// The unit as perftest's header writes it.
    pub fn name(self) -> &'static str {
        match self {
            BwUnit::MibPerSec => "MiB/sec",
            BwUnit::GbitPerSec => "Gb/sec",
        }
    }
}

/// One bandwidth row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BwLine {
    /// Message size.
    pub bytes: u64,
    /// Messages.
    pub iterations: u64,
    /// Peak bandwidth in `unit`.
    pub bw_peak: f64,
    /// Average bandwidth in `unit`.
    pub bw_average: f64,
    /// The bandwidths' unit.
    pub unit: BwUnit,
    /// Messages per second, millions.
    pub msg_rate_mpps: f64,
}

impl BwLine {
    /// Row `r` in `unit`.
    pub fn new(r: &BwRow, unit: BwUnit) -> BwLine {
        BwLine {
            bytes: r.bytes,
            iterations: r.iters,
            bw_peak: round(unit.of(r.peak_bps), 2),
            bw_average: round(unit.of(r.avg_bps), 2),
            unit,
            msg_rate_mpps: round(r.msg_rate_mpps, 6),
        }
    }
}

/// One latency row, in µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatLine {
    /// Message size.
    pub bytes: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Smallest.
    pub t_min: f64,
    /// Largest.
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

impl LatLine {
    /// Row `r`.
    pub fn new(r: &LatRow) -> LatLine {
        let s = &r.stats;
        LatLine {
            bytes: r.bytes,
            iterations: r.iters,
            t_min: round(s.t_min, 2),
            t_max: round(s.t_max, 2),
            t_typical: round(s.t_typical, 2),
            t_avg: round(s.t_avg, 2),
            t_stdev: round(s.t_stdev, 2),
            p99: round(s.p99, 2),
            p99_9: round(s.p999, 2),
        }
    }
}

/// A row as read back: bandwidth or latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    /// A bandwidth test's.
    Bw(BwLine),
    /// A latency test's.
    Lat(LatLine),
}

impl Line {
    /// The figure a comparison takes: the average bandwidth, or the typical latency.
    pub fn headline(&self) -> f64 {
        match self {
            Line::Bw(b) => b.bw_average,
            Line::Lat(l) => l.t_typical,
        }
    }
}

/// `x` to `places` decimals, exactly as `format!("{x:.places$}")` writes it, so a line
/// agrees with the text table and perftest's JSON file printed from the same figure
/// (scaling by 10^places first would round 6.555 up where the text shows 6.55).
fn round(x: f64, places: usize) -> f64 {
    format!("{x:.places$}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::LatStats;

    #[test]
    fn lines_read_back_as_what_was_written() {
        let bw = BwRow {
            bytes: 65536,
            iters: 5000,
            peak_bps: 3.0e9,
            avg_bps: 2.5e9,
            msg_rate_mpps: 0.038_146_97,
        };
        let b = BwLine::new(&bw, BwUnit::MibPerSec);
        assert_eq!(b.bw_average, 2384.19);
        let text = serde_json::to_string(&b).unwrap();
        assert!(text.contains("\"unit\":\"MiB/sec\""), "{text}");
        let back: Line = serde_json::from_str(&text).unwrap();
        assert_eq!(back, Line::Bw(b));
        assert_eq!(back.headline(), 2384.19);
        let g = BwLine::new(&bw, BwUnit::GbitPerSec);
        assert_eq!(g.bw_average, 20.0);

        let lat = LatRow {
            bytes: 2,
            iters: 1000,
            stats: LatStats::from_samples(vec![3.0, 1.0, 2.0, 4.0]),
        };
        let l = LatLine::new(&lat);
        let back: Line = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back.headline(), 2.0);
        assert_eq!(back, Line::Lat(l));
    }

    #[test]
    fn rounding_agrees_with_the_printed_text() {
        for x in [6.555, 2.675, 1.005, 0.125, 35.265, 1e-9, 123_456.785] {
            for places in [2, 6] {
                let text = format!("{x:.places$}");
                assert_eq!(format!("{:.places$}", round(x, places)), text, "{x}");
                assert_eq!(round(x, places), text.parse::<f64>().unwrap(), "{x}");
            }
        }
    }
}
