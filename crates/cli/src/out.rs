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

pub(crate) use rocelink_runtime::session::gbps;

/// A session's summary as `--json` prints it: its serialisation (what Python and the view
/// show too), with the process's counters table (what `rocelink stats` reads) under
/// `counters`.
pub(crate) fn summary_json(
    sum: &impl serde::Serialize,
    snap: rocelink_runtime::counters::Snapshot,
) -> serde_json::Value {
    let mut v = serde_json::to_value(sum).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "counters".into(),
            serde_json::to_value(snap).unwrap_or_default(),
        );
    }
    v
}
