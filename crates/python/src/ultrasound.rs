//! `rocelink.ultrasound`: the probe (shots of echo data as UD SENDs) and the host that
//! triggers it and reassembles every shot; shots as numpy arrays.

use crate::errors::{self, NetworkError, TimeoutError, chain, config};
use crate::wait::{Waiting, next_item};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocelink_runtime::Session;
use rocelink_ultrasound::session::LinkAddrs;
use rocelink_ultrasound::session::probe::{ProbeSession, ProbeSessionConfig};
use rocelink_ultrasound::session::shots::{ShotEvent, ShotsConfig, ShotsSession, ShotsSummary};
use rocelink_ultrasound::session::view::Publisher;
use rocelink_ultrasound::{Error, Geometry};
use rocelink_view::Served;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ip(what: &str, s: &str) -> PyResult<IpAddr> {
    s.parse()
        .map_err(|_| config(format!("{what}: {s:?} is not an IP address")))
}

fn geometry(channels: u16, samples: u32) -> PyResult<Geometry> {
    let g = Geometry::new(samples, channels);
    g.check().map_err(|e| config(chain(&e)))?;
    Ok(g)
}

fn us_error(e: &Error) -> PyErr {
    let msg = chain(e);
    match e {
        Error::Bind { .. } | Error::Io { .. } | Error::Transport(_) => NetworkError::new_err(msg),
        Error::NoShot { .. } => TimeoutError::new_err(msg),
        Error::Record { .. } | Error::Panicked(_) => errors::Error::new_err(msg),
        _ => config(msg),
    }
}

/// An emulated ultrasound probe on background threads: on a trigger from a host it sends
/// shots of `samples` × `channels` 12-bit echo samples (seeded, so a host can check them)
/// from `bind`:`port`, and takes trigger commands on `trigger_port`.
#[pyclass(module = "rocelink.ultrasound")]
pub(crate) struct Probe {
    session: Mutex<Option<ProbeSession>>,
    triggers: SocketAddr,
}

#[pymethods]
impl Probe {
    #[new]
    #[pyo3(signature = (bind="127.0.0.1", channels=96, samples=2000, port=4791, trigger_port=4792, seed=1, trigger_hz=1000.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        bind: &str,
        channels: u16,
        samples: u32,
        port: u16,
        trigger_port: u16,
        seed: u64,
        trigger_hz: f64,
    ) -> PyResult<Probe> {
        let g = geometry(channels, samples)?;
        if !(trigger_hz > 0.0 && trigger_hz.is_finite()) {
            return Err(config(format!(
                "trigger_hz: {trigger_hz} is not a positive rate"
            )));
        }
        let cfg = ProbeSessionConfig {
            links: LinkAddrs {
                addrs: vec![ip("bind", bind)?],
                port,
                chosen: true,
            },
            trigger_port,
            seed,
            trigger_hz,
            ..ProbeSessionConfig::new(g)
        };
        let s = py
            .detach(|| ProbeSession::start(cfg, None))
            .map_err(|e| us_error(&e))?;
        let triggers = s.links()[0].triggers;
        Ok(Probe {
            session: Mutex::new(Some(s)),
            triggers,
        })
    }

    /// Where it takes trigger commands, `"IP:port"` (a `Host`'s `probe=`).
    #[getter]
    fn trigger_addr(&self) -> String {
        self.triggers.to_string()
    }

    /// Stop; what it sent, as a dict (None the second time).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let s = self.session.lock().ok().and_then(|mut g| g.take());
        let Some(s) = s else { return Ok(None) };
        let sum = py.detach(|| s.stop()).map_err(|e| us_error(&e))?;
        crate::data::to_py(py, &sum).map(Some)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<Bound<'_, PyAny>>,
        _v: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }
}

/// The ultrasound host: `shots()` triggers the probe at `probe` (`"IP:port"` of its trigger
/// port) and hands each shot on, reassembled from its UD SENDs; the probe's geometry
/// (`channels`, `samples`) must be given, as the host's buffers are sized by it.
#[pyclass(module = "rocelink.ultrasound")]
pub(crate) struct Host {
    cfg: ShotsConfig,
    running: Arc<Mutex<Option<ShotsSession>>>,
    /// The summary of the last run that ended (what `stop()` returns).
    last: Arc<Mutex<Option<ShotsSummary>>>,
    /// The live view (`view=`), across every `shots()` run until `stop()`.
    view: Arc<Mutex<Option<ShotsView>>>,
    view_url: Option<String>,
    notes: Vec<String>,
}

/// A host's live view: what serves it, what publishes shots to it, and the last run's
/// counts (what it ends with).
struct ShotsView {
    served: Served,
    publisher: Publisher,
    last: Value,
}

#[pymethods]
impl Host {
    #[new]
    #[pyo3(signature = (probe="127.0.0.1:4792", bind="127.0.0.2", channels=96, samples=2000, port=4791, seed=Some(1), view=None, view_public=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        probe: &str,
        bind: &str,
        channels: u16,
        samples: u32,
        port: u16,
        seed: Option<u64>,
        view: Option<Bound<'_, PyAny>>,
        view_public: bool,
    ) -> PyResult<Host> {
        let g = geometry(channels, samples)?;
        let probe: SocketAddr = probe
            .parse()
            .map_err(|_| config(format!("probe: {probe:?} is not IP:port")))?;
        let cfg = ShotsConfig {
            links: LinkAddrs {
                addrs: vec![ip("bind", bind)?],
                port,
                chosen: true,
            },
            probes: vec![probe],
            verify_seed: seed,
            with_data: true,
            ..ShotsConfig::new(g)
        };
        let mut notes = Vec::new();
        let served = crate::view::serve(view.as_ref(), view_public, &mut notes, |at| {
            rocelink_ultrasound::session::view::serve(at, "python shots", &g, None)
        })?;
        Ok(Host {
            cfg,
            running: Arc::new(Mutex::new(None)),
            last: Arc::new(Mutex::new(None)),
            view_url: served.as_ref().map(crate::view::url),
            view: Arc::new(Mutex::new(served.map(|served| ShotsView {
                served,
                publisher: Publisher::default(),
                last: Value::Null,
            }))),
            notes,
        })
    }

    /// The live view's page (`view=`): each shot Python takes as a picture (samples by
    /// channels), the rates and losses, as `rocelink shots --view` shows them; None without
    /// a view. It serves until `stop()`.
    #[getter]
    fn view_url(&self) -> Option<String> {
        self.view_url.clone()
    }

    /// What was noticed while setting up (a view served on one interface's address).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Trigger the probe (at `trigger_hz`, None: its own rate) and iterate over `count`
    /// shots (None: until stopped); `rocelink.TimeoutError` when none comes within
    /// `timeout` seconds.
    #[pyo3(signature = (count=None, trigger_hz=None, timeout=5.0))]
    fn shots(
        &self,
        py: Python<'_>,
        count: Option<u64>,
        trigger_hz: Option<f64>,
        timeout: f64,
    ) -> PyResult<ShotIter> {
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(config(format!(
                "timeout: {timeout} is not a positive number of seconds"
            )));
        }
        if trigger_hz.is_some_and(|h| !(h > 0.0 && h.is_finite())) {
            return Err(config("trigger_hz must be a positive rate"));
        }
        stop_running(py, &self.running, &self.view, &self.last)?;
        let cfg = ShotsConfig {
            trigger_hz,
            shots: count,
            ..self.cfg.clone()
        };
        let s = py
            .detach(|| ShotsSession::start(cfg, None))
            .map_err(|e| us_error(&e))?;
        if let Ok(mut g) = self.running.lock() {
            *g = Some(s);
        }
        Ok(ShotIter {
            running: self.running.clone(),
            view: self.view.clone(),
            last: self.last.clone(),
            left: count,
            timeout: Duration::from_secs_f64(timeout),
            geometry: self.cfg.geometry,
        })
    }

    /// Stop the shots running now (if any) and the live view; the last run's summary as a
    /// dict (`rocelink shots --json`'s summary, less `counters`), None if none ran since.
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let r = stop_running(py, &self.running, &self.view, &self.last);
        let view = self.view.lock().ok().and_then(|mut g| g.take());
        if let Some(v) = view {
            // the pages following it are told the run is over, with the last run's counts
            py.detach(|| v.served.end(v.last));
        }
        r?;
        let last = self.last.lock().ok().and_then(|mut g| g.take());
        last.map(|sum| crate::data::to_py(py, &sum)).transpose()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        t: Option<Bound<'_, PyAny>>,
        _v: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let r = self.stop(py);
        if t.is_none() {
            r?;
        }
        Ok(false)
    }
}

/// Stop the run (if any), keeping its summary in `last` and for the view's end.
fn stop_running(
    py: Python<'_>,
    running: &Mutex<Option<ShotsSession>>,
    view: &Mutex<Option<ShotsView>>,
    last: &Mutex<Option<ShotsSummary>>,
) -> PyResult<()> {
    let s = running.lock().ok().and_then(|mut g| g.take());
    let Some(s) = s else { return Ok(()) };
    let sum = py.detach(|| s.stop()).map_err(|e| us_error(&e))?;
    if let Ok(mut g) = view.lock()
        && let Some(v) = g.as_mut()
    {
        v.last = rocelink_ultrasound::session::view::summary(&sum);
    }
    if let Ok(mut g) = last.lock() {
        *g = Some(sum);
    }
    Ok(())
}

/// The iterator `Host.shots()` returns.
#[pyclass(module = "rocelink.ultrasound")]
pub(crate) struct ShotIter {
    running: Arc<Mutex<Option<ShotsSession>>>,
    view: Arc<Mutex<Option<ShotsView>>>,
    last: Arc<Mutex<Option<ShotsSummary>>>,
    left: Option<u64>,
    timeout: Duration,
    geometry: Geometry,
}

impl ShotIter {
    fn next_event(&self, py: Python<'_>) -> PyResult<Option<ShotEvent>> {
        let w = Waiting {
            timeout: self.timeout,
            interrupted: &|py| {
                let _ = stop_running(py, &self.running, &self.view, &self.last);
            },
            ended: &|py| stop_running(py, &self.running, &self.view, &self.last),
            late: &|| format!("no shot within {:.1} s", self.timeout.as_secs_f64()),
        };
        next_item(py, &w, |slice| match self.running.lock() {
            Ok(g) => match g.as_ref() {
                Some(s) => (s.next_event(slice), s.is_finished()),
                None => (None, true),
            },
            Err(_) => (None, true),
        })
    }
}

#[pymethods]
impl ShotIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Shot>> {
        if self.left == Some(0) {
            stop_running(py, &self.running, &self.view, &self.last)?;
            return Ok(None);
        }
        let Some(e) = self.next_event(py)? else {
            return Ok(None);
        };
        if let Some(n) = self.left.as_mut() {
            *n -= 1;
        }
        if let Ok(mut g) = self.view.lock()
            && let Some(v) = g.as_mut()
        {
            v.publisher.shot(v.served.live(), &e);
        }
        Ok(Some(Shot {
            event: e,
            geometry: self.geometry,
        }))
    }
}

/// One shot: `array()` is its samples as uint16 (samples, channels), unpacked.
#[pyclass(module = "rocelink.ultrasound", frozen)]
pub(crate) struct Shot {
    event: ShotEvent,
    geometry: Geometry,
}

#[pymethods]
impl Shot {
    /// The shot number.
    #[getter]
    fn number(&self) -> u64 {
        self.event.report.shot
    }
    /// Every message of it arrived.
    #[getter]
    fn complete(&self) -> bool {
        self.event.report.complete
    }
    /// Messages missing.
    #[getter]
    fn missing(&self) -> u32 {
        self.event.report.missing
    }
    /// Its samples match the probe's seeded echoes (None: not checked, or incomplete).
    #[getter]
    fn verified(&self) -> Option<bool> {
        self.event.outcome.verified
    }
    /// Everything known of it as a dict, as `rocelink shots --json` prints each shot (link,
    /// shot, bytes, messages, missing, complete, verified, recorded, dropped, moved,
    /// t_trigger_ns, t_complete_ns).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::data::to_py(py, &self.event)
    }
    /// The packed bytes (12-bit samples, two channels in three bytes) as numpy uint8;
    /// None for an incomplete shot.
    fn raw<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<u8>>> {
        self.event
            .data
            .as_deref()
            .map(|d| PyArray1::from_slice(py, d))
    }
    /// The samples as uint16 (samples, channels); `rocelink.Error` for an incomplete shot.
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(raw) = self.raw(py) else {
            return Err(errors::Error::new_err(format!(
                "shot {} is incomplete ({} messages missing): no samples",
                self.event.report.shot, self.event.report.missing
            )));
        };
        let g = self.geometry;
        let geo = PyDict::new(py);
        geo.set_item("layout", "csi-raw12")?;
        geo.set_item("width", g.channels)?;
        geo.set_item("height", g.samples)?;
        geo.set_item("bits", 12)?;
        geo.set_item("start_byte", 0)?;
        geo.set_item("bytes_per_line", g.row_bytes())?;
        py.import("rocelink._image")?
            .getattr("unpack")?
            .call1((raw, geo))
    }

    fn __repr__(&self) -> String {
        format!(
            "rocelink.ultrasound.Shot(number={}, complete={})",
            self.event.report.shot,
            if self.event.report.complete {
                "True"
            } else {
                "False"
            }
        )
    }
}
