//! What takes a buffer unit's delivered frames: an application callback, a fixed rate (a
//! stand-in for the exposure reading the buffer), or the recorder.

use rocelink_record::{FrameMeta, RecordConfig, Recorder, Summary, format::Header};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A frame handed to the consumer: delivered whole, in order.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The worker: (LID, status QPN).
    pub worker: (u32, u32),
    /// Its VA.
    pub va: u64,
    /// Its bytes (in the ring; copied out only when it wraps past the ring's end).
    pub bytes: &'a [u8],
    /// It passed [`UnitConfig::verify`](crate::UnitConfig::verify).
    pub intact: bool,
}

/// Takes delivered frames in order; each frame is ACKed to its worker once taken. While it
/// is not ready, frames wait in the ring, unanswered, and the write window stays where it
/// is (the worker waits for its ACKs, or is held back with outside-window NACKs).
pub trait Consumer {
    /// Whether it takes a frame now.
    fn ready(&mut self, _now: Instant) -> bool {
        true
    }
    /// Whether it takes no frame any more (a frame count reached): a stopping unit then
    /// discards the frames still waiting instead of waiting for it.
    fn done(&self) -> bool {
        false
    }
    /// Take `f`; its space in the ring may be written again afterwards, and its worker
    /// hears it is stored.
    fn consume(&mut self, now: Instant, f: &Frame<'_>);
    /// When to ask [`Consumer::ready`] again after it said no.
    fn wake(&self) -> Option<Instant> {
        None
    }
}

impl<F: FnMut(&Frame<'_>)> Consumer for F {
    fn consume(&mut self, _now: Instant, f: &Frame<'_>) {
        self(f)
    }
}

/// Consumes frames at a fixed rate (a stand-in for the exposure that reads the buffer).
#[derive(Debug, Clone, Copy)]
pub struct RateConsumer {
    bytes_per_sec: f64,
    next: Option<Instant>,
}

impl RateConsumer {
    /// At `gbps` Gbit/s.
    pub fn new(gbps: f64) -> RateConsumer {
        RateConsumer {
            bytes_per_sec: gbps * 1e9 / 8.0,
            next: None,
        }
    }
}

impl Consumer for RateConsumer {
    fn ready(&mut self, now: Instant) -> bool {
        self.next.is_none_or(|t| t <= now)
    }
    fn consume(&mut self, now: Instant, f: &Frame<'_>) {
        let took = Duration::from_secs_f64(f.bytes.len() as f64 / self.bytes_per_sec);
        // no credit piles up while idle
        let from = match self.next {
            Some(t) if t + Duration::from_millis(1) > now => t,
            _ => now,
        };
        self.next = Some(from + took);
    }
    fn wake(&self) -> Option<Instant> {
        self.next
    }
}

/// Every frame to a recording (`rocelink inspect`/`export` read it): started at the first
/// frame, whose size sizes the recorder's buffers. While the disk falls behind frames wait
/// in the ring; once the recording has stopped (a full disk, an I/O error) the frames
/// taken are counted as the recorder's drops, with the reason in the recording's end.
#[derive(Debug)]
pub struct RecordConsumer {
    dir: PathBuf,
    max_bytes: Option<u64>,
    rec: Option<Recorder>,
    frames: u64,
    error: Option<io::Error>,
    /// What the last [`Consumer::ready`] found.
    room: bool,
}

impl RecordConsumer {
    /// Record to `dir` (checked by the caller: new or empty), at most `max_bytes`.
    pub fn new(dir: PathBuf, max_bytes: Option<u64>) -> RecordConsumer {
        RecordConsumer {
            dir,
            max_bytes,
            rec: None,
            frames: 0,
            error: None,
            room: true,
        }
    }

    /// Why recording stopped early, if it did.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Why recording stopped early, taken out.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// The directory it records to.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Finish the recording (durable, index written).
    pub fn finish(&mut self) -> io::Result<Option<Summary>> {
        self.rec.take().map(Recorder::finish).transpose()
    }
}

impl Consumer for RecordConsumer {
    /// Waits while the recorder has no free buffer: the frame stays in the ring and the
    /// worker is held back (nothing is dropped, unlike a receiver that cannot wait). Once
    /// the recording has stopped (a full disk, an I/O error) waiting would hold the worker
    /// back for ever: frames are consumed, counted as the recorder's drops, and the
    /// recording's end says why.
    fn ready(&mut self, _now: Instant) -> bool {
        self.room = match self.rec.as_mut() {
            Some(r) if !r.stopped() => r.has_room(),
            _ => true,
        };
        self.room
    }
    fn wake(&self) -> Option<Instant> {
        (!self.room).then(|| Instant::now() + Duration::from_millis(1))
    }
    fn consume(&mut self, _now: Instant, f: &Frame<'_>) {
        if self.rec.is_none() && self.error.is_none() {
            let header = Header {
                sensor: "ims".into(),
                frame_size: f.bytes.len() as u64,
                layout: "bytes".into(),
                ..Header::default()
            };
            let mut cfg = RecordConfig::new(self.dir.clone(), header);
            cfg.max_bytes = self.max_bytes;
            match Recorder::start(cfg) {
                Ok(r) => self.rec = Some(r),
                Err(e) => self.error = Some(e),
            }
        }
        if let Some(r) = self.rec.as_mut() {
            // the recording's own check (`inspect --verify`, the numpy reader): JAMCRC
            let meta = FrameMeta {
                frame_number: self.frames,
                good: f.intact,
                complete: true,
                crc: rocelink_record::format::jamcrc(f.bytes),
                crc_ok: f.intact,
                crc_present: true,
                ..FrameMeta::default()
            };
            r.offer(&meta, f.bytes);
        }
        self.frames += 1;
    }
}
