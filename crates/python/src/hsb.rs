//! `rocelink.hsb`: the HSB emulator and the HSB host receiver, frames as numpy arrays.

use crate::errors::{self, DeviceError, NetworkError, chain, config};
use crate::wait::{Waiting, next_item};
use numpy::PyArray1;
use numpy::ndarray::ArrayView1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, EmulatorSession, Pacing};
use rocelink_hsb::host::bring_up::BringUp;
use rocelink_hsb_host::session::{Coe, Device, HostConfig, HostError, HostSession};
use rocelink_hsb_host::{
    Delivered, FrameSink, Handed, Handoff, Limits, RecordSink, SessionError, TakeError, Taker,
    ViewSink,
};
use rocelink_runtime::Session;
use rocelink_runtime::counters::Board;
use rocelink_view::Served;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

fn ipv4(what: &str, s: &str) -> PyResult<Ipv4Addr> {
    s.parse()
        .map_err(|_| config(format!("{what}: {s:?} is not an IPv4 address")))
}

fn sensor_spec(s: &str) -> PyResult<SensorSpec> {
    s.parse().map_err(|e| config(format!("sensor: {e}")))
}

/// An emulated HSB device on background threads: ECB on `ip`:`control_port`, streaming
/// `sensor` frames at `fps` to whatever host configures it. Use it in a `with` block, or
/// call `stop()`.
#[pyclass(module = "rocelink.hsb")]
pub(crate) struct Emulator {
    session: Mutex<Option<EmulatorSession>>,
    control: SocketAddr,
    /// The device's notes (the latest [`NOTES_KEPT`]).
    notes: std::sync::Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Notes an emulator keeps for `stop()`'s dict.
const NOTES_KEPT: usize = 64;

#[pymethods]
impl Emulator {
    #[new]
    #[pyo3(signature = (ip="127.0.0.2", sensor="pattern", fps=30.0, frame_size=None, control_port=8192, allow=None))]
    fn new(
        py: Python<'_>,
        ip: &str,
        sensor: &str,
        fps: f64,
        frame_size: Option<usize>,
        control_port: u16,
        allow: Option<Vec<String>>,
    ) -> PyResult<Emulator> {
        let ip = ipv4("ip", ip)?;
        if !(fps > 0.0 && fps <= 100_000.0) {
            return Err(config(format!("fps: {fps} is not in (0, 100000]")));
        }
        let mut cfg = EmulatorConfig::new(DeviceConfig::new(ip));
        cfg.control_port = control_port;
        cfg.bootp_target = None;
        cfg.sensor = sensor_spec(sensor)?
            .source(frame_size)
            .map_err(|e| config(format!("sensor: {e}")))?;
        cfg.pacing = Pacing::Fps(fps);
        // loopback and the device's subnet unless told ("0.0.0.0/0": every host)
        if let Some(given) = allow {
            let given = given
                .iter()
                .map(|p| p.parse().map_err(|e| config(format!("allow: {p}: {e}"))))
                .collect::<PyResult<Vec<rocelink_io::prefix::Prefix>>>()?;
            cfg.allow = rocelink_hsb::emulator::allow_list(ip, &given);
        }
        let notes = std::sync::Arc::new(Mutex::new(std::collections::VecDeque::new()));
        let kept = notes.clone();
        let lent = rocelink_hsb::emulator::Handles {
            notes: rocelink_runtime::Notes::to(move |n| {
                if let Ok(mut q) = kept.lock() {
                    if q.len() == NOTES_KEPT {
                        q.pop_front();
                    }
                    q.push_back(n.to_owned());
                }
            }),
            ..Default::default()
        };
        let session = py
            .detach(|| EmulatorSession::start(&cfg, lent))
            .map_err(|e| errors::net(&e))?;
        Ok(Emulator {
            control: session.control_addr(),
            session: Mutex::new(Some(session)),
            notes,
        })
    }

    /// The device's ECB address, `"IP:port"`.
    #[getter]
    fn control_addr(&self) -> String {
        self.control.to_string()
    }

    /// Stop streaming and serving; what the device did, as a dict: the emulator's summary
    /// (`rocelink emulate --json`'s keys and values, less `counters`) and its `notes`.
    /// Stopping twice is harmless (the second returns None).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let s = self.session.lock().ok().and_then(|mut g| g.take());
        let Some(s) = s else { return Ok(None) };
        let st = py.detach(|| s.stop()).map_err(|e| errors::net(&e))?;
        let d = crate::data::to_py(py, &st)?;
        let notes: Vec<String> = self
            .notes
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        d.set_item("notes", notes)?;
        Ok(Some(d))
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

    fn __repr__(&self) -> String {
        format!(
            "rocelink.hsb.Emulator(control_addr={:?})",
            self.control.to_string()
        )
    }
}

/// A port's sink: the recording (if any), the live view (if any), then the hand-off to
/// Python.
struct PySink {
    handoff: Handoff,
    record: Option<RecordSink>,
    view: Option<ViewSink>,
}

impl FrameSink for PySink {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        if let Some(r) = self.record.as_mut() {
            r.frame(d)?;
        }
        if let Some(v) = self.view.as_mut() {
            v.frame(d)?;
        }
        self.handoff.frame(d)
    }
    fn finish(&mut self) -> Result<(), SessionError> {
        match self.record.as_mut() {
            Some(r) => r.finish(),
            None => Ok(()),
        }
    }
}

/// The HSB host: configures the device at `device` over ECB (and its camera, with
/// `camera="imx274"`), receives each virtual port on a thread of its own, verifies every
/// frame, and hands them to `frames()`. Frames Python does not take in time are dropped,
/// never waited for (`dropped` counts them). With `coe="IFACE"` the device is told to send
/// Camera over Ethernet frames (channel `coe_channel`) to that interface instead of RoCE.
#[pyclass(module = "rocelink.hsb")]
pub(crate) struct Receiver {
    session: Mutex<Option<HostSession<PySink>>>,
    taker: Mutex<Taker>,
    device: Ipv4Addr,
    geometry: Option<rocelink_hsb::catalogue::ImageGeometry>,
    notes: Vec<String>,
    board: Board,
    summary: Mutex<Option<Py<PyAny>>>,
    /// The live view, while it is served.
    view: Mutex<Option<Served>>,
    /// Its page.
    view_url: Option<String>,
}

fn host_error(e: &HostError) -> PyErr {
    let msg = chain(e);
    match e {
        HostError::Xdp { .. }
        | HostError::Receiver { .. }
        | HostError::CoeReceiver { .. }
        | HostError::Control(_) => NetworkError::new_err(msg),
        HostError::Silent { .. }
        | HostError::Configure { .. }
        | HostError::BringUp { .. }
        | HostError::Frames { .. } => DeviceError::new_err(msg),
        HostError::Pin { .. } | HostError::Thread { .. } => errors::Error::new_err(msg),
        _ => config(msg),
    }
}

/// The camera asked for and its mode (the IMX274's 4K RAW10 unless told).
fn camera_mode(
    camera: Option<&str>,
    mode: Option<String>,
) -> PyResult<Option<rocelink_hsb::sensor::Imx274Mode>> {
    Ok(match (camera, mode) {
        (None, Some(_)) => return Err(config("mode needs camera=\"imx274\"")),
        (None, None) => None,
        (Some("imx274"), m) => Some(match m {
            None => rocelink_hsb::sensor::Imx274Mode::P2160Raw10,
            Some(m) => rocelink_hsb::imx274::parse_mode(&m).ok_or_else(|| {
                config(format!(
                    "mode {m}: IMX274 modes are 0/4k-raw10, 1/1080p-raw10, 2/4k-raw12"
                ))
            })?,
        }),
        (Some(c), _) => return Err(config(format!("camera {c:?}: the camera is \"imx274\""))),
    })
}

/// The sensor whose frames come: the camera's mode, the sensor named (they must agree),
/// or HSB's IMX274 in 1080p RAW10 when neither nor a frame size is given (as the CLI).
fn sensor_of(
    cam: Option<rocelink_hsb::sensor::Imx274Mode>,
    sensor: Option<&str>,
    frame_size: Option<usize>,
) -> PyResult<Option<SensorSpec>> {
    Ok(match (cam, sensor) {
        (Some(m), Some(s)) if sensor_spec(s)? != SensorSpec::Imx274(m) => {
            return Err(config(format!(
                "sensor {s:?} disagrees with the camera mode"
            )));
        }
        (Some(m), _) => Some(SensorSpec::Imx274(m)),
        (None, Some(s)) => Some(sensor_spec(s)?),
        // as the CLI: HSB's IMX274 in 1080p RAW10 unless told the frame size
        (None, None) if frame_size.is_none() => Some(SensorSpec::Imx274(
            rocelink_hsb::sensor::Imx274Mode::P1080Raw10,
        )),
        (None, None) => None,
    })
}

/// The frame size: given, or the sensor's (they must agree).
fn frame_len(
    frame_size: Option<usize>,
    spec: Option<&SensorSpec>,
    sensor: Option<&str>,
) -> PyResult<usize> {
    Ok(match (frame_size, spec.and_then(SensorSpec::frame_len)) {
        (Some(f), Some(s)) if f != s => {
            return Err(config(format!(
                "frame_size {f} disagrees with the sensor ({s} bytes)"
            )));
        }
        (Some(0), _) => return Err(config("frame_size must be > 0")),
        (Some(f), _) | (None, Some(f)) => f,
        (None, None) => {
            return Err(config(format!(
                "sensor {:?} has no fixed frame size: give frame_size=",
                sensor.unwrap_or_default()
            )));
        }
    })
}

/// Everything a [`Receiver`] is asked for, checked.
struct ReceiverArgs {
    cfg: HostConfig,
    sensor: Option<SensorSpec>,
    record: Option<String>,
}

#[allow(clippy::too_many_arguments)]
fn receiver_args(
    device: &str,
    frame_size: Option<usize>,
    pages: u32,
    sensor: Option<&str>,
    camera: Option<&str>,
    mode: Option<String>,
    vps: Vec<u32>,
    bind: Option<&str>,
    port: u16,
    mtu: Option<u32>,
    xdp: Option<String>,
    record: Option<String>,
    coe: Option<(String, u8)>,
) -> PyResult<ReceiverArgs> {
    let dev = ipv4("device", device)?;
    let cam = camera_mode(camera, mode)?;
    let spec = sensor_of(cam, sensor, frame_size)?;
    let frame = frame_len(frame_size, spec.as_ref(), sensor)?;
    let mut cfg = match coe {
        Some((ifname, channel)) => {
            if bind.is_some() || port != 0 {
                return Err(config(
                    "bind and port are RoCE's: Camera over Ethernet frames arrive on the coe interface",
                ));
            }
            let mut c = Coe::on(&ifname);
            c.channel = channel;
            if let Some(g) = spec.as_ref().and_then(SensorSpec::image) {
                c.line_bytes = g.width;
            }
            HostConfig::coe(Device::ecb(dev), c, frame)
        }
        None => roce_config(dev, frame, vps.len(), bind, port)?,
    };
    cfg.vps = vps;
    cfg.pages = pages;
    // the link's MTU unless given (HostConfig::new); the range is checked at start
    if let Some(m) = mtu {
        cfg.mtu = m;
    }
    cfg.xdp = xdp.map(|ifname| rocelink_hsb_host::session::Xdp {
        ifname,
        queues: vec![0],
        mode: rocelink_io::xdp::XdpMode::Auto,
        pfc: None,
    });
    cfg.bring_up = BringUp {
        ptp: None,
        camera: cam,
    };
    // Python's frames() has the timeout users see; the port waits as long as it lives
    cfg.limits = Limits::unlimited().with_timeout(Duration::from_secs(365 * 86_400));
    cfg.check(cfg.vps.len()).map_err(|e| host_error(&e))?;
    Ok(ReceiverArgs {
        cfg,
        sensor: spec,
        record,
    })
}

/// RoCE from `dev`, received at `bind` (or the address that routes to it) and `port`.
fn roce_config(
    dev: Ipv4Addr,
    frame: usize,
    vps: usize,
    bind: Option<&str>,
    port: u16,
) -> PyResult<HostConfig> {
    // several virtual ports take consecutive ports: from RoCE's own unless told
    let port = match (vps, port) {
        (n, 0) if n > 1 => 4791,
        (_, p) => p,
    };
    let ip = match bind {
        Some(b) => IpAddr::V4(ipv4("bind", b)?),
        None => rocelink_io::udp::local_ip_for(IpAddr::V4(dev))
            .map_err(|e| config(format!("no route to device {dev} ({e}): give bind=")))?,
    };
    Ok(HostConfig::new(
        Device::ecb(dev),
        SocketAddr::new(ip, port),
        frame,
    ))
}

/// One sink per virtual port: the hand-off to Python, the recording (`DIR`, or `DIR-vpN`
/// with several ports) and the live view when asked for.
fn py_sinks(a: &ReceiverArgs, handoff: &Handoff, served: Option<&Served>) -> PyResult<Vec<PySink>> {
    let frame = a.cfg.frame_size;
    let mut sinks = Vec::new();
    for &vp in &a.cfg.vps {
        let record = match &a.record {
            Some(dir) => {
                let dir = match a.cfg.vps.len() {
                    1 => std::path::PathBuf::from(dir),
                    _ => rocelink_hsb_host::session::suffixed(dir.as_ref(), vp),
                };
                let rc = RecordSink::config(dir, a.sensor.as_ref(), frame);
                Some(RecordSink::start(rc).map_err(|e| config(chain(&e)))?)
            }
            None => None,
        };
        sinks.push(PySink {
            handoff: handoff.for_vp(vp),
            record,
            view: served.map(|s| ViewSink::new(s.live().clone(), vp)),
        });
    }
    Ok(sinks)
}

#[pymethods]
impl Receiver {
    #[new]
    #[pyo3(signature = (device, frame_size=None, pages=4, sensor=None, camera=None, mode=None, vps=vec![0], bind=None, port=0, mtu=None, xdp=None, record=None, depth=None, view=None, view_public=false, coe=None, coe_channel=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: &str,
        frame_size: Option<usize>,
        pages: u32,
        sensor: Option<&str>,
        camera: Option<&str>,
        mode: Option<Bound<'_, PyAny>>,
        vps: Vec<u32>,
        bind: Option<&str>,
        port: u16,
        mtu: Option<u32>,
        xdp: Option<String>,
        record: Option<String>,
        depth: Option<usize>,
        view: Option<Bound<'_, PyAny>>,
        view_public: bool,
        coe: Option<String>,
        coe_channel: u8,
    ) -> PyResult<Receiver> {
        // a mode by HSB's number (1) or name ("1080p-raw10")
        let mode = mode.map(|m| m.str().map(|s| s.to_string())).transpose()?;
        let a = receiver_args(
            device,
            frame_size,
            pages,
            sensor,
            camera,
            mode,
            vps,
            bind,
            port,
            mtu,
            xdp,
            record,
            coe.map(|i| (i, coe_channel)),
        )?;
        if pages < 2 {
            return Err(config(
                "pages must be at least 2: one lent to Python, one filling",
            ));
        }
        // frames waiting for Python: fewer than the pages, so a page is always free to fill
        let depth = depth
            .unwrap_or(pages as usize / 2)
            .clamp(1, pages as usize - 1);
        let (handoff, taker) = Handoff::new(depth);
        let frame = a.cfg.frame_size;
        let mut notes = Vec::new();
        let board = Board::new("python receive");
        // the view first: a taken port is an error before the device is touched
        let served = crate::view::serve(view.as_ref(), view_public, &mut notes, |at| {
            let sensor = a.sensor.as_ref();
            rocelink_hsb_host::view::serve(at, "python receive", sensor, frame, Some(board.clone()))
        })?;
        let sinks = py_sinks(&a, &handoff, served.as_ref())?;
        drop(handoff);
        let dev = a.cfg.device.ip();
        let b = board.clone();
        let session = py
            .detach(|| {
                HostSession::start(a.cfg, sinks, Some(b), &mut |n| notes.push(n.to_string()))
            })
            .map_err(|e| host_error(&e))?;
        Ok(Receiver {
            session: Mutex::new(Some(session)),
            taker: Mutex::new(taker),
            device: dev,
            geometry: a.sensor.as_ref().and_then(SensorSpec::image),
            notes,
            board,
            summary: Mutex::new(None),
            view_url: served.as_ref().map(crate::view::url),
            view: Mutex::new(served),
        })
    }

    /// The live view's page (`view=`), while the receiver runs: the latest picture, the
    /// rates, losses and counters, as the CLI's `--view` shows them; None without a view.
    #[getter]
    fn view_url(&self) -> Option<String> {
        self.view_url.clone()
    }

    /// The network counters, as `rocelink stats` shows them: a dict with the command,
    /// the process id and per link (one per virtual port) its counters and its QPs'.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::data::to_py(py, &self.board.snapshot())
    }

    /// Frames as they arrive: an iterator of `Frame`, ending after `count` frames (None:
    /// until stopped); `rocelink.TimeoutError` if none arrives within `timeout` seconds.
    #[pyo3(signature = (count=None, timeout=5.0))]
    fn frames(slf: Py<Self>, count: Option<u64>, timeout: f64) -> PyResult<FrameIter> {
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(config(format!(
                "timeout: {timeout} is not a positive number of seconds"
            )));
        }
        Ok(FrameIter {
            rx: slf,
            left: count,
            timeout: Duration::from_secs_f64(timeout),
            taken: 0,
        })
    }

    /// What the host did to bring the device up, in words.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Frames dropped because Python did not take them in time.
    #[getter]
    fn dropped(&self) -> u64 {
        self.taker.lock().map_or(0, |t| t.dropped())
    }

    /// Stop receiving, unconfigure the device, make the recording durable; the summary as a
    /// dict (the same after a second call).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let session = self.session.lock().ok().and_then(|mut g| g.take());
        if let Some(s) = session {
            let served = self.view.lock().ok().and_then(|mut g| g.take());
            let sum = py.detach(|| {
                let Ok(sum) = s.stop();
                // the pages following the view are told the run is over, with its counts
                if let Some(v) = served {
                    v.end(rocelink_hsb_host::view::summary(&sum));
                }
                sum
            });
            // the session's summary as serialised (the view's end carries the same), and
            // what only Python knows: frames its queue dropped unread
            let d = crate::data::to_py(py, &sum)?;
            d.set_item("dropped", self.dropped())?;
            let first_err = sum
                .ports
                .iter()
                .find_map(|p| p.outcome.as_ref().err())
                .map(host_error);
            if let Ok(mut g) = self.summary.lock() {
                *g = Some(d.clone().unbind());
            }
            if let Some(e) = first_err {
                return Err(e);
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
        // an exception already on its way wins over one from stopping
        if t.is_none() {
            r?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "rocelink.hsb.Receiver(device={:?})",
            self.device.to_string()
        )
    }
}

impl Receiver {
    /// The next frame, or None once every port ended.
    fn take(&self, py: Python<'_>, timeout: Duration, taken: u64) -> PyResult<Option<Handed>> {
        let w = Waiting {
            timeout,
            // Ctrl-C: stop cleanly (device unconfigured, recording durable), then raise
            interrupted: &|py| {
                let _ = self.stop(py);
            },
            ended: &|py| self.stop(py).map(|_| ()),
            late: &|| {
                format!(
                    "no frame from device {} within {:.1} s (after {taken} frames)",
                    self.device,
                    timeout.as_secs_f64()
                )
            },
        };
        next_item(py, &w, |slice| {
            let got = match self.taker.lock() {
                Ok(t) => t.take(slice),
                Err(_) => Err(TakeError::Ended),
            };
            match got {
                Ok(h) => (Some(h), false),
                Err(TakeError::Ended) => (None, true),
                Err(TakeError::Timeout) => (None, self.finished()),
            }
        })
    }

    /// Every port's loop has ended (or the session was stopped).
    fn finished(&self) -> bool {
        self.session
            .lock()
            .map_or(true, |g| g.as_ref().is_none_or(HostSession::is_finished))
    }
}

/// The iterator `Receiver.frames()` returns.
#[pyclass(module = "rocelink.hsb")]
pub(crate) struct FrameIter {
    rx: Py<Receiver>,
    left: Option<u64>,
    timeout: Duration,
    taken: u64,
}

#[pymethods]
impl FrameIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Frame>> {
        if self.left == Some(0) {
            return Ok(None);
        }
        let rx = self.rx.bind(py).borrow();
        let Some(h) = rx.take(py, self.timeout, self.taken)? else {
            return Ok(None);
        };
        self.taken += 1;
        if let Some(n) = self.left.as_mut() {
            *n -= 1;
        }
        Ok(Some(Frame {
            handed: h,
            geometry: rx.geometry,
        }))
    }
}

/// One received frame. `array()` is a read-only numpy view of its bytes in the receiver's
/// ring: the page is not written while the frame or any array of it lives.
#[pyclass(module = "rocelink.hsb", frozen)]
pub(crate) struct Frame {
    handed: Handed,
    geometry: Option<rocelink_hsb::catalogue::ImageGeometry>,
}

#[pymethods]
impl Frame {
    /// The frame number (the device's 16-bit counter, extended).
    #[getter]
    fn number(&self) -> u64 {
        self.handed.report.frame_number
    }
    /// The virtual port it came from.
    #[getter]
    fn vp(&self) -> u32 {
        self.handed.vp
    }
    /// Complete, and its CRC matches where the device sent one.
    #[getter]
    fn good(&self) -> bool {
        self.handed.report.good()
    }
    /// Every packet arrived and the byte count matches.
    #[getter]
    fn complete(&self) -> bool {
        self.handed.report.complete
    }
    /// The frame's CRC in HSB's form, as the device's metadata carries it, `receive
    /// --json` prints it and recordings store it: JAMCRC, `zlib.crc32(data) ^ 0xFFFFFFFF`.
    #[getter]
    fn crc(&self) -> u32 {
        self.handed.report.crc
    }
    /// The CRC matches the device's (None: the device sent none).
    #[getter]
    fn crc_ok(&self) -> Option<bool> {
        self.handed.report.crc_ok
    }
    /// Bytes that arrived.
    #[getter]
    fn bytes(&self) -> u64 {
        self.handed.report.bytes
    }
    /// PSN of the frame-end packet.
    #[getter]
    fn psn(&self) -> u32 {
        self.handed.report.psn
    }
    /// Packets missing.
    #[getter]
    fn dropped_packets(&self) -> u64 {
        self.handed.report.dropped_packets
    }
    /// PTP time (ns) of the frame's first data.
    #[getter]
    fn timestamp_ns(&self) -> u128 {
        let (s, ns) = self.handed.report.sof;
        u128::from(s) * 1_000_000_000 + u128::from(ns)
    }
    /// PTP time (ns) the device formed the metadata.
    #[getter]
    fn metadata_ns(&self) -> u128 {
        let (s, ns) = self.handed.report.meta;
        u128::from(s) * 1_000_000_000 + u128::from(ns)
    }

    /// The bytes as a read-only numpy uint8 array, without a copy.
    fn array<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let d = slf.get().handed.data();
        // SAFETY: `d` points into memory the frame keeps allocated (its ring page is held,
        // so nothing writes it) for as long as the frame lives; the array keeps the frame
        // alive as its base object.
        let view = unsafe { ArrayView1::from_shape_ptr(d.len(), d.as_ptr()) };
        // SAFETY: as above: the memory outlives `container`, and is never reallocated.
        let a = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        a.getattr("flags")?.setattr("writeable", false)?;
        Ok(a)
    }

    /// An owning copy of the bytes (numpy uint8).
    fn copy<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        PyArray1::from_slice(py, self.handed.data())
    }

    /// The image of a CSI or CoE RAW10/RAW12 frame: uint16 (height, width) Bayer.
    fn image<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let Some(g) = slf.get().geometry else {
            return Err(config(
                "image(): the receiver was not told the sensor (sensor= or camera=)",
            ));
        };
        let geo = PyDict::new(py);
        geo.set_item("layout", g.layout)?;
        geo.set_item("width", g.width)?;
        geo.set_item("height", g.height)?;
        geo.set_item("bits", g.bits)?;
        geo.set_item("start_byte", g.start_byte)?;
        geo.set_item("bytes_per_line", g.bytes_per_line)?;
        let a = Frame::array(slf)?;
        py.import("rocelink._image")?
            .getattr("unpack")?
            .call1((a, geo))
    }

    fn __len__(&self) -> usize {
        self.handed.data().len()
    }

    fn __repr__(&self) -> String {
        let r = &self.handed.report;
        format!(
            "rocelink.hsb.Frame(number={}, vp={}, good={}, bytes={})",
            r.frame_number,
            self.handed.vp,
            if r.good() { "True" } else { "False" },
            r.bytes
        )
    }
}
