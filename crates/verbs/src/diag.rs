//! The library's word to the person running a program it was loaded into. An unmodified
//! verbs program has no channel for a provider's remarks but its standard error — where
//! libibverbs itself warns ("libibverbs: Warning: …") — so this is the one place the
//! library writes there: each line prefixed `rocelink-verbs:`, none at all with
//! `ROCELINK_VERBS_QUIET` set.

use std::io::Write;

/// The variable that silences the library's warnings.
pub const QUIET: &str = "ROCELINK_VERBS_QUIET";

/// Warn: one line on standard error, unless [`QUIET`] is set.
pub fn warn(msg: &str) {
    if std::env::var_os(QUIET).is_some() {
        return;
    }
    let _ = writeln!(std::io::stderr().lock(), "rocelink-verbs: {msg}");
}
