//! Recording frames to disk without ever stalling the receiver.
//!
//! [`Recorder::offer`] copies a frame into a free page-aligned buffer and hands it to a
//! writer thread through a bounded queue; when no buffer is free (the writer fell behind) the
//! whole frame is dropped and counted — never a partial frame, never a blocked receiver, like
//! the ultrasound paper's "discard the shot and reuse the buffer". The writer appends frames
//! to `data.bin` at 4096-aligned offsets with `O_DIRECT` (plain writes with a notice where the
//! filesystem refuses it), and appends each frame's index record only after its data write
//! completed; every batch of index records is written after an `fdatasync` of the data. After
//! `kill -9` every frame in the index reads back intact; a full disk ends the recording with a
//! clear error and a valid directory. See [`format`] for the layout.
//!
//! ```no_run
//! use rocelink_record::{Recorder, RecordConfig, FrameMeta, format::Header};
//! let header = Header { sensor: "pattern".into(), frame_size: 4096, ..Header::default() };
//! let mut rec = Recorder::start(RecordConfig::new("/tmp/rec".into(), header)).unwrap();
//! rec.offer(&FrameMeta { frame_number: 0, good: true, complete: true, ..FrameMeta::default() }, &[0u8; 4096]);
//! let summary = rec.finish().unwrap();
//! assert_eq!(summary.frames, 1);
//! ```

pub mod format;
pub mod read;

use format::{ALIGN, Entry, Header};
use rocelink_io::aligned::AlignedBuf;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// Frames per `fdatasync` batch.
    pub sync_every: usize,
    /// Test hook: the writer sleeps this long per frame (to provoke drops).
    pub writer_delay: Option<Duration>,
}

impl RecordConfig {
    /// Defaults: 8 queued frames, direct I/O, data and index made durable every 64 frames
    /// or 500 ms, whichever comes first (a kill loses nothing written; power loss at most
    /// that window).
    pub fn new(dir: PathBuf, header: Header) -> RecordConfig {
        RecordConfig {
            dir,
            header,
            queue: 8,
            max_bytes: None,
            max_frames: None,
            direct: true,
            sync_every: 64,
            writer_delay: None,
        }
    }
}

/// Counters of a recording.
#[derive(Debug, Default)]
struct Shared {
    written: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    stopped: AtomicBool,
}

/// What a finished recording holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Frames written and indexed.
    pub frames: u64,
    /// Frame bytes written.
    pub bytes: u64,
    /// Frames dropped because the writer fell behind.
    pub dropped: u64,
    /// Whether `O_DIRECT` was used.
    pub direct: bool,
    /// Why it stopped early, if it did (limit reached, disk full, I/O error).
    pub stopped: Option<String>,
}

struct Job {
    meta: Entry,
    buf: AlignedBuf,
}

/// A running recording.
#[derive(Debug)]
pub struct Recorder {
    tx: Option<SyncSender<Job>>,
    free: Receiver<AlignedBuf>,
    shared: Arc<Shared>,
    pending_drops: u32,
    max_len: usize,
    writer: Option<std::thread::JoinHandle<WriterResult>>,
}

/// What the writer thread returns: whether a limit stopped it, and the error that did.
type WriterResult = io::Result<(bool, Option<String>)>;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Recorder {
    /// Create the directory and its files and start the writer thread.
    pub fn start(mut cfg: RecordConfig) -> io::Result<Recorder> {
        std::fs::create_dir_all(&cfg.dir)?;
        cfg.header.format = "rocelink-recording".into();
        cfg.header.version = 1;
        cfg.header.alignment = ALIGN;
        cfg.header.created_ns = now_ns();
        let tmp = cfg.dir.join("recording.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&cfg.header).map_err(io::Error::other)?,
        )?;
        std::fs::rename(&tmp, cfg.dir.join("recording.json"))?;
        let max_len = (cfg.header.frame_size as usize).max(1);
        let nbuf = cfg.queue.max(1) + 1;
        let (free_tx, free) = sync_channel(nbuf);
        for _ in 0..nbuf {
            let _ = free_tx.send(AlignedBuf::new(max_len));
        }
        // One slot per buffer: holding a free buffer guarantees room in the queue, so a
        // send can only fail once the writer has gone.
        let (tx, rx) = sync_channel::<Job>(nbuf);
        let shared = Arc::new(Shared::default());
        let s2 = shared.clone();
        let writer = std::thread::Builder::new()
            .name("rocelink-record".into())
            .spawn(move || writer(cfg, rx, free_tx, &s2))?;
        Ok(Recorder {
            tx: Some(tx),
            free,
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
        let mut buf = match self.free.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => return self.drop_one(),
        };
        buf.fill_from(data);
        let mut meta = *meta;
        meta.length = data.len() as u64;
        meta.dropped_before = std::mem::take(&mut self.pending_drops);
        let sent = match self.tx.as_ref() {
            Some(t) => t.try_send(Job { meta, buf }).is_ok(),
            None => false,
        };
        if sent {
            true
        } else {
            self.pending_drops = meta.dropped_before;
            self.drop_one()
        }
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

    /// Let the writer drain the queue and close the files.
    pub fn finish(mut self) -> io::Result<Summary> {
        self.tx.take();
        let (direct, stopped) = match self.writer.take().map(|h| h.join()) {
            Some(Ok(r)) => r?,
            _ => return Err(io::Error::other("recorder thread panicked")),
        };
        Ok(Summary {
            frames: self.shared.written.load(Ordering::Relaxed),
            bytes: self.shared.bytes.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            direct,
            stopped,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

fn open_data(cfg: &RecordConfig) -> io::Result<(File, bool)> {
    let path = cfg.dir.join("data.bin");
    if cfg.direct {
        match OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        {
            Ok(f) => return Ok((f, true)),
            Err(e) => eprintln!(
                "rocelink record: O_DIRECT refused on {} ({e}); writing through the page cache",
                cfg.dir.display()
            ),
        }
    }
    Ok((
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?,
        false,
    ))
}

/// Index bytes reserved at a time (2048 records).
const INDEX_CHUNK: u64 = 256 * 1024;

fn writer(
    cfg: RecordConfig,
    rx: Receiver<Job>,
    free: SyncSender<AlignedBuf>,
    shared: &Shared,
) -> io::Result<(bool, Option<String>)> {
    let (data, direct) = open_data(&cfg)?;
    let mut index = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(cfg.dir.join("index.bin"))?;
    let mut offset = 0u64;
    let mut pending: Vec<u8> = Vec::new();
    let mut pending_n = 0usize;
    let mut last_sync = Instant::now();
    let mut stopped: Option<String> = None;
    // Index space is reserved ahead of the data it will describe, so a disk that fills up
    // with frame data still has room for the records of every frame written.
    let mut reserved = 0u64;
    let flush = |index: &mut File, data: &File, pending: &mut Vec<u8>| -> io::Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        // data first: an index record never points at data that is not on disk
        data.sync_data()?;
        index.write_all(pending)?;
        index.sync_data()?;
        pending.clear();
        Ok(())
    };
    while let Ok(Job { mut meta, buf }) = rx.recv() {
        if stopped.is_some() {
            let _ = free.try_send(buf);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if let Some(d) = cfg.writer_delay {
            std::thread::sleep(d);
        }
        let written = shared.written.load(Ordering::Relaxed);
        let bytes = shared.bytes.load(Ordering::Relaxed);
        if cfg.max_frames.is_some_and(|m| written >= m)
            || cfg.max_bytes.is_some_and(|m| bytes + meta.length > m)
        {
            stopped = Some("limit reached".into());
            shared.stopped.store(true, Ordering::Relaxed);
            let _ = free.try_send(buf);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let need = (shared.written.load(Ordering::Relaxed) + 1) * format::RECORD_LEN as u64;
        let room = if need <= reserved {
            Ok(())
        } else {
            match rocelink_io::file::reserve(&index, reserved, INDEX_CHUNK) {
                Ok(()) => {
                    reserved += INDEX_CHUNK;
                    Ok(())
                }
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    reserved = u64::MAX; // cannot reserve here: best effort
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        match room.and_then(|()| data.write_all_at(buf.padded(), offset)) {
            Ok(()) => {}
            Err(e) => {
                let why = if e.raw_os_error() == Some(libc::ENOSPC) {
                    "disk full".to_string()
                } else {
                    format!("write error: {e}")
                };
                stopped = Some(why);
                shared.stopped.store(true, Ordering::Relaxed);
                let _ = free.try_send(buf);
                shared.dropped.fetch_add(1, Ordering::Relaxed);
                // make what was written durable now, not when the receiver ends
                if let Err(e) = flush(&mut index, &data, &mut pending) {
                    stopped = Some(format!("sync error: {e}"));
                }
                continue;
            }
        }
        meta.offset = offset;
        meta.recorded_ns = now_ns();
        offset += buf.padded().len() as u64;
        pending.extend_from_slice(&meta.encode());
        pending_n += 1;
        shared.written.fetch_add(1, Ordering::Relaxed);
        shared.bytes.fetch_add(meta.length, Ordering::Relaxed);
        let _ = free.try_send(buf);
        if pending_n >= cfg.sync_every.max(1) || last_sync.elapsed() > Duration::from_millis(500) {
            if let Err(e) = flush(&mut index, &data, &mut pending) {
                stopped = Some(format!("sync error: {e}"));
                shared.stopped.store(true, Ordering::Relaxed);
            }
            pending_n = 0;
            last_sync = Instant::now();
        }
    }
    if let Err(e) = flush(&mut index, &data, &mut pending) {
        stopped.get_or_insert(format!("sync error: {e}"));
    }
    Ok((direct, stopped))
}
