//! Output helpers shared by the commands: the progress spinner and rates.

/// A spinner on stderr, hidden with `--json` or `--quiet`.
pub(crate) fn progress_bar(hidden: bool) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    if hidden {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb
}

/// Gbit/s of `bytes` in `secs`.
pub(crate) fn gbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs.max(1e-9) / 1e9
}
