//! What the host does with a shot handed on: check it against the generator and offer it
//! to the recorder, which takes it whole or drops it whole (the paper's "discard the shot
//! and reuse the buffer" when storage falls behind) — never a stalled receiver, never half
//! a shot on disk.
//!
//! A recording of shots is an ordinary rocelink recording (`rocelink inspect`, `export`,
//! the numpy reader): one frame per complete shot, numbered with the shot number, layout
//! `csi-raw12` with width = channels and height = samples, so `export --format npy` gives a
//! samples × channels array of 12-bit values. The header marks the image grey, so a PNG
//! export is the echo data in grey at full resolution, not a demosaiced colour picture.

use crate::host::ShotReport;
use crate::shot::{Echoes, Geometry};
use rocelink_record::format::{Header, jamcrc};
use rocelink_record::{FrameMeta, RecordConfig, Recorder, Summary};
use std::io;
use std::path::PathBuf;

/// Counters of a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct SinkStats {
    /// Shots taken.
    pub shots: u64,
    /// Of those, complete.
    pub complete: u64,
    /// Bytes of complete shots.
    pub bytes: u64,
    /// Complete shots checked byte for byte and found right.
    pub verified: u64,
    /// Complete shots that differ from the generator.
    pub corrupt: u64,
    /// Shots the recorder took.
    pub recorded: u64,
    /// Complete shots the recorder dropped (it was behind or stopped).
    pub dropped: u64,
}

/// Counters added field by field (totals over links).
impl std::ops::AddAssign for SinkStats {
    fn add_assign(&mut self, o: SinkStats) {
        self.shots += o.shots;
        self.complete += o.complete;
        self.bytes += o.bytes;
        self.verified += o.verified;
        self.corrupt += o.corrupt;
        self.recorded += o.recorded;
        self.dropped += o.dropped;
    }
}

/// What became of one shot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Outcome {
    /// With verification: whether every byte matched (None: not checked, or incomplete).
    pub verified: Option<bool>,
    /// Taken by the recorder.
    pub recorded: bool,
    /// Dropped by the recorder.
    pub dropped: bool,
}

/// Verification and recording of the shots handed on.
#[derive(Debug)]
pub struct ShotSink {
    geometry: Geometry,
    echoes: Option<Echoes>,
    rec: Option<Recorder>,
    stats: SinkStats,
}

/// A recording configuration for shots of `geometry` in `dir` (see the module docs).
pub fn record_config(dir: PathBuf, geometry: &Geometry) -> RecordConfig {
    let image = geometry.samples >= 2 && geometry.channels >= 2;
    let header = Header {
        sensor: format!(
            "ultrasound {} samples x {} channels",
            geometry.samples, geometry.channels
        ),
        frame_size: geometry.bytes() as u64,
        layout: if image { "csi-raw12" } else { "bytes" }.into(),
        width: if image {
            u32::from(geometry.channels)
        } else {
            0
        },
        height: if image { geometry.samples } else { 0 },
        bits: if image { 12 } else { 0 },
        bytes_per_line: if image {
            geometry.row_bytes() as u64
        } else {
            0
        },
        grey: true,
        ..Header::default()
    };
    RecordConfig::new(dir, header)
}

impl ShotSink {
    /// Shots of `geometry`; checked against the echoes of `verify_seed` if given, offered
    /// to a recorder started from `record` if given.
    pub fn new(
        geometry: Geometry,
        verify_seed: Option<u64>,
        record: Option<RecordConfig>,
    ) -> io::Result<ShotSink> {
        let rec = record.map(Recorder::start).transpose()?;
        Ok(ShotSink {
            geometry,
            echoes: verify_seed.map(Echoes::new),
            rec,
            stats: SinkStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> &SinkStats {
        &self.stats
    }

    /// Take a shot handed on by the host (`bytes`: the whole shot, when complete).
    pub fn take(&mut self, r: &ShotReport, bytes: Option<&[u8]>) -> Outcome {
        let mut out = Outcome::default();
        self.stats.shots += 1;
        let Some(b) = bytes.filter(|_| r.complete) else {
            return out;
        };
        self.stats.complete += 1;
        self.stats.bytes += b.len() as u64;
        if let Some(e) = &self.echoes {
            let ok = e.first_difference(&self.geometry, r.shot, b).is_none();
            out.verified = Some(ok);
            if ok {
                self.stats.verified += 1;
            } else {
                self.stats.corrupt += 1;
            }
        }
        if let Some(rec) = self.rec.as_mut() {
            let good = out.verified != Some(false);
            let crc = jamcrc(b);
            let meta = FrameMeta {
                frame_number: r.shot,
                good,
                complete: true,
                crc,
                crc_ok: good,
                crc_present: true,
                packets: r.messages,
                ..FrameMeta::default()
            };
            if rec.offer(&meta, b) {
                out.recorded = true;
                self.stats.recorded += 1;
            } else {
                out.dropped = true;
                self.stats.dropped += 1;
            }
        }
        out
    }

    /// Why the recording stopped early, if it did (disk full, a limit, an I/O error).
    pub fn recording_stopped(&self) -> bool {
        self.rec.as_ref().is_some_and(Recorder::stopped)
    }

    /// End the recording (everything taken made durable); its summary, if recording.
    pub fn finish(&mut self) -> io::Result<Option<Summary>> {
        self.rec.take().map(Recorder::finish).transpose()
    }
}
