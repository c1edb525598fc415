//! perftest's arithmetic: bandwidth peak and average from per-message post and completion
//! times, latency statistics from per-iteration times.

use std::time::Instant;

/// Latency in microseconds (half the round trip), perftest's columns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatStats {
    /// Samples.
    pub iters: usize,
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
    pub p999: f64,
}

impl LatStats {
    /// From one-way samples in µs.
    pub fn from_samples(mut s: Vec<f64>) -> LatStats {
        s.sort_by(f64::total_cmp);
        let n = s.len().max(1);
        let pct = |p: f64| {
            s.get(((n as f64 * p).ceil() as usize).clamp(1, n) - 1)
                .copied()
        };
        let avg = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        LatStats {
            iters: s.len(),
            t_min: s.first().copied().unwrap_or(0.0),
            t_max: s.last().copied().unwrap_or(0.0),
            t_typical: pct(0.5).unwrap_or(0.0),
            t_avg: avg,
            t_stdev: var.sqrt(),
            p99: pct(0.99).unwrap_or(0.0),
            p999: pct(0.999).unwrap_or(0.0),
        }
    }
}

/// A bandwidth row in perftest's columns.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BwRow {
    /// Message size.
    pub bytes: u64,
    /// Messages.
    pub iters: u64,
    /// Peak bandwidth, bytes per second.
    pub peak_bps: f64,
    /// Average bandwidth, bytes per second.
    pub avg_bps: f64,
    /// Messages per second, millions.
    pub msg_rate_mpps: f64,
}

/// A latency row: perftest's columns in µs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations run (perftest's `#iterations`; one sample fewer).
    pub iters: u64,
    /// The statistics.
    pub stats: LatStats,
}

/// perftest's bandwidth: the average over the whole run (first post to last completion)
/// and the peak, the best rate of any run of consecutive messages (`(tcompleted[j] −
/// tposted[i]) / (j − i + 1)` at its smallest, over at most 2 000 evenly spaced messages).
pub fn bw_row(bytes: usize, posted: &[Instant], completed: &[Instant]) -> BwRow {
    let n = posted.len().min(completed.len());
    if n == 0 {
        return BwRow {
            bytes: bytes as u64,
            iters: 0,
            peak_bps: 0.0,
            avg_bps: 0.0,
            msg_rate_mpps: 0.0,
        };
    }
    let total = completed[n - 1]
        .saturating_duration_since(posted[0])
        .as_secs_f64()
        .max(1e-9);
    let step = n.div_ceil(2000);
    let mut best = f64::MAX;
    for i in (0..n).step_by(step) {
        for j in (i..n).step_by(step) {
            let t = completed[j]
                .saturating_duration_since(posted[i])
                .as_secs_f64();
            let per = t / (j - i + 1) as f64;
            if per > 0.0 && per < best {
                best = per;
            }
        }
    }
    let avg = (bytes * n) as f64 / total;
    BwRow {
        bytes: bytes as u64,
        iters: n as u64,
        peak_bps: if best < f64::MAX {
            (bytes as f64 / best).max(avg)
        } else {
            avg
        },
        avg_bps: avg,
        msg_rate_mpps: n as f64 / total / 1e6,
    }
}

/// perftest's latency (`print_report_lat`): the time between consecutive posts (each waits
/// for the previous exchange), divided by `factor` (2 for WRITE and SEND, half the round
/// trip; 1 for READ) — `iters − 1` samples, none after the last post.
pub fn lat_row(bytes: usize, posted: &[Instant], factor: f64) -> LatRow {
    let s: Vec<f64> = posted
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]).as_secs_f64() * 1e6 / factor)
        .collect();
    LatRow {
        bytes: bytes as u64,
        iters: posted.len() as u64,
        stats: LatStats::from_samples(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn average_and_peak_follow_perftest() {
        let t0 = Instant::now();
        let ms = |k: u64| t0 + Duration::from_millis(k);
        // 4 messages of 1000 bytes: posted at 0, completed at 1, 2, 3, 10 ms
        let p = [ms(0), ms(0), ms(0), ms(0)];
        let c = [ms(1), ms(2), ms(3), ms(10)];
        let r = bw_row(1000, &p, &c);
        assert_eq!(r.iters, 4);
        assert!((r.avg_bps - 4000.0 / 0.010).abs() < 1.0, "{r:?}");
        // best run: messages 0..=2 in 3 ms, or message 0 alone in 1 ms: 1000 B/ms
        assert!((r.peak_bps - 1_000_000.0).abs() < 1.0, "{r:?}");
        assert!((r.msg_rate_mpps - 4.0 / 0.010 / 1e6).abs() < 1e-9);
    }

    #[test]
    fn percentiles_of_known_samples() {
        let s = LatStats::from_samples((1..=1000).map(f64::from).collect());
        assert_eq!(s.t_min, 1.0);
        assert_eq!(s.t_max, 1000.0);
        assert_eq!(s.t_typical, 500.0);
        assert_eq!(s.p99, 990.0);
        assert_eq!(s.p999, 999.0);
        assert!((s.t_avg - 500.5).abs() < 1e-9);
    }

    #[test]
    fn latency_is_the_gap_between_posts() {
        let t0 = Instant::now();
        let us = |k: u64| t0 + Duration::from_micros(k);
        // a final gap (after the last post, until the test ended) is no sample: the last
        // post of a side that answers is followed by nothing
        let r = lat_row(2, &[us(0), us(10), us(30)], 2.0);
        assert_eq!((r.iters, r.stats.iters), (3, 2));
        assert_eq!((r.stats.t_min, r.stats.t_max), (5.0, 10.0));
    }
}
