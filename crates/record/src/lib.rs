//! Recording frames to disk without ever stalling the receiver.
//!
//! [`Recorder::offer`] copies a frame into a free page-aligned buffer and hands it to a
//! writer thread through a bounded queue; when no buffer is free (the writer fell behind) the
//! whole frame is dropped and counted — never a partial frame, never a blocked receiver, like
//! the ultrasound paper's "discard the shot and reuse the buffer". The writer places frames
//! in `data.bin` at 4096-aligned offsets and several I/O threads write them with `O_DIRECT`
//! (plain writes with a notice where the filesystem refuses it), several writes in flight;
//! each frame's index record is appended, in arrival order, only after its write and every
//! earlier one completed, and every batch of records only after an `fdatasync` of the data. After
//! `kill -9` every frame in the index reads back intact; a full disk ends the recording with a
//! clear error and a valid directory. See [`format`](mod@format) for the layout.
//!
//! ```no_run
//! use rocelink_record::{Recorder, RecordConfig, FrameMeta, format::Header};
//! let header = Header { sensor: "pattern".into(), frame_size: 4096, ..Header::default() };
//! let mut rec = Recorder::start(RecordConfig::new("/tmp/rec".into(), header)).unwrap();
//! rec.offer(&FrameMeta { frame_number: 0, good: true, complete: true, ..FrameMeta::default() }, &[0u8; 4096]);
//! let summary = rec.finish().unwrap();
//! assert_eq!(summary.frames, 1);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod dir;
pub mod format;
pub mod image;
pub mod read;
mod writer;

pub use dir::{DirError, prepare_dir};
use format::{ALIGN, Entry, Header};
use rocelink_io::aligned::AlignedBuf;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use writer::{Msg, WriterResult};

/// What the receiver knows about a frame (the recorder stores it in the index).
pub type FrameMeta = Entry;

/// Recorder settings.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// Directory (created).
    pub dir: PathBuf,
    /// Stream parameters for `recording.json` (`frame_size` sizes the buffers).
    pub header: Header,
    /// Frames that may wait for the writer.
    pub queue: usize,
    /// Stop after this many bytes of frame data.
    pub max_bytes: Option<u64>,
    /// Stop after this many frames.
    pub max_frames: Option<u64>,
    /// Try `O_DIRECT`.
    pub direct: bool,
    /// Make data and index durable once this many frame bytes are waiting (or every
    /// 500 ms, whichever comes first).
    pub sync_bytes: u64,
    /// Frame writes in flight at once (I/O threads).
    pub in_flight: usize,
    /// Test hook: the writer sleeps this long per frame (to provoke drops).
    pub writer_delay: Option<Duration>,
}

impl RecordConfig {
    /// Defaults: 8 queued frames, 4 writes in flight, direct I/O, data and index made durable
    /// every 128 MiB or 500 ms, whichever comes first (a kill loses nothing written; power
    /// loss at most that window).
    pub fn new(dir: PathBuf, header: Header) -> RecordConfig {
        RecordConfig {
            dir,
            header,
            queue: 8,
            max_bytes: None,
            max_frames: None,
            direct: true,
            sync_bytes: 128 << 20,
            in_flight: 4,
            writer_delay: None,
        }
    }
}

/// Counters of a recording.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) written: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) stopped: AtomicBool,
}

/// What a finished recording holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Frames written and indexed.
    pub frames: u64,
    /// Frame bytes written.
    pub bytes: u64,
    /// Frames dropped because the writer fell behind.
    pub dropped: u64,
    /// Whether `O_DIRECT` was used.
    pub direct: bool,
    /// Why `O_DIRECT`, asked for, was refused (the file system's answer): the data went
    /// through the page cache.
    pub direct_refused: Option<String>,
    /// Why it stopped early, if it did (limit reached, disk full, I/O error).
    pub stopped: Option<String>,
}

/// A running recording.
#[derive(Debug)]
pub struct Recorder {
    tx: Option<SyncSender<Msg>>,
    free: Receiver<AlignedBuf>,
    /// A free buffer taken by [`Recorder::has_room`], used by the next offer.
    spare: Option<AlignedBuf>,
    shared: Arc<Shared>,
    pending_drops: u32,
    max_len: usize,
    writer: Option<std::thread::JoinHandle<WriterResult>>,
}

pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Recorder {
    /// Create the directory and its files and start the writer thread.
    pub fn start(mut cfg: RecordConfig) -> io::Result<Recorder> {
        rocelink_io::file::own_dir(&cfg.dir, 0o755)?;
        cfg.header.format = "rocelink-recording".into();
        cfg.header.version = 1;
        cfg.header.alignment = ALIGN;
        cfg.header.created_ns = now_ns();
        rocelink_io::file::write_atomic(
            &cfg.dir.join("recording.json"),
            &serde_json::to_vec_pretty(&cfg.header).map_err(io::Error::from)?,
        )?;
        let max_len = (cfg.header.frame_size as usize).max(1);
        let nbuf = cfg.queue.max(1) + 1;
        let (free_tx, free) = sync_channel(nbuf);
        for _ in 0..nbuf {
            let _ = free_tx.send(AlignedBuf::new(max_len));
        }
        // One slot per buffer (a message carries one) and one for Close: holding a free
        // buffer guarantees room in the queue, so a send can only fail once the writer has
        // gone.
        let (tx, rx) = sync_channel::<Msg>(nbuf + 1);
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let me = tx.clone();
        let writer = std::thread::Builder::new()
            .name("rocelink-record".into())
            .spawn(move || writer::run(cfg, rx, me, free_tx, &s2))?;
        Ok(Recorder {
            tx: Some(tx),
            free,
            spare: None,
            shared,
            pending_drops: 0,
            max_len,
            writer: Some(writer),
        })
    }

    /// Offer a frame. Never blocks: returns false when it was dropped (writer behind, the
    /// recording stopped, or the frame is larger than the configured frame size).
    pub fn offer(&mut self, meta: &FrameMeta, data: &[u8]) -> bool {
        if self.shared.stopped.load(Ordering::Relaxed) || data.len() > self.max_len {
            return self.drop_one();
        }
        let mut buf = match self
            .spare
            .take()
            .map(Ok)
            .unwrap_or_else(|| self.free.try_recv())
        {
            Ok(b) => b,
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => return self.drop_one(),
        };
        buf.fill_from(data);
        let mut meta = *meta;
        meta.length = data.len() as u64;
        meta.dropped_before = std::mem::take(&mut self.pending_drops);
        let sent = match self.tx.as_ref() {
            Some(t) => t.try_send(Msg::Job(meta, buf)).is_ok(),
            None => false,
        };
        if sent {
            true
        } else {
            self.pending_drops = meta.dropped_before;
            self.drop_one()
        }
    }

    /// True when the next [`Recorder::offer`] will be taken, not dropped (a buffer is
    /// free and the recording goes on). For producers that can wait rather than drop —
    /// an IMS buffer unit holds the frame in its ring and the worker back.
    pub fn has_room(&mut self) -> bool {
        if self.stopped() {
            return false;
        }
        if self.spare.is_none() {
            self.spare = self.free.try_recv().ok();
        }
        self.spare.is_some()
    }

    fn drop_one(&mut self) -> bool {
        self.pending_drops = self.pending_drops.saturating_add(1);
        self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Frames written so far.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// True once a limit or an error stopped the recording.
    pub fn stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::Relaxed)
    }

    fn close(&mut self) {
        if let Some(t) = self.tx.take() {
            let _ = t.send(Msg::Close);
        }
    }

    /// Let the writer drain the queue and close the files.
    pub fn finish(mut self) -> io::Result<Summary> {
        self.close();
        let done = match self.writer.take().map(|h| h.join()) {
            Some(Ok(r)) => r?,
            // Error::other: a thread's panic or silence carries no typed error
            _ => return Err(io::Error::other("recorder thread panicked")),
        };
        Ok(Summary {
            frames: self.shared.written.load(Ordering::Relaxed),
            bytes: self.shared.bytes.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            direct: done.direct,
            direct_refused: done.direct_refused,
            stopped: done.stopped,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.close();
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}
