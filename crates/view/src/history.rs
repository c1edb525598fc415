//! Per-second history of a stream: running totals at the end of each second that saw a
//! frame, so the rate of any second is the difference of two totals (seconds without a
//! frame cost nothing and read as zero).

use std::collections::VecDeque;

/// Running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) frames: u64,
    pub(crate) damaged: u64,
    pub(crate) bytes: u64,
    pub(crate) lost: u64,
}

impl Totals {
    fn minus(self, o: Totals) -> Totals {
        Totals {
            frames: self.frames.saturating_sub(o.frames),
            damaged: self.damaged.saturating_sub(o.damaged),
            bytes: self.bytes.saturating_sub(o.bytes),
            lost: self.lost.saturating_sub(o.lost),
        }
    }
}

/// The seconds kept (an hour).
const KEEP: usize = 3600;

/// Totals by second since the start, bounded to [`KEEP`] seconds.
#[derive(Debug, Default)]
pub(crate) struct History {
    seconds: VecDeque<(u64, Totals)>,
}

impl History {
    /// The totals now, in second `t`.
    pub(crate) fn set(&mut self, t: u64, now: Totals) {
        match self.seconds.back_mut() {
            Some((last, v)) if *last == t => *v = now,
            _ => {
                if self.seconds.len() == KEEP {
                    self.seconds.pop_front();
                }
                self.seconds.push_back((t, now));
            }
        }
    }

    /// The totals at the end of second `t`.
    fn at(&self, t: u64) -> Totals {
        let i = self.seconds.partition_point(|&(s, _)| s <= t);
        i.checked_sub(1)
            .map_or(Totals::default(), |i| self.seconds[i].1)
    }

    /// What happened in second `t`.
    pub(crate) fn during(&self, t: u64) -> Totals {
        match t.checked_sub(1) {
            Some(before) => self.at(t).minus(self.at(before)),
            None => self.at(0),
        }
    }

    /// `[second, frames, Gbit/s, packets lost, damaged frames]` for each of the `n` whole
    /// seconds before second `now`.
    pub(crate) fn chart(&self, now: u64, n: u64) -> Vec<[f64; 5]> {
        (now.saturating_sub(n)..now)
            .map(|t| {
                let d = self.during(t);
                [
                    t as f64,
                    d.frames as f64,
                    d.bytes as f64 * 8.0 / 1e9,
                    d.lost as f64,
                    d.damaged as f64,
                ]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tot(frames: u64) -> Totals {
        Totals {
            frames,
            bytes: frames * 1000,
            ..Totals::default()
        }
    }

    #[test]
    fn rates_are_differences_and_quiet_seconds_are_zero() {
        let mut h = History::default();
        h.set(0, tot(5));
        h.set(0, tot(10));
        h.set(1, tot(70));
        h.set(4, tot(100));
        assert_eq!(h.during(0).frames, 10);
        assert_eq!(h.during(1).frames, 60);
        assert_eq!(h.during(2).frames, 0);
        assert_eq!(h.during(3).frames, 0);
        assert_eq!(h.during(4).frames, 30);
        let c = h.chart(5, 3);
        assert_eq!(c.iter().map(|r| r[1]).collect::<Vec<_>>(), [0.0, 0.0, 30.0]);
        assert_eq!(c[2][0], 4.0);
        assert!((c[2][2] - 30.0 * 8000.0 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn an_hour_is_kept_and_no_more() {
        let mut h = History::default();
        for t in 0..(KEEP as u64 + 10) {
            h.set(t, tot(t));
        }
        assert_eq!(h.seconds.len(), KEEP);
        assert_eq!(h.during(KEEP as u64 + 9).frames, 1);
    }
}
