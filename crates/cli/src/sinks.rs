//! Where verified frames go: per-frame lines or JSON, the recorder, the PNG snapshot; and
//! the checks of those flags before anything starts.

use crate::args;
use anyhow::{Context, Result, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::host::receiver::FrameReport;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the frame loop writes to the terminal and to disk.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Output {
    /// One JSON object per frame on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// No per-frame lines, progress or banner (errors and the recording summary still go
    /// to stderr).
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Record frames (with their verdicts) to this directory (new or empty).
    #[arg(long)]
    pub(crate) record: Option<PathBuf>,
    /// Replace the recording already in the --record directory.
    #[arg(long, requires = "record")]
    pub(crate) force: bool,
    /// Stop recording after this many bytes.
    #[arg(long, requires = "record", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_bytes: Option<u64>,
    /// Stop recording after this many frames.
    #[arg(long, requires = "record", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_frames: Option<u64>,
    /// Keep the latest good frame as a PNG here (needs an image sensor).
    #[arg(long, value_parser = args::out_file)]
    pub(crate) snapshot: Option<PathBuf>,
}

/// The sinks, built after every input was checked.
pub(crate) struct Sinks {
    pub(crate) json: bool,
    pub(crate) quiet: bool,
    pub(crate) rec: Option<(rocelink_record::Recorder, PathBuf)>,
    pub(crate) snap: Option<Snapshot>,
}

impl Output {
    /// Check the flags against the sensor and the disk, before anything starts.
    pub(crate) fn check(&self, sensor: Option<&SensorSpec>) -> Result<()> {
        if self.snapshot.is_some() && sensor.and_then(SensorSpec::image).is_none() {
            bail!(
                "--snapshot needs an image sensor (--sensor imx274-… or coe-raw10:WxH), not {}",
                sensor.map_or("none".to_string(), |s| s.to_string())
            );
        }
        if let Some(d) = &self.record {
            args::record_dir(d, self.force)?;
        }
        Ok(())
    }

    pub(crate) fn open(&self, sensor: Option<&SensorSpec>, frame_size: usize) -> Result<Sinks> {
        let rec = match &self.record {
            Some(dir) => {
                let mut rc = rocelink_record::RecordConfig::new(
                    dir.clone(),
                    record_header(sensor, frame_size),
                );
                rc.max_bytes = self.max_bytes;
                rc.max_frames = self.max_frames;
                let r = rocelink_record::Recorder::start(rc)
                    .with_context(|| format!("--record {}", dir.display()))?;
                Some((r, dir.clone()))
            }
            None => None,
        };
        let snap = match (&self.snapshot, sensor) {
            (Some(p), Some(s)) => Some(Snapshot::new(p.clone(), s, frame_size)?),
            _ => None,
        };
        Ok(Sinks {
            json: self.json,
            quiet: self.quiet,
            rec,
            snap,
        })
    }
}

/// Stream parameters of a recording made from `sensor`.
pub(crate) fn record_header(
    sensor: Option<&SensorSpec>,
    frame_size: usize,
) -> rocelink_record::format::Header {
    let mut h = rocelink_record::format::Header {
        sensor: sensor.map_or("unknown".to_string(), |s| s.to_string()),
        frame_size: frame_size as u64,
        layout: "bytes".into(),
        ..Default::default()
    };
    if let Some(g) = sensor.and_then(SensorSpec::image) {
        h.layout = g.layout.into();
        (h.width, h.height, h.bits) = (g.width, g.height, g.bits);
        h.start_byte = g.start_byte;
        h.bytes_per_line = g.bytes_per_line;
    }
    h
}

pub(crate) fn frame_meta(f: &FrameReport) -> rocelink_record::FrameMeta {
    rocelink_record::FrameMeta {
        frame_number: f.frame_number,
        good: f.good(),
        complete: f.complete,
        crc_ok: f.crc_ok == Some(true),
        crc_present: f.crc_ok.is_some(),
        crc: f.crc_expected.unwrap_or(f.crc),
        flags: f.flags,
        dropped_packets: f.dropped_packets,
        sof: f.sof,
        meta: f.meta,
        packets: f.packets,
        page: f.page,
        ..Default::default()
    }
}

pub(crate) fn frame_json(f: &FrameReport) -> serde_json::Value {
    json!({"frame_number": f.frame_number, "bytes": f.bytes, "bytes_expected": f.bytes_expected, "crc": f.crc,
           "crc_expected": f.crc_expected, "crc_ok": f.crc_ok, "psn": f.psn, "page": f.page, "packets": f.packets,
           "dropped_packets": f.dropped_packets, "flags": f.flags, "sof_s": f.sof.0, "sof_ns": f.sof.1,
           "meta_s": f.meta.0, "meta_ns": f.meta.1, "complete": f.complete, "good": f.good()})
}

pub(crate) fn frame_line(f: &FrameReport) -> String {
    format!(
        "frame {:>6} page {:>3} {:>9} bytes {:>5} packets crc {:#010x} {} dropped {} flags {:#x} -> {}",
        f.frame_number,
        f.page,
        f.bytes,
        f.packets,
        f.crc,
        match f.crc_ok {
            Some(true) => "ok",
            Some(false) => "MISMATCH",
            None => "n/a",
        },
        f.dropped_packets,
        f.flags,
        if f.good() { "good" } else { "DAMAGED" }
    )
}

/// `--snapshot FILE`: the latest good frame as a PNG, rewritten at most once a second
/// and on the last frame.
pub(crate) struct Snapshot {
    path: PathBuf,
    header: rocelink_record::format::Header,
    saved: Option<Instant>,
}

impl Snapshot {
    fn new(path: PathBuf, sensor: &SensorSpec, frame_size: usize) -> Result<Snapshot> {
        Ok(Snapshot {
            path,
            header: record_header(Some(sensor), frame_size),
            saved: None,
        })
    }
    pub(crate) fn due(&self) -> bool {
        self.saved
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
    }
    pub(crate) fn save(&mut self, data: &[u8]) -> Result<()> {
        let png = crate::record::png_image(&self.header, data)?;
        crate::record::write_atomic(&self.path, &png)?;
        self.saved = Some(Instant::now());
        Ok(())
    }
}
