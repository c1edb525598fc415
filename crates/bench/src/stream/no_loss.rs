//! The highest paced rate a receiver takes without loss.

use super::run::run_one;
use super::{ALL_RECEIVERS, StreamConfig, StreamResult, check};

/// The highest paced rate at which receiver `name` loses nothing (no datagram lost, no
/// frame damaged): a bisection of `steps` probes between 0 and `hi_gbps`, each probe
/// `cfg.seconds` long. Returns the rate and that probe's result (`None` if even the lowest
/// probe lost something).
pub fn no_loss_rate(
    cfg: &StreamConfig,
    name: &'static str,
    hi_gbps: f64,
    steps: usize,
) -> crate::Result<Option<(f64, StreamResult)>> {
    check(cfg)?;
    if !ALL_RECEIVERS.contains(&name) {
        return Err(crate::BenchError::Setting(format!("no receiver {name:?}")));
    }
    let (mut lo, mut hi) = (0.0f64, hi_gbps.max(0.1));
    let mut best = None;
    for _ in 0..steps {
        let rate = (lo + hi) / 2.0;
        let r = run_one(
            &StreamConfig {
                rate_gbps: Some(rate),
                ..cfg.clone()
            },
            name,
        )?;
        if r.sent > 0 && r.received >= r.sent && r.frames.1 == 0 {
            lo = rate;
            best = Some((rate, r));
        } else {
            hi = rate;
        }
    }
    Ok(best)
}

/// The no-loss search of every configured receiver (see [`no_loss_rate`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NoLoss {
    /// The top of the bisection: 1.1× the best unpaced goodput.
    pub hi_gbps: f64,
    /// Probes per receiver.
    pub steps: usize,
    /// Per receiver, in the configured order: its no-loss rate and the result at that rate
    /// (`None`: it lost data at every probed rate).
    pub found: Vec<(&'static str, Option<(f64, StreamResult)>)>,
}

impl NoLoss {
    /// Goodput of `name` at its no-loss rate (0 when it has none or did not run).
    pub fn goodput(&self, name: &str) -> f64 {
        self.found
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, b)| b.as_ref().map(|(_, r)| r.gbps))
            .unwrap_or(0.0)
    }

    /// `a`'s no-loss goodput over `b`'s (0 when `b` has none).
    pub fn ratio(&self, a: &str, b: &str) -> f64 {
        let (x, y) = (self.goodput(a), self.goodput(b));
        if y > 0.0 { x / y } else { 0.0 }
    }
}

/// Search every configured receiver's no-loss rate, bisecting up to 1.1× the best goodput
/// of the unpaced run `unpaced`.
pub fn no_loss(
    cfg: &StreamConfig,
    unpaced: &[StreamResult],
    steps: usize,
) -> crate::Result<NoLoss> {
    let hi_gbps = unpaced.iter().map(|x| x.gbps).fold(0.0, f64::max) * 1.1;
    let found = cfg
        .receivers
        .iter()
        .map(|&name| Ok((name, no_loss_rate(cfg, name, hi_gbps, steps)?)))
        .collect::<crate::Result<_>>()?;
    Ok(NoLoss {
        hi_gbps,
        steps,
        found,
    })
}
