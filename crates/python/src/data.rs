//! Rust data to Python: a serialisable value (a session's summary, the counters table) as
//! the dict `json.loads` makes of its JSON — the same keys and values the CLI's `--json`
//! and the view show.

use crate::errors;
use pyo3::prelude::*;

/// `v` as Python data (dicts, lists, numbers, strings, None).
pub(crate) fn to_py<'py>(
    py: Python<'py>,
    v: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| errors::Error::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}
