//! `view=`: a session's live view in the browser, as the CLI's `--view` serves it (the same
//! page; loopback unless asked otherwise).

use crate::errors::config;
use pyo3::prelude::*;
use rocelink_view::Served;
use rocelink_web::{Exposure, check_addr};
use std::net::SocketAddr;

/// Serve the view `start` makes at the address `view` names (see [`addr`]), if one was
/// given: a bad address is a `ConfigError`, one that cannot be bound a `NetworkError`.
pub(crate) fn serve(
    view: Option<&Bound<'_, PyAny>>,
    public: bool,
    notes: &mut Vec<String>,
    start: impl FnOnce(SocketAddr) -> std::io::Result<Served>,
) -> PyResult<Option<Served>> {
    let Some(v) = view else {
        return Ok(None);
    };
    let at = addr(v, public, notes)?;
    start(at).map(Some).map_err(|e| crate::errors::net(&e))
}

/// The page of a served view.
pub(crate) fn url(s: &Served) -> String {
    format!("http://{}/", s.addr())
}

/// Where to serve a view: `view` is a port (on 127.0.0.1), or "IP:PORT" ("PORT" too); a
/// wildcard address only with `public`. A warning for one interface's address goes to
/// `notes`.
pub(crate) fn addr(
    view: &Bound<'_, PyAny>,
    public: bool,
    notes: &mut Vec<String>,
) -> PyResult<SocketAddr> {
    let local = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let addr = match view.extract::<u16>() {
        Ok(port) => local(port),
        Err(_) => {
            let s: String = view
                .extract()
                .map_err(|_| config("view: a port (int) or \"IP:PORT\""))?;
            match s.parse::<u16>() {
                Ok(port) => local(port),
                Err(_) => s
                    .parse()
                    .map_err(|_| config(format!("view: {s:?} is not PORT or IP:PORT")))?,
            }
        }
    };
    if addr.ip().is_unspecified() && !public {
        return Err(config(format!(
            "view {addr} would serve every interface: give a loopback or one interface's address, or view_public=True"
        )));
    }
    let exposure = if public {
        Exposure::Public
    } else {
        Exposure::Local
    };
    if let Ok(Some(w)) = check_addr(addr, exposure, "view") {
        notes.push(w);
    }
    Ok(addr)
}
