//! The [`FrameSink`] trait and the sinks every front end uses.

use crate::SessionError;
use crate::meta::{frame_json, frame_line, frame_meta, record_header};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::host::receiver::{FrameReport, ReceiverStats};
use rocelink_hsb::host::{FrameReceiver, LentFrame};
use rocelink_record::{RecordConfig, Recorder, Summary};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One frame handed to the sinks.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Delivered<'a> {
    /// The verdict and what the device said about the frame.
    pub report: &'a FrameReport,
    /// Its bytes in the ring (valid for this call only).
    pub data: &'a [u8],
    /// The receiver's counters so far.
    pub stats: &'a ReceiverStats,
    /// Time since the loop started.
    pub elapsed: Duration,
    /// The last frame the loop will deliver (the frame limit is reached).
    pub last: bool,
    /// The receiver it came from (for [`Delivered::lend`]).
    pub(crate) source: &'a dyn FrameReceiver,
}

impl std::fmt::Debug for Delivered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivered")
            .field("report", self.report)
            .field("bytes", &self.data.len())
            .field("elapsed", &self.elapsed)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl Delivered<'_> {
    /// Keep this frame past the call without a copy: its ring page is held until the
    /// [`LentFrame`] is dropped (a frame the device sends into it meanwhile is lost and
    /// counted). `None` if the receiver cannot lend (the CoE receiver, a ring of the
    /// application's own memory).
    pub fn lend(&self) -> Option<LentFrame> {
        self.source.lend(self.report)
    }
}

/// Where frames go. Closures `FnMut(&Delivered) -> Result<(), SessionError>` are sinks.
pub trait FrameSink {
    /// Take one frame (good or damaged; see `report.good()`).
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError>;
    /// The stream ended: flush, make durable.
    fn finish(&mut self) -> Result<(), SessionError> {
        Ok(())
    }
}

impl<F: FnMut(&Delivered<'_>) -> Result<(), SessionError>> FrameSink for F {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        self(d)
    }
}

fn sink_err(sink: &str, e: impl std::fmt::Display) -> SessionError {
    SessionError::Sink {
        sink: sink.to_string(),
        message: e.to_string(),
    }
}

/// One JSON object per frame ([`frame_json`]).
#[derive(Debug)]
pub struct JsonLines<W: Write>(W);

impl<W: Write> JsonLines<W> {
    /// JSON lines on `w`.
    pub fn new(w: W) -> JsonLines<W> {
        JsonLines(w)
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        self.0
    }
}

impl<W: Write> FrameSink for JsonLines<W> {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        writeln!(self.0, "{}", frame_json(d.report))?;
        Ok(())
    }
    fn finish(&mut self) -> Result<(), SessionError> {
        Ok(self.0.flush()?)
    }
}

/// One text line per frame ([`frame_line`]).
#[derive(Debug)]
pub struct Lines<W: Write>(W);

impl<W: Write> Lines<W> {
    /// Text lines on `w`.
    pub fn new(w: W) -> Lines<W> {
        Lines(w)
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        self.0
    }
}

impl<W: Write> FrameSink for Lines<W> {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        writeln!(self.0, "{}", frame_line(d.report))?;
        Ok(())
    }
    fn finish(&mut self) -> Result<(), SessionError> {
        Ok(self.0.flush()?)
    }
}

/// Every frame, with its verdict, to a recording ([`rocelink_record::Recorder`]: frames are
/// dropped and counted, never stalling the receiver, when the disk falls behind).
#[derive(Debug)]
pub struct RecordSink {
    rec: Option<Recorder>,
    dir: PathBuf,
    summary: Option<Summary>,
}

impl RecordSink {
    /// Start recording to `cfg.dir` (new or empty).
    pub fn start(cfg: RecordConfig) -> Result<RecordSink, SessionError> {
        let dir = cfg.dir.clone();
        let rec = Recorder::start(cfg).map_err(|e| sink_err(&dir.display().to_string(), e))?;
        Ok(RecordSink {
            rec: Some(rec),
            dir,
            summary: None,
        })
    }

    /// A recording of frames from `sensor` (for the header), `frame_size` bytes each.
    pub fn config(dir: PathBuf, sensor: Option<&SensorSpec>, frame_size: usize) -> RecordConfig {
        RecordConfig::new(dir, record_header(sensor, frame_size))
    }

    /// The recording's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What was recorded, once finished.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }
}

impl FrameSink for RecordSink {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        if let Some(r) = self.rec.as_mut() {
            r.offer(&frame_meta(d.report), d.data);
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), SessionError> {
        if let Some(r) = self.rec.take() {
            let s = r
                .finish()
                .map_err(|e| sink_err(&self.dir.display().to_string(), e))?;
            self.summary = Some(s);
        }
        Ok(())
    }
}

/// The latest good frame as a PNG, rewritten at most once a second and on the last frame;
/// written to a fresh temporary file and renamed ([`rocelink_io::file::write_atomic`]), so
/// a reader never sees half a file and nothing is written through a planted link.
#[derive(Debug)]
pub struct SnapshotSink {
    path: PathBuf,
    header: rocelink_record::format::Header,
    saved: Option<Instant>,
}

impl SnapshotSink {
    /// Snapshots of frames from `sensor` (an image sensor) to `path`.
    pub fn new(path: PathBuf, sensor: &SensorSpec, frame_size: usize) -> SnapshotSink {
        SnapshotSink {
            path,
            header: record_header(Some(sensor), frame_size),
            saved: None,
        }
    }
}

impl FrameSink for SnapshotSink {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        let due = self
            .saved
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if !d.report.good() || !(due || d.last) {
            return Ok(());
        }
        let what = self.path.display().to_string();
        let png = rocelink_record::image::unpack(&self.header, d.data)
            .and_then(|i| i.to_png())
            .map_err(|e| sink_err(&what, e))?;
        rocelink_io::file::write_atomic(&self.path, &png).map_err(|e| sink_err(&what, e))?;
        self.saved = Some(Instant::now());
        Ok(())
    }
}
