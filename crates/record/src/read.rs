//! Reading a recording back.

use crate::format::{Entry, Header, RECORD_LEN};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// An opened recording.
#[derive(Debug)]
pub struct Recording {
    /// Directory.
    pub dir: PathBuf,
    /// Stream parameters.
    pub header: Header,
    /// Index entries (the valid prefix of `index.bin`).
    pub entries: Vec<Entry>,
    /// Bytes at the end of `index.bin` that are not a valid record (a torn write).
    pub torn_bytes: usize,
    /// Byte offsets in `index.bin` of records before the last that are not valid (damage,
    /// not a torn write): skipped, and reported.
    pub damaged_records: Vec<u64>,
    /// Frame numbers of valid records whose data lies past the end of `data.bin`
    /// (a truncated data file): skipped, and reported.
    pub missing_data: Vec<u64>,
    /// Frames the recorder lost after its last indexed frame (drop markers).
    pub marker_drops: u64,
    data: File,
}

/// Totals for `rocelink inspect`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Inspect {
    /// Frames in the index.
    pub frames: u64,
    /// Frames reported good.
    pub good: u64,
    /// Frames reported damaged.
    pub damaged: u64,
    /// Frames whose CRC did not match.
    pub crc_failures: u64,
    /// Packets missing across frames.
    pub dropped_packets: u64,
    /// Frames the recorder dropped (writer behind).
    pub recorder_drops: u64,
    /// Frame bytes.
    pub bytes: u64,
    /// First and last frame numbers.
    pub first_frame: Option<u64>,
    /// Last frame number.
    pub last_frame: Option<u64>,
    /// Seconds between the first and last recorded frame.
    pub seconds: f64,
    /// Frames per second over the recording.
    pub fps: f64,
    /// Frames per second in each whole second of the recording.
    pub fps_by_second: Vec<u64>,
}

impl Recording {
    /// Open `dir`: header, index (stopping at the first invalid record), data file.
    pub fn open(dir: &Path) -> io::Result<Recording> {
        let h =
            rocelink_io::file::read_bounded(&dir.join("recording.json"), 1 << 20).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: no recording.json ({e})", dir.display()),
                )
            })?;
        let header: Header = serde_json::from_slice(&h).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("recording.json: {e}"))
        })?;
        if header.format != "rocelink-recording" || header.version != 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a rocelink recording (version 1)",
            ));
        }
        header.check().map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("recording.json: {e}"))
        })?;
        // 128 bytes a frame: 2^34 bytes is more than 100 million frames
        let idx = rocelink_io::file::read_bounded(&dir.join("index.bin"), 1 << 34)?;
        let data = File::open(dir.join("data.bin"))?;
        let len = data.metadata()?.len();
        let mut entries = Vec::new();
        let (mut damaged_records, mut missing_data) = (Vec::new(), Vec::new());
        // the last valid record: an invalid record after it is a torn tail, one before it
        // is damage in the middle (skipped, reported)
        let records: Vec<&[u8]> = idx.chunks(RECORD_LEN).collect();
        let last_valid = records.iter().rposition(|r| Entry::decode(r).is_some());
        let mut torn_bytes = 0;
        let mut marker_drops = 0;
        for (k, r) in records.iter().enumerate() {
            match Entry::decode(r) {
                Some(e) if e.is_drop_marker() => marker_drops += u64::from(e.dropped_before),
                Some(e) if e.offset.checked_add(e.length).is_some_and(|end| end <= len) => {
                    entries.push(e)
                }
                Some(e) => missing_data.push(e.frame_number),
                None if last_valid.is_some_and(|l| k < l) => {
                    damaged_records.push((k * RECORD_LEN) as u64)
                }
                None => torn_bytes += r.len(),
            }
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            header,
            entries,
            torn_bytes,
            damaged_records,
            missing_data,
            marker_drops,
            data,
        })
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes of frame `i` (by position in the index).
    pub fn frame(&self, i: usize) -> io::Result<Vec<u8>> {
        let e = self.entries.get(i).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no frame at index {i}"))
        })?;
        let mut b = vec![0u8; e.length as usize];
        self.data.read_exact_at(&mut b, e.offset)?;
        Ok(b)
    }

    /// True when the index or data file is damaged (beyond a torn last record).
    pub fn is_damaged(&self) -> bool {
        !self.damaged_records.is_empty() || !self.missing_data.is_empty()
    }

    /// Check frame `i`'s bytes against the CRC recorded with it. `Some(true)`: they match;
    /// `Some(false)`: `data.bin` no longer holds what was received; `None`: the frame was
    /// recorded damaged, so its CRC does not describe its bytes.
    pub fn verify(&self, i: usize) -> io::Result<Option<bool>> {
        let e = self.entries.get(i).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no frame at index {i}"))
        })?;
        if !e.good {
            return Ok(None);
        }
        let data = self.frame(i)?;
        Ok(Some(crate::format::jamcrc(&data) == e.crc))
    }

    /// Position of the frame with `frame_number`.
    pub fn position(&self, frame_number: u64) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.frame_number == frame_number)
    }

    /// Totals.
    pub fn inspect(&self) -> Inspect {
        let mut s = Inspect::default();
        for e in &self.entries {
            s.frames += 1;
            if e.good {
                s.good += 1
            } else {
                s.damaged += 1
            }
            if e.crc_present && !e.crc_ok {
                s.crc_failures += 1;
            }
            s.dropped_packets += e.dropped_packets;
            s.recorder_drops += u64::from(e.dropped_before);
            s.bytes += e.length;
        }
        s.recorder_drops += self.marker_drops;
        s.first_frame = self.entries.first().map(|e| e.frame_number);
        s.last_frame = self.entries.last().map(|e| e.frame_number);
        if let (Some(a), Some(b)) = (self.entries.first(), self.entries.last()) {
            s.seconds = (b.recorded_ns.saturating_sub(a.recorded_ns)) as f64 / 1e9;
            if s.seconds > 0.0 {
                s.fps = (s.frames - 1) as f64 / s.seconds;
            }
            let secs = (s.seconds.ceil() as usize).max(1);
            s.fps_by_second = vec![0; secs];
            for e in &self.entries {
                let k = ((e.recorded_ns - a.recorded_ns) / 1_000_000_000) as usize;
                if let Some(c) = s.fps_by_second.get_mut(k.min(secs - 1)) {
                    *c += 1;
                }
            }
        }
        s
    }
}
