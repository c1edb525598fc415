//! `rocelink.ims`: the IMS buffer unit and worker; frames as numpy arrays.

use crate::errors::{self, NetworkError, TimeoutError, chain, config};
use crate::wait::{Waiting, next_item};
use numpy::ndarray::ArrayView1;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocelink_ims::session::unit::{FrameEvent, UnitSession, UnitSessionConfig};
use rocelink_ims::session::worker::{Frames, WorkerSession, WorkerSessionConfig};
use rocelink_ims::{Error, FrameQueue, Queued, Verify, WorkerConfig, WorkerState};
use rocelink_runtime::Session;
use rocelink_runtime::counters::Board;
use rocelink_view::Served;
use rocelink_wire::ims::{ImageGeometry, PixelDepth};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

fn ims_error(e: &Error) -> PyErr {
    let msg = chain(e);
    match e {
        Error::Bind { .. } | Error::Route(..) | Error::Io(_) | Error::Transport(_) => {
            NetworkError::new_err(msg)
        }
        Error::NoAnswer { .. } | Error::Silent { .. } => TimeoutError::new_err(msg),
        Error::Version { .. }
        | Error::Refused { .. }
        | Error::Full { .. }
        | Error::Closing
        | Error::SendFailed(_)
        | Error::Record { .. } => errors::Error::new_err(msg),
        _ => config(msg),
    }
}

fn ip(what: &str, s: &str) -> PyResult<IpAddr> {
    s.parse()
        .map_err(|_| config(format!("{what}: {s:?} is not an IP address")))
}

/// A contiguous uint8 view of any array (its bytes, in C order).
fn bytes_of<'py>(a: &Bound<'py, PyAny>) -> PyResult<PyReadonlyArray1<'py, u8>> {
    let np = a.py().import("numpy")?;
    let flat = np
        .call_method1("ascontiguousarray", (a,))?
        .call_method0("ravel")?
        .call_method1("view", ("u1",))?;
    flat.extract::<PyReadonlyArray1<'py, u8>>()
        .map_err(|_| config("send(): the frame must be a numpy array (or bytes-like)"))
}

/// An IMS buffer unit on background threads: workers register over its status channel,
/// stream frames into a ring of `ring` bytes each, every frame ACKed or NACKed; `frames()`
/// hands on each frame consumed (a copy of its bytes, the ring space freed at once).
/// `verify="header"` checks every frame's §4 header (CRC-32C and VA): `crc_ok`.
#[pyclass(module = "rocelink.ims")]
pub(crate) struct BufferUnit {
    session: Mutex<Option<UnitSession>>,
    local: SocketAddr,
    verify: Verify,
    /// The live view (`view=`) while it is served, and the frames published to it.
    view: Mutex<Option<(Served, u64)>>,
    view_url: Option<String>,
    notes: Vec<String>,
}

#[pymethods]
impl BufferUnit {
    #[new]
    #[pyo3(signature = (bind="127.0.0.1", port=4791, ring=64 << 20, verify="header", view=None, view_public=false, status_dscp=0, data_dscp=8))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        bind: &str,
        port: u16,
        ring: usize,
        verify: &str,
        view: Option<Bound<'_, PyAny>>,
        view_public: bool,
        status_dscp: u8,
        data_dscp: u8,
    ) -> PyResult<BufferUnit> {
        let mut cfg = UnitSessionConfig::new(ip("bind", bind)?);
        cfg.port = port;
        cfg.unit.ring_bytes = ring;
        cfg.unit.levels = rocelink_ims::ServiceLevels {
            status_dscp,
            data_dscp,
        };
        cfg.unit.verify = match verify {
            "header" => Verify::Header,
            "none" => Verify::None,
            v => return Err(config(format!("verify {v:?}: \"header\" or \"none\""))),
        };
        cfg.with_data = true;
        let verify = cfg.unit.verify;
        // the view first: a bad or taken address is an error before the unit binds
        let mut notes = Vec::new();
        let board = Board::new("python ims serve");
        let served = crate::view::serve(view.as_ref(), view_public, &mut notes, |at| {
            rocelink_ims::session::view::serve(at, "python ims serve", Some(board.clone()))
        })?;
        let s = py
            .detach(|| UnitSession::start(cfg, Some(board)))
            .map_err(|e| ims_error(&e))?;
        Ok(BufferUnit {
            local: s.local(),
            session: Mutex::new(Some(s)),
            verify,
            view_url: served.as_ref().map(crate::view::url),
            view: Mutex::new(served.map(|s| (s, 0))),
            notes,
        })
    }

    /// The live view's page (`view=`): the frames Python takes, as pictures when they are
    /// §4 images, the rates and counters, as `rocelink ims serve --view` shows them; None
    /// without a view.
    #[getter]
    fn view_url(&self) -> Option<String> {
        self.view_url.clone()
    }

    /// What was noticed while setting up (a view served on one interface's address).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Its address, `"IP:port"` (a `Worker`'s `server=`).
    #[getter]
    fn address(&self) -> String {
        self.local.to_string()
    }

    /// The frames consumed, as they come: `count` of them (None: until stopped);
    /// `rocelink.TimeoutError` when none comes within `timeout` seconds.
    #[pyo3(signature = (count=None, timeout=5.0))]
    fn frames(slf: Py<Self>, count: Option<u64>, timeout: f64) -> PyResult<UnitFrameIter> {
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(config(format!(
                "timeout: {timeout} is not a positive number of seconds"
            )));
        }
        Ok(UnitFrameIter {
            unit: slf,
            left: count,
            timeout: Duration::from_secs_f64(timeout),
        })
    }

    /// Stop; its summary as a dict (None the second time): the keys and values of
    /// `rocelink ims serve --json` (less its `counters`).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let s = self.session.lock().ok().and_then(|mut g| g.take());
        let Some(s) = s else { return Ok(None) };
        let served = self.view.lock().ok().and_then(|mut g| g.take());
        let sum = py.detach(|| {
            let sum = s.stop();
            // the pages following the view are told the run is over, with its counts
            if let (Some((v, _)), Ok(sum)) = (served, &sum) {
                v.end(rocelink_ims::session::view::summary(sum));
            }
            sum
        });
        let sum = sum.map_err(|e| ims_error(&e))?;
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

/// The iterator `BufferUnit.frames()` returns.
#[pyclass(module = "rocelink.ims")]
pub(crate) struct UnitFrameIter {
    unit: Py<BufferUnit>,
    left: Option<u64>,
    timeout: Duration,
}

#[pymethods]
impl UnitFrameIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<UnitFrame>> {
        if self.left == Some(0) {
            return Ok(None);
        }
        let unit = self.unit.bind(py).borrow();
        let w = Waiting {
            timeout: self.timeout,
            interrupted: &|py| {
                let _ = unit.stop(py);
            },
            ended: &|_| Ok(()),
            late: &|| {
                format!(
                    "no frame consumed at {} within {:.1} s",
                    unit.local,
                    self.timeout.as_secs_f64()
                )
            },
        };
        let session = &unit.session;
        let got = next_item(py, &w, |slice| match session.lock() {
            Ok(g) => match g.as_ref() {
                Some(s) => (s.next_event(slice), s.is_finished()),
                None => (None, true),
            },
            Err(_) => (None, true),
        })?;
        let Some(e) = got else { return Ok(None) };
        if let Some(n) = self.left.as_mut() {
            *n -= 1;
        }
        if let Ok(mut g) = unit.view.lock()
            && let Some((v, seen)) = g.as_mut()
        {
            *seen += 1;
            rocelink_ims::session::view::publish(v.live(), *seen, &e);
        }
        Ok(Some(UnitFrame {
            event: e,
            checked: unit.verify == Verify::Header,
        }))
    }
}

/// A frame the buffer unit consumed.
#[pyclass(module = "rocelink.ims", frozen)]
pub(crate) struct UnitFrame {
    event: FrameEvent,
    checked: bool,
}

#[pymethods]
impl UnitFrame {
    /// Where it landed in its worker's stream (the 64-bit VA).
    #[getter]
    fn va(&self) -> u64 {
        self.event.va
    }
    /// Its length in bytes.
    #[getter]
    fn length(&self) -> usize {
        self.event.len
    }
    /// The worker that sent it: (LID, QPN).
    #[getter]
    fn worker(&self) -> (u32, u32) {
        self.event.worker
    }
    /// Its §4 header (CRC-32C and VA) checked out (None with `verify="none"`).
    #[getter]
    fn crc_ok(&self) -> Option<bool> {
        self.checked.then_some(self.event.intact)
    }
    /// Its bytes as a read-only numpy uint8 array (no further copy).
    fn array<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let d: &[u8] = slf.get().event.data.as_deref().unwrap_or_default();
        // SAFETY: the bytes live in an `Arc<[u8]>` the frame owns and never changes or
        // frees while it lives; the array keeps the frame alive as its base object.
        let view = unsafe { ArrayView1::from_shape_ptr(d.len(), d.as_ptr()) };
        // SAFETY: as above.
        let a = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        a.getattr("flags")?.setattr("writeable", false)?;
        Ok(a)
    }
    fn __len__(&self) -> usize {
        self.event.len
    }
}

/// An IMS worker: registers with the buffer unit at `server` (`"IP[:port]"`), opens a
/// data channel and sends the frames given to `send()` (each up to `max_frame` bytes) as
/// UC RDMA WRITEs, each sent again on a NACK or a timeout until ACKed.
#[pyclass(module = "rocelink.ims")]
pub(crate) struct Worker {
    session: Mutex<Option<WorkerSession>>,
    queue: FrameQueue,
    cfg: WorkerConfig,
    max: usize,
    sent: Mutex<u64>,
    summary: Mutex<Option<Py<PyAny>>>,
}

#[pymethods]
impl Worker {
    #[new]
    #[pyo3(signature = (server="127.0.0.1", bind=None, port=None, max_frame=4 << 20, packet=None, status_dscp=0, data_dscp=8))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        server: &str,
        bind: Option<&str>,
        port: Option<u16>,
        max_frame: usize,
        packet: Option<usize>,
        status_dscp: u8,
        data_dscp: u8,
    ) -> PyResult<Worker> {
        let unit = match server.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => SocketAddr::new(ip("server", server)?, 4791),
        };
        let mut cfg = WorkerSessionConfig::new(unit, Frames::Queue { max_len: max_frame });
        cfg.local = bind.map(|b| ip("bind", b)).transpose()?;
        cfg.port = port;
        if let Some(p) = packet {
            cfg.worker.packet_bytes = p;
        }
        cfg.worker.in_flight = WorkerConfig::in_flight_for(max_frame);
        cfg.worker.levels = rocelink_ims::ServiceLevels {
            status_dscp,
            data_dscp,
        };
        let wcfg = cfg.worker;
        let s = py
            .detach(|| WorkerSession::start(cfg, None))
            .map_err(|e| ims_error(&e))?;
        let queue = s
            .queue()
            .cloned()
            .ok_or_else(|| errors::Error::new_err("the worker has no frame queue"))?;
        Ok(Worker {
            session: Mutex::new(Some(s)),
            queue,
            cfg: wcfg,
            max: max_frame,
            sent: Mutex::new(0),
            summary: Mutex::new(None),
        })
    }

    /// Send `frame` (any numpy array: its bytes); with `wait`, return once it is ACKed
    /// (raises if the unit refuses it for good or goes silent).
    #[pyo3(signature = (frame, wait=true))]
    fn send(&self, py: Python<'_>, frame: &Bound<'_, PyAny>, wait: bool) -> PyResult<()> {
        let b = bytes_of(frame)?;
        let v = b.as_slice().map_err(|e| config(e.to_string()))?.to_vec();
        self.push(py, Queued::Bytes(v), wait)
    }

    /// Send a §4 image of 6-bit pixels: `image` is uint8 (rows, columns), each < 64;
    /// encoded column by column with its VA and CRC-32C.
    #[pyo3(signature = (image, wait=true))]
    fn send_image6(&self, py: Python<'_>, image: &Bound<'_, PyAny>, wait: bool) -> PyResult<()> {
        self.image(py, image, PixelDepth::Six, wait)
    }

    /// As `send_image6`, 4-bit pixels (each < 16).
    #[pyo3(signature = (image, wait=true))]
    fn send_image4(&self, py: Python<'_>, image: &Bound<'_, PyAny>, wait: bool) -> PyResult<()> {
        self.image(py, image, PixelDepth::Four, wait)
    }

    /// Frames ACKed so far.
    #[getter]
    fn acked(&self) -> u64 {
        self.session
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.progress().stats.frames))
            .unwrap_or(0)
    }

    /// Close the channels once every frame sent is ACKed; the worker's summary as a dict:
    /// the keys and values of `rocelink ims send --json` (less its `counters`).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.queue.close();
        let s = self.session.lock().ok().and_then(|mut g| g.take());
        if let Some(s) = s {
            let sum = py.detach(|| s.wait()).map_err(|e| ims_error(&e))?;
            let d = crate::data::to_py(py, &sum)?;
            if let Ok(mut g) = self.summary.lock() {
                *g = Some(d.clone().unbind());
            }
            if let Some(f) = sum.failure() {
                return Err(errors::Error::new_err(f));
            }
        }
        let g = self
            .summary
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|d| d.clone_ref(py)));
        Ok(g.map_or_else(|| PyDict::new(py).into_any(), |d| d.into_bound(py)))
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

impl Worker {
    fn image(
        &self,
        py: Python<'_>,
        image: &Bound<'_, PyAny>,
        depth: PixelDepth,
        wait: bool,
    ) -> PyResult<()> {
        let shape: Vec<usize> = image.getattr("shape")?.extract()?;
        let [rows, columns] = shape[..] else {
            return Err(config(format!(
                "an image is 2-D (rows, columns), not {shape:?}"
            )));
        };
        // §4 is column-major: the transpose, in C order
        let t = image.getattr("T")?;
        let b = bytes_of(&t)?;
        let pixels = b.as_slice().map_err(|e| config(e.to_string()))?.to_vec();
        if pixels.len() != rows * columns {
            return Err(config("the image must be uint8"));
        }
        let bits = if depth == PixelDepth::Six { 6 } else { 4 };
        let max = (1u8 << bits) - 1;
        if let Some(p) = pixels.iter().find(|&&p| p > max) {
            return Err(config(format!(
                "pixel value {p} is over the {bits}-bit maximum {max}"
            )));
        }
        let geometry = ImageGeometry { columns, rows };
        self.push(
            py,
            Queued::Image {
                pixels,
                geometry,
                depth,
            },
            wait,
        )
    }

    fn push(&self, py: Python<'_>, f: Queued, wait: bool) -> PyResult<()> {
        let n = f.len();
        if n > self.max {
            return Err(config(format!(
                "a frame of {n} bytes is over max_frame ({} bytes)",
                self.max
            )));
        }
        self.cfg.check(n).map_err(|e| config(chain(&e)))?;
        if !self.queue.push(f) {
            return Err(errors::Error::new_err("the worker was stopped"));
        }
        let k = {
            let mut g = self
                .sent
                .lock()
                .map_err(|_| errors::Error::new_err("poisoned"))?;
            *g += 1;
            *g
        };
        if wait {
            self.wait_acked(py, k)?;
        }
        Ok(())
    }

    /// Until `k` frames are ACKed, or the worker ended.
    fn wait_acked(&self, py: Python<'_>, k: u64) -> PyResult<()> {
        loop {
            let (acked, state, finished) = {
                let g = self
                    .session
                    .lock()
                    .map_err(|_| errors::Error::new_err("poisoned"))?;
                let Some(s) = g.as_ref() else {
                    return Err(errors::Error::new_err("the worker was stopped"));
                };
                let p = s.progress();
                (p.stats.frames, p.state, s.is_finished())
            };
            if acked >= k {
                return Ok(());
            }
            if finished || matches!(state, Some(WorkerState::Failed(_))) {
                self.stop(py)?;
                return Err(errors::Error::new_err(
                    "the worker ended before the frame was ACKed",
                ));
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(1)));
            if let Err(e) = py.check_signals() {
                let _ = self.stop(py);
                return Err(e);
            }
        }
    }
}
