//! Rust errors as the exceptions of `rocelink.errors`, their messages the whole chain of
//! causes (as the CLI prints them).

use pyo3::PyErr;
use std::error::Error as StdError;
use std::io;

pyo3::import_exception!(rocelink.errors, Error);
pyo3::import_exception!(rocelink.errors, ConfigError);
pyo3::import_exception!(rocelink.errors, TimeoutError);
pyo3::import_exception!(rocelink.errors, DeviceError);
pyo3::import_exception!(rocelink.errors, NetworkError);

/// `e` and each of its causes, joined by ": ".
pub(crate) fn chain(e: &dyn StdError) -> String {
    rocelink_runtime::session::error_text(e)
}

/// A bad argument.
pub(crate) fn config(msg: impl Into<String>) -> PyErr {
    ConfigError::new_err(msg.into())
}

/// A socket error: bad input is a ConfigError, the rest a NetworkError.
pub(crate) fn net(e: &io::Error) -> PyErr {
    match e.kind() {
        io::ErrorKind::InvalidInput => ConfigError::new_err(chain(e)),
        _ => NetworkError::new_err(chain(e)),
    }
}
