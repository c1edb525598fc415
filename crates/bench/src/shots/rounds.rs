//! Rounds of `bench shots`: every point (shot size × way × trigger frequency) measured once
//! per round, RoCE and UDP alternating, and what a table or plot takes from them — each
//! round's best point per size, medians over the rounds, and RoCE over UDP round by round.

use super::{Ends, Point, Proto, roce, udp};
use crate::Spread;
use rocelink_ultrasound::Geometry;

/// What to measure: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Shot sizes.
    pub geometries: Vec<Geometry>,
    /// The ways, in the order measured.
    pub protos: Vec<Proto>,
    /// Trigger frequencies, Hz.
    pub trigger_hz: Vec<f64>,
    /// Seconds per point.
    pub seconds: f64,
    /// Rounds.
    pub runs: usize,
    /// Where the ends run.
    pub ends: Ends,
}

impl Plan {
    /// Points in one round.
    pub fn per_round(&self) -> usize {
        self.geometries.len() * self.protos.len() * self.trigger_hz.len()
    }
}

/// One figure of a point (its data rate, its receiver's Gbit per CPU-second, …).
pub type Figure = fn(&Point) -> f64;

/// The complete rounds measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rounds(pub Vec<Vec<Point>>);

/// Measure `plan`, handing every point to `each` (its round, the point) as it is taken.
/// `stop` is read after each point: once it is set, the round under way is given up
/// and the rounds completed are returned.
pub fn measure(
    plan: &Plan,
    stop: &rocelink_runtime::Stopper,
    each: &mut dyn FnMut(usize, &Point),
) -> crate::Result<Rounds> {
    let mut rounds = Vec::new();
    for round in 0..plan.runs {
        let mut points = Vec::with_capacity(plan.per_round());
        'points: for &g in &plan.geometries {
            for &p in &plan.protos {
                for &hz in &plan.trigger_hz {
                    let pt = match p {
                        Proto::Roce => roce(g, hz, plan.seconds, plan.ends)?,
                        Proto::Udp => udp(g, hz, plan.seconds, plan.ends)?,
                    };
                    each(round, &pt);
                    points.push(pt);
                    if stop.is_stopped() {
                        break 'points;
                    }
                }
            }
        }
        if points.len() == plan.per_round() {
            rounds.push(points);
        }
        if stop.is_stopped() {
            break;
        }
    }
    Ok(Rounds(rounds))
}

impl Rounds {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// None completed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each round's best point of `proto` for `g` (its highest data rate), through `y`.
    pub fn per_round(&self, g: &Geometry, proto: Proto, y: Figure) -> Vec<f64> {
        self.0
            .iter()
            .filter_map(|r| best(r, g, proto).map(y))
            .collect()
    }

    /// The median over the rounds of [`Rounds::per_round`].
    pub fn median(&self, g: &Geometry, proto: Proto, y: Figure) -> f64 {
        Spread::of(&self.per_round(g, proto, y)).median
    }

    /// RoCE's best over UDP's best for `g`, through `y`, round by round: their median and
    /// range.
    pub fn ratio(&self, g: &Geometry, y: Figure) -> Spread {
        let v: Vec<f64> = self
            .0
            .iter()
            .filter_map(|r| {
                let (a, b) = (best(r, g, Proto::Roce)?, best(r, g, Proto::Udp)?);
                (y(b) > 0.0).then(|| y(a) / y(b))
            })
            .collect();
        Spread::of(&v)
    }

    /// For a plot: each trigger frequency of `proto` and `g` (kHz) with the median over the
    /// rounds of `y` there.
    pub fn curve(&self, g: &Geometry, proto: Proto, y: &dyn Fn(&Point) -> f64) -> Vec<(f64, f64)> {
        let Some(first) = self.0.first() else {
            return Vec::new();
        };
        let of = |p: &&Point| p.proto == proto && p.geometry == *g;
        first
            .iter()
            .filter(of)
            .map(|p| {
                let at = self
                    .0
                    .iter()
                    .flat_map(|r| r.iter().filter(of).filter(|q| q.trigger_hz == p.trigger_hz));
                (p.trigger_hz / 1000.0, crate::median(at.map(y)))
            })
            .collect()
    }
}

/// The best point of `proto` for `g` (highest data rate) in one round.
fn best<'a>(points: &'a [Point], g: &Geometry, proto: Proto) -> Option<&'a Point> {
    points
        .iter()
        .filter(|p| p.proto == proto && p.geometry == *g)
        .max_by(|a, b| a.gbps().total_cmp(&b.gbps()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shots::Cost;

    fn point(proto: Proto, hz: f64, complete: u64, rx_cpu: f64) -> Point {
        let geometry = Geometry::new(500, 96);
        Point {
            proto,
            geometry,
            trigger_hz: hz,
            seconds: 1.0,
            triggers: hz as u64,
            missed: 0,
            complete,
            incomplete: 0,
            cost: Cost {
                rx_cpu,
                rx_bytes: complete * geometry.bytes() as u64,
                tx_busy: 0.5,
            },
        }
    }

    #[test]
    fn ratios_are_taken_round_by_round_from_each_rounds_best_point() {
        let g = Geometry::new(500, 96);
        let gbps: Figure = Point::gbps;
        // round 0: RoCE best at 2 kHz (1500 shots), UDP at 2 kHz (2000): 0.75
        // round 1: RoCE 1000, UDP 500 (its 1 kHz point, the best): 2.0
        // round 2: RoCE 900, UDP 1000: 0.9
        let rounds = Rounds(vec![
            vec![
                point(Proto::Roce, 1e3, 1000, 1.0),
                point(Proto::Roce, 2e3, 1500, 1.0),
                point(Proto::Udp, 1e3, 1000, 1.0),
                point(Proto::Udp, 2e3, 2000, 1.0),
            ],
            vec![
                point(Proto::Roce, 1e3, 1000, 1.0),
                point(Proto::Roce, 2e3, 0, 1.0),
                point(Proto::Udp, 1e3, 500, 1.0),
                point(Proto::Udp, 2e3, 400, 1.0),
            ],
            vec![
                point(Proto::Roce, 1e3, 900, 1.0),
                point(Proto::Roce, 2e3, 800, 1.0),
                point(Proto::Udp, 1e3, 1000, 1.0),
                point(Proto::Udp, 2e3, 900, 1.0),
            ],
        ]);
        let r = rounds.ratio(&g, gbps);
        assert!((r.median - 0.9).abs() < 1e-9, "{r:?}");
        assert!((r.min - 0.75).abs() < 1e-9 && (r.max - 2.0).abs() < 1e-9);
        // the median of the rounds' best RoCE rates: 1500, 1000, 900 shots
        let want = 1000.0 * g.bytes() as f64 * 8.0 / 1e9;
        assert!((rounds.median(&g, Proto::Roce, gbps) - want).abs() < 1e-9);
        // the plot's curve: per frequency, the median over the rounds
        let c = rounds.curve(&g, Proto::Udp, &|p| p.complete as f64);
        assert_eq!(c, vec![(1.0, 1000.0), (2.0, 900.0)]);
        // no UDP point for another size: no ratio
        assert!(rounds.ratio(&Geometry::new(1000, 96), gbps).median == 0.0);
    }
}
