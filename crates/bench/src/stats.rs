//! Figures over repeated runs: the median and the spread every benchmark reports.

/// Figures over rounds (a ratio, usually): their median and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// [`median`] of them.
    pub median: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`.
    pub fn of(v: &[f64]) -> Spread {
        Spread {
            median: median(v.iter().copied()),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// As a ratio: `1.23x (1.10–1.40)`, the range left out after one round.
    pub fn show(&self, rounds: usize) -> String {
        if rounds > 1 {
            format!("{:.2}x ({:.2}–{:.2})", self.median, self.min, self.max)
        } else {
            format!("{:.2}x", self.median)
        }
    }
}

/// The median of `v` (of an even count the upper middle one; 0 when empty).
pub fn median(v: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.into_iter().collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_upper_middle_and_the_spread_its_range() {
        assert_eq!(median([]), 0.0);
        assert_eq!(median([3.0, 1.0]), 3.0);
        assert_eq!(median([2.0, 9.0, 1.0]), 2.0);
        let s = Spread::of(&[1.2, 0.9, 1.5]);
        assert_eq!((s.median, s.min, s.max), (1.2, 0.9, 1.5));
        assert_eq!(s.show(3), "1.20x (0.90–1.50)");
        assert_eq!(s.show(1), "1.20x");
    }
}
