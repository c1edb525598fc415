//! `rocelink bench record`: the recorder's sustained write rate against `dd oflag=direct`
//! on the same disk, alternating, in one run.
//!
//! * **dd** — `dd if=/dev/zero of=DIR/dd.bin bs=FRAME count=N oflag=direct conv=fsync`:
//!   the disk's synchronous direct-write rate with the frame size rounded up to 4096 (as
//!   the recorder pads) and a final sync; rates count frame bytes for both.
//! * **recorder** — a producer offers N frames to a [`rocelink_record::Recorder`] as fast
//!   as it accepts them (a refused offer — writer behind — waits 50 µs and retries, so
//!   the producer never spins on the core the writer needs); the clock stops when
//!   `finish()` returned, i.e. data and index are durable.
//!
//! Both write into a directory of their own that the benchmark makes inside the one given
//! (mode 0700, a fresh name: nothing planted there, a link in particular, is ever
//! followed), removed after every run and on the way out.

use crate::BenchError;
use rocelink_record::format::Header;
use rocelink_record::{RecordConfig, Recorder};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Record benchmark settings.
#[derive(Debug, Clone)]
pub struct RecordBenchConfig {
    /// Directory on the disk to measure (files are created and removed).
    pub dir: PathBuf,
    /// Bytes per frame (and dd block size).
    pub frame: usize,
    /// Frames per run.
    pub frames: usize,
    /// Runs of each (alternating dd, recorder).
    pub runs: usize,
    /// Recorder writes in flight.
    pub in_flight: usize,
    /// Recorder queue (frames that may wait for the writer).
    pub queue: usize,
    /// Set (by a Ctrl-C handler) to end the run early: the writing stops, the files go,
    /// and the call returns the runs that completed (an `Interrupted` error if none did).
    pub stop: rocelink_runtime::Stopper,
}

/// A directory the benchmark made for itself, removed with everything in it when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    /// A fresh directory in `parent`, only for this user; an existing entry of the name
    /// (a link too) is never reused.
    fn create(parent: &Path) -> crate::Result<WorkDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = parent.join(format!("rocelink-bench-{}-{nanos:09}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(BenchError::doing(format!("create {}", dir.display())))?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRun {
    /// "dd" or "recorder".
    pub name: &'static str,
    /// Bytes written.
    pub bytes: u64,
    /// Seconds until durable.
    pub seconds: f64,
    /// Whether O_DIRECT was used.
    pub direct: bool,
    /// Offers the recorder refused and the producer retried (writer busy).
    pub refused: u64,
}

impl RecordRun {
    /// MB/s (10⁶ bytes per second).
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9) / 1e6
    }
}

fn dd(cfg: &RecordBenchConfig, work: &Path, direct: bool) -> crate::Result<Option<RecordRun>> {
    let out = work.join("dd.bin");
    let mut c = Command::new("dd");
    c.arg("if=/dev/zero")
        .arg(format!("of={}", out.display()))
        // O_DIRECT needs aligned blocks; the recorder pads frames to 4096 the same way
        .arg(format!("bs={}", cfg.frame.next_multiple_of(4096)))
        .arg(format!("count={}", cfg.frames))
        .arg("conv=fsync")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if direct {
        c.arg("oflag=direct");
    }
    let t = Instant::now();
    let st = c.status();
    let seconds = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&out);
    if cfg.stop.is_stopped() {
        return Err(BenchError::Stopped);
    }
    match st {
        Ok(s) if s.success() => Ok(Some(RecordRun {
            name: "dd",
            bytes: (cfg.frame * cfg.frames) as u64,
            seconds,
            direct,
            refused: 0,
        })),
        Ok(_) => Ok(None),
        Err(e) => Err(BenchError::doing("cannot run dd")(e)),
    }
}

fn recorder(cfg: &RecordBenchConfig, work: &Path, run: usize) -> crate::Result<RecordRun> {
    let dir = work.join(format!("rec-{run}"));
    let header = Header {
        sensor: "bench".into(),
        frame_size: cfg.frame as u64,
        layout: "bytes".into(),
        ..Default::default()
    };
    let frame: Vec<u8> = (0..cfg.frame).map(|i| (i * 7 + run) as u8).collect();
    let t = Instant::now();
    let mut rc = RecordConfig::new(dir.clone(), header);
    rc.in_flight = cfg.in_flight;
    rc.queue = cfg.queue;
    let mut rec = Recorder::start(rc)?;
    let mut refused = 0u64;
    let mut meta = rocelink_record::FrameMeta::default();
    let mut sent = 0usize;
    // bounded: every frame is either accepted or retried; a recorder that stopped (disk
    // full) ends the loop
    while sent < cfg.frames && !rec.stopped() && !cfg.stop.is_stopped() {
        meta.frame_number = sent as u64;
        if rec.offer(&meta, &frame) {
            sent += 1;
        } else {
            refused += 1;
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let s = rec.finish()?;
    let seconds = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    if cfg.stop.is_stopped() {
        return Err(BenchError::Stopped);
    }
    if let Some(why) = s.stopped {
        return Err(BenchError::RecordingStopped(why));
    }
    Ok(RecordRun {
        name: "recorder",
        bytes: s.bytes,
        seconds,
        direct: s.direct,
        refused,
    })
}

/// Run `runs` rounds of dd then recorder. dd falls back to buffered writes (with
/// `direct: false` in its result) where the filesystem refuses `O_DIRECT`.
/// Stopped ([`RecordBenchConfig::stop`]), it returns the rounds that completed.
pub fn record(cfg: &RecordBenchConfig) -> crate::Result<Vec<RecordRun>> {
    std::fs::create_dir_all(&cfg.dir)?;
    let work = WorkDir::create(&cfg.dir)?;
    let mut out = Vec::new();
    for run in 0..cfg.runs.max(1) {
        match round(cfg, &work.0, run) {
            Ok(r) => out.extend(r),
            Err(BenchError::Stopped) if !out.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// One round: dd, then the recorder.
fn round(cfg: &RecordBenchConfig, work: &Path, run: usize) -> crate::Result<[RecordRun; 2]> {
    let d = match dd(cfg, work, true)? {
        Some(r) => r,
        None => dd(cfg, work, false)?.ok_or(BenchError::Dd)?,
    };
    Ok([d, recorder(cfg, work, run)?])
}

/// Median of the named runs' MB/s.
pub fn median_mbps(runs: &[RecordRun], name: &str) -> f64 {
    crate::median(runs.iter().filter(|r| r.name == name).map(RecordRun::mbps))
}
