//! Recorder: aligned writes read back intact, drops whole frames when the writer is slow,
//! stops cleanly at a limit.

#![allow(clippy::unwrap_used)]

use rocelink_record::format::Header;
use rocelink_record::read::Recording;
use rocelink_record::{FrameMeta, RecordConfig, Recorder};
use std::path::PathBuf;
use std::time::Duration;

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn frame(n: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 31 + n * 7) as u8).collect()
}

fn meta(n: u64) -> FrameMeta {
    FrameMeta {
        frame_number: n,
        good: true,
        complete: true,
        crc_ok: true,
        crc_present: true,
        crc: n as u32,
        ..FrameMeta::default()
    }
}

#[test]
fn aligned_frames_read_back_intact() {
    let d = dir("rec_aligned");
    let len = 5000;
    let mut rec = Recorder::start(RecordConfig::new(
        d.clone(),
        Header {
            frame_size: len as u64,
            sensor: "pattern".into(),
            ..Header::default()
        },
    ))
    .unwrap();
    for n in 0..10 {
        // a slow offer rate: wait for the writer, so nothing is dropped
        while rec.written() < n {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(2));
        assert!(rec.offer(&meta(n), &frame(n, len)));
    }
    let s = rec.finish().unwrap();
    assert_eq!((s.frames, s.bytes, s.stopped), (10, 50_000, None));
    eprintln!("direct I/O: {}", s.direct);
    let r = Recording::open(&d).unwrap();
    assert_eq!(r.len(), 10);
    assert_eq!(r.torn_bytes, 0);
    for (i, e) in r.entries.iter().enumerate() {
        assert_eq!(e.offset % 4096, 0, "aligned");
        assert_eq!(e.offset, i as u64 * 8192);
        assert_eq!(e.frame_number, i as u64);
        assert_eq!(r.frame(i).unwrap(), frame(i as u64, len));
    }
    assert_eq!(
        std::fs::metadata(d.join("data.bin")).unwrap().len(),
        10 * 8192
    );
    let ins = r.inspect();
    assert_eq!(
        (ins.frames, ins.good, ins.crc_failures, ins.recorder_drops),
        (10, 10, 0, 0)
    );
}

#[test]
fn slow_writer_drops_whole_frames_and_counts_them() {
    let d = dir("rec_slow");
    let len = 20_000;
    let mut cfg = RecordConfig::new(
        d.clone(),
        Header {
            frame_size: len as u64,
            ..Header::default()
        },
    );
    cfg.queue = 2;
    cfg.writer_delay = Some(Duration::from_millis(20));
    let mut rec = Recorder::start(cfg).unwrap();
    let mut accepted = 0;
    for n in 0..100 {
        if rec.offer(&meta(n), &frame(n, len)) {
            accepted += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = rec.finish().unwrap();
    assert!(
        s.dropped > 50,
        "a 20 ms writer cannot keep up with 1 ms frames: {s:?}"
    );
    assert_eq!(s.frames + s.dropped, 100);
    assert_eq!(s.frames, accepted);
    let r = Recording::open(&d).unwrap();
    assert_eq!(r.len() as u64, s.frames);
    for (i, e) in r.entries.iter().enumerate() {
        assert_eq!(
            r.frame(i).unwrap(),
            frame(e.frame_number, len),
            "every recorded frame is whole"
        );
    }
    // every drop is in the recording: before a frame, or in the closing drop marker
    assert_eq!(r.inspect().recorder_drops, s.dropped);
}

#[test]
fn limits_stop_the_recording_cleanly() {
    let d = dir("rec_limit");
    let mut cfg = RecordConfig::new(
        d.clone(),
        Header {
            frame_size: 4096,
            ..Header::default()
        },
    );
    cfg.max_frames = Some(5);
    let mut rec = Recorder::start(cfg).unwrap();
    for n in 0..20 {
        rec.offer(&meta(n), &frame(n, 4096));
        std::thread::sleep(Duration::from_millis(2));
    }
    let s = rec.finish().unwrap();
    assert_eq!(s.frames, 5);
    assert_eq!(s.stopped.as_deref(), Some("limit reached"));
    assert_eq!(Recording::open(&d).unwrap().len(), 5);
    // a frame larger than the configured size is refused, not truncated
    let d2 = dir("rec_big");
    let mut rec = Recorder::start(RecordConfig::new(
        d2,
        Header {
            frame_size: 100,
            ..Header::default()
        },
    ))
    .unwrap();
    assert!(!rec.offer(&meta(0), &[0u8; 101]));
    assert_eq!(rec.finish().unwrap().frames, 0);
}

#[test]
fn writes_in_flight_are_indexed_in_arrival_order() {
    let d = dir("rec_inflight");
    let len = 30_000;
    let mut cfg = RecordConfig::new(
        d.clone(),
        Header {
            frame_size: len as u64,
            ..Header::default()
        },
    );
    cfg.queue = 32;
    cfg.in_flight = 4;
    let mut rec = Recorder::start(cfg).unwrap();
    let mut accepted = 0;
    for n in 0..400 {
        if rec.offer(&meta(n), &frame(n, len)) {
            accepted += 1;
        }
    }
    let s = rec.finish().unwrap();
    assert_eq!((s.frames + s.dropped, s.frames), (400, accepted));
    let r = Recording::open(&d).unwrap();
    assert_eq!(r.len() as u64, s.frames);
    for (i, e) in r.entries.iter().enumerate() {
        if i > 0 {
            let p = &r.entries[i - 1];
            assert!(e.frame_number > p.frame_number, "arrival order");
            assert_eq!(e.offset, p.offset + 32_768, "placed back to back");
        }
        assert_eq!(e.offset % 4096, 0);
        assert_eq!(r.frame(i).unwrap(), frame(e.frame_number, len));
    }
    assert_eq!(r.entries.len() as u64 + r.inspect().recorder_drops, 400);
}

#[test]
fn a_producer_that_waits_for_room_loses_nothing() {
    // the same slow writer as above, but the producer asks has_room() first and waits
    // (an IMS buffer unit holds frames in its ring): every frame is written, none dropped
    let d = dir("rec_room");
    let len = 20_000;
    let mut cfg = RecordConfig::new(
        d.clone(),
        Header {
            frame_size: len as u64,
            ..Header::default()
        },
    );
    cfg.queue = 2;
    cfg.writer_delay = Some(Duration::from_millis(5));
    let mut rec = Recorder::start(cfg).unwrap();
    let mut waited = 0;
    for n in 0..40 {
        for _ in 0..10_000 {
            if rec.has_room() {
                break;
            }
            waited += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(rec.offer(&meta(n), &frame(n, len)), "frame {n} had room");
    }
    let s = rec.finish().unwrap();
    assert!(waited > 0, "a 5 ms writer must make the producer wait");
    assert_eq!((s.frames, s.dropped), (40, 0));
    let r = Recording::open(&d).unwrap();
    assert!((0..40).all(|i| r.frame(i).unwrap() == frame(i as u64, len)));
}
