//! The writer side of a recording: a coordinator thread that places frames in `data.bin`
//! and publishes index records in arrival order, and a pool of I/O threads that do the
//! `pwrite`s, so several frame writes are in flight at once.
//!
//! Order of durability: a frame's index record is appended only once its own write and
//! the writes of every earlier frame completed, and a batch of records is written only after
//! an `fdatasync` of the data. Index space is reserved (`fallocate`) before the data it will
//! describe is written, so a disk filled by frame data still takes the records.

use crate::format::{self, Entry};
use crate::{RecordConfig, Shared, now_ns};
use rocelink_io::aligned::AlignedBuf;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Messages to the coordinator.
pub(crate) enum Msg {
    /// A frame from the receiver.
    Job(Entry, AlignedBuf),
    /// An I/O thread finished writing frame `seq`.
    Done(u64, Entry, AlignedBuf, io::Result<()>),
    /// The recorder is finishing: complete what is in flight and stop.
    Close,
}

/// What the coordinator returns.
pub(crate) struct Finished {
    /// Whether O_DIRECT was used.
    pub(crate) direct: bool,
    /// Why O_DIRECT, asked for, was refused (the data then went through the page cache).
    pub(crate) direct_refused: Option<String>,
    /// Why it stopped early.
    pub(crate) stopped: Option<String>,
}

/// What the coordinator thread ends with.
pub(crate) type WriterResult = io::Result<Finished>;

/// Index bytes reserved at a time (2048 records).
const INDEX_CHUNK: u64 = 256 * 1024;

/// `data.bin`, with O_DIRECT when asked for and allowed: (file, O_DIRECT used, why it was
/// refused).
fn open_data(cfg: &RecordConfig) -> io::Result<(File, bool, Option<String>)> {
    let path = cfg.dir.join("data.bin");
    let mut o = OpenOptions::new();
    // inside a directory of our own (own_dir); never through a link placed there
    o.create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    if cfg.direct {
        match o
            .clone()
            .custom_flags(libc::O_DIRECT | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => return Ok((f, true, None)),
            Err(e) => {
                let why = format!("O_DIRECT refused on {} ({e})", cfg.dir.display());
                return Ok((o.open(&path)?, false, Some(why)));
            }
        }
    }
    Ok((o.open(&path)?, false, None))
}

fn why(e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        "disk full".to_string()
    } else {
        format!("write error: {e}")
    }
}

struct Index {
    file: File,
    reserved: u64,
    pending: Vec<u8>,
    /// Frame bytes the pending records describe.
    pending_bytes: u64,
    last_sync: Instant,
}

impl Index {
    /// Record that `lost` frames after the last indexed one are missing (a drop marker).
    fn mark_drops(&mut self, lost: u64) {
        if lost > 0 {
            let n = u32::try_from(lost).unwrap_or(u32::MAX);
            self.pending
                .extend_from_slice(&Entry::drop_marker(n, now_ns()).encode());
        }
    }

    /// Make sure `records` records fit in reserved space.
    fn reserve(&mut self, records: u64) -> io::Result<()> {
        let need = records * format::RECORD_LEN as u64;
        while need > self.reserved {
            match rocelink_io::file::reserve(&self.file, self.reserved, INDEX_CHUNK) {
                Ok(()) => self.reserved += INDEX_CHUNK,
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.reserved = u64::MAX; // cannot reserve here: best effort
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Data first, then the records: a record never points at data not on disk.
    fn flush(&mut self, data: &File) -> io::Result<()> {
        self.pending_bytes = 0;
        self.last_sync = Instant::now();
        if self.pending.is_empty() {
            return Ok(());
        }
        data.sync_data()?;
        self.file.write_all(&self.pending)?;
        self.file.sync_data()?;
        self.pending.clear();
        Ok(())
    }
}

struct Coordinator<'a> {
    cfg: RecordConfig,
    shared: &'a Shared,
    free: SyncSender<AlignedBuf>,
    stopped: Option<String>,
    /// Frames and bytes handed to the I/O threads (for the limits).
    queued: (u64, u64),
    next_seq: u64,
    next_publish: u64,
    offset: u64,
    done: BTreeMap<u64, (Entry, AlignedBuf, io::Result<()>)>,
    /// Drops already counted by published index records.
    indexed_drops: u64,
}

impl Coordinator<'_> {
    fn stop(&mut self, why: String) {
        self.stopped.get_or_insert(why);
        self.shared.stopped.store(true, Ordering::Relaxed);
    }

    fn drop_frame(&mut self, buf: AlignedBuf) {
        let _ = self.free.try_send(buf);
        self.shared.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Place a frame and queue its write, or drop it (stopped, limit, no index space).
    fn place(&mut self, index: &mut Index, work: &Sender<Work>, meta: Entry, buf: AlignedBuf) {
        if self.stopped.is_some() {
            return self.drop_frame(buf);
        }
        if let Some(d) = self.cfg.writer_delay {
            std::thread::sleep(d);
        }
        let (frames, bytes) = self.queued;
        if self.cfg.max_frames.is_some_and(|m| frames >= m)
            || self.cfg.max_bytes.is_some_and(|m| bytes + meta.length > m)
        {
            self.stop("limit reached".into());
            return self.drop_frame(buf);
        }
        if let Err(e) = index.reserve(frames + 1) {
            self.stop(why(&e));
            return self.drop_frame(buf);
        }
        let offset = self.offset;
        self.offset += buf.padded().len() as u64;
        self.queued = (frames + 1, bytes + meta.length);
        let _ = work.send((self.next_seq, offset, meta, buf));
        self.next_seq += 1;
    }

    /// Publish every completed write whose predecessors completed too.
    fn publish(&mut self, index: &mut Index, data: &File) {
        while let Some((meta, buf, result)) = self.done.remove(&self.next_publish) {
            self.next_publish += 1;
            match result {
                Ok(()) if self.stopped.as_deref() != Some("disk full") => {
                    let mut meta = meta;
                    meta.recorded_ns = now_ns();
                    self.indexed_drops += u64::from(meta.dropped_before);
                    index.pending.extend_from_slice(&meta.encode());
                    index.pending_bytes += meta.length;
                    self.shared.written.fetch_add(1, Ordering::Relaxed);
                    self.shared.bytes.fetch_add(meta.length, Ordering::Relaxed);
                    let _ = self.free.try_send(buf);
                }
                Ok(()) => self.drop_frame(buf),
                Err(e) => {
                    self.stop(why(&e));
                    self.drop_frame(buf);
                    // make what was written durable now, not when the receiver ends
                    if let Err(e) = index.flush(data) {
                        self.stop(format!("sync error: {e}"));
                    }
                }
            }
        }
        let due = index.pending_bytes >= self.cfg.sync_bytes
            || index.last_sync.elapsed() > Duration::from_millis(500);
        if due && let Err(e) = index.flush(data) {
            self.stop(format!("sync error: {e}"));
        }
    }
}

/// The coordinator thread's body.
/// A frame write for an I/O thread: (sequence number, offset, index entry, bytes).
type Work = (u64, u64, Entry, AlignedBuf);

/// Start `n` I/O threads writing what comes on the returned sender into `data`, each
/// telling the coordinator (`me`) when a write is done.
fn start_io(
    n: usize,
    data: &Arc<File>,
    me: SyncSender<Msg>,
) -> io::Result<(Sender<Work>, Vec<std::thread::JoinHandle<()>>)> {
    let (work, work_rx) = channel::<Work>();
    let work_rx = Arc::new(Mutex::new(work_rx));
    let mut io_threads = Vec::new();
    for i in 0..n {
        let (work_rx, data, me) = (work_rx.clone(), data.clone(), me.clone());
        io_threads.push(
            std::thread::Builder::new()
                .name(format!("rocelink-rec-io{i}"))
                .spawn(move || {
                    loop {
                        let next = match work_rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => break,
                        };
                        let Ok((seq, offset, mut meta, buf)) = next else {
                            break;
                        };
                        meta.offset = offset;
                        let r = data.write_all_at(buf.padded(), offset);
                        if me.send(Msg::Done(seq, meta, buf, r)).is_err() {
                            break;
                        }
                    }
                })?,
        );
    }
    Ok((work, io_threads))
}

pub(crate) fn run(
    cfg: RecordConfig,
    rx: Receiver<Msg>,
    me: SyncSender<Msg>,
    free: SyncSender<AlignedBuf>,
    shared: &Shared,
) -> WriterResult {
    let (data, direct, direct_refused) = open_data(&cfg)?;
    let data = Arc::new(data);
    let mut index = Index {
        file: OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(cfg.dir.join("index.bin"))?,
        reserved: 0,
        pending: Vec::new(),
        pending_bytes: 0,
        last_sync: Instant::now(),
    };
    let (work, io_threads) = start_io(cfg.in_flight.max(1), &data, me)?;
    let mut c = Coordinator {
        cfg,
        shared,
        free,
        stopped: None,
        queued: (0, 0),
        next_seq: 0,
        next_publish: 0,
        offset: 0,
        done: BTreeMap::new(),
        indexed_drops: 0,
    };
    let mut closing = false;
    // ends when the recorder closed and every queued write came back (or everything hung up)
    while !(closing && c.next_publish == c.next_seq) {
        match rx.recv() {
            Ok(Msg::Job(meta, buf)) => c.place(&mut index, &work, meta, buf),
            Ok(Msg::Done(seq, meta, buf, r)) => {
                c.done.insert(seq, (meta, buf, r));
                c.publish(&mut index, &data);
            }
            Ok(Msg::Close) => closing = true,
            Err(_) => break, // every I/O thread is gone: nothing more can complete
        }
    }
    drop(work);
    for t in io_threads {
        let _ = t.join();
    }
    // frames lost after the last indexed one (full disk, limit, writer behind) are
    // recorded too, in a drop marker, so the recording says what it is missing
    let lost = shared.dropped.load(Ordering::Relaxed);
    index.mark_drops(lost.saturating_sub(c.indexed_drops));
    if let Err(e) = index.flush(&data) {
        c.stop(format!("sync error: {e}"));
    }
    Ok(Finished {
        direct,
        direct_refused,
        stopped: c.stopped,
    })
}
