//! The IMS roles as sessions over loopback: a worker streaming without end is stopped
//! from another thread and every frame it saw ACKed was consumed; bad settings fail
//! before anything is bound.
#![allow(clippy::unwrap_used)]

use rocelink_ims::Error;
use rocelink_ims::WorkerState;
use rocelink_ims::session::unit::{Consume, UnitSession, UnitSessionConfig};
use rocelink_ims::session::worker::{Frames, WorkerSession, WorkerSessionConfig};
use rocelink_runtime::Session;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 81, last))
}

#[test]
fn a_stopped_worker_leaves_every_acked_frame_consumed() {
    let mut u = UnitSessionConfig::new(ip(2));
    u.unit.ring_bytes = 8 << 20;
    u.consume = Consume::Rate(20.0);
    let unit = UnitSession::start(u, None).unwrap();
    let mut s = WorkerSessionConfig::new(unit.local(), Frames::Pattern { len: 64 << 10 });
    s.local = Some(ip(1));
    let worker = WorkerSession::start(s, None).unwrap();
    let stop = worker.stopper();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        stop.stop();
    });
    let sent = worker.wait().unwrap();
    t.join().unwrap();
    assert_eq!(sent.state, WorkerState::Done, "{:?}", sent.failure());
    assert!(sent.stats.frames > 10, "{:?}", sent.stats);
    assert!(sent.unacknowledged.is_empty());
    let served = unit.stop().unwrap();
    assert_eq!(served.unconsumed, 0);
    assert_eq!(served.stats.frames_consumed, sent.stats.frames);
    assert_eq!(served.stats.image_crc_failures, 0);
    assert!(served.seconds > 0.3);
}

#[test]
fn bad_settings_fail_before_anything_is_bound() {
    let mut u = UnitSessionConfig::new(ip(3));
    u.unit.ring_bytes = 100;
    assert_eq!(
        UnitSession::start(u, None).unwrap_err(),
        Error::RingSize(100)
    );
    let mut u = UnitSessionConfig::new(ip(3));
    u.consume = Consume::Rate(0.0);
    assert_eq!(UnitSession::start(u, None).unwrap_err(), Error::Rate(0.0));
    let unit = SocketAddr::new(ip(4), 4791);
    let mut s = WorkerSessionConfig::new(unit, Frames::Pattern { len: 4096 });
    s.worker.packet_bytes = 100;
    assert_eq!(
        WorkerSession::start(s, None).unwrap_err(),
        Error::PacketSize(100)
    );
    let file = Frames::File {
        path: "/nonexistent/frames.bin".into(),
        len: 4096,
        repeat: false,
    };
    match WorkerSession::start(WorkerSessionConfig::new(unit, file), None).unwrap_err() {
        Error::File { path, .. } => {
            assert_eq!(path, std::path::Path::new("/nonexistent/frames.bin"))
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn configs_are_plain_data_that_round_trip_through_json() {
    let mut u = UnitSessionConfig::new(ip(5));
    u.consume = Consume::Record("/tmp/rec".into());
    u.frames = Some(7);
    let v = serde_json::to_value(&u).unwrap();
    let back: UnitSessionConfig = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    assert_eq!(back.consume, Consume::Record("/tmp/rec".into()));
    let mut s =
        WorkerSessionConfig::new(SocketAddr::new(ip(5), 4791), Frames::Pattern { len: 4096 });
    s.worker.mark_bad = Some(rocelink_ims::MarkBad {
        every: 3,
        marks: rocelink_wire::ims::marks::EBF,
    });
    let v = serde_json::to_value(&s).unwrap();
    let back: WorkerSessionConfig = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    assert_eq!(back.frames, Frames::Pattern { len: 4096 });
}

#[test]
fn queued_frames_of_any_length_and_images_arrive_as_sent_with_their_bytes() {
    use rocelink_ims::Queued;
    use rocelink_wire::ims::{ImageGeometry, PixelDepth};
    let mut u = UnitSessionConfig::new(ip(5));
    u.unit.ring_bytes = 8 << 20;
    u.with_data = true;
    let unit = UnitSession::start(u, None).unwrap();
    let mut s = WorkerSessionConfig::new(unit.local(), Frames::Queue { max_len: 1 << 16 });
    s.local = Some(ip(6));
    let worker = WorkerSession::start(s, None).unwrap();
    let q = worker.queue().unwrap().clone();
    let raw: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    let geometry = ImageGeometry {
        columns: 40,
        rows: 30,
    };
    let pixels: Vec<u8> = (0..1200u32).map(|i| (i % 64) as u8).collect();
    // a moment with nothing queued: the worker waits for frames rather than closing
    std::thread::sleep(Duration::from_millis(100));
    assert!(q.push(Queued::Bytes(raw.clone())));
    assert!(q.push(Queued::Image {
        pixels,
        geometry,
        depth: PixelDepth::Six
    }));
    q.close();
    assert!(!q.push(Queued::Bytes(vec![0; 4096])), "closed");
    let sent = worker.wait().unwrap();
    assert_eq!(sent.state, WorkerState::Done, "{:?}", sent.failure());
    assert_eq!(sent.stats.frames, 2);
    assert_eq!(sent.stats.bytes, 10_000 + 64 + 1200);
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(unit.next_event(Duration::from_secs(5)).unwrap());
    }
    assert_eq!(got[0].data.as_deref(), Some(&raw[..]));
    assert!(!got[0].intact, "raw bytes carry no §4 header");
    let img = got[1].data.clone().unwrap();
    assert_eq!(img.len(), 64 + 1200);
    assert!(got[1].intact, "the image's header: CRC-32C and VA");
    assert_eq!(
        img[64..],
        (0..1200u32).map(|i| (i % 64) as u8).collect::<Vec<_>>()[..]
    );
    unit.stop().unwrap();
}

#[test]
fn with_data_every_an_hour_only_the_first_frame_carries_its_bytes() {
    let mut u = UnitSessionConfig::new(ip(7));
    u.unit.ring_bytes = 8 << 20;
    u.with_data = true;
    u.data_every = Duration::from_secs(3600);
    let unit = UnitSession::start(u, None).unwrap();
    let mut s = WorkerSessionConfig::new(unit.local(), Frames::Pattern { len: 4096 });
    s.local = Some(ip(8));
    s.count = Some(20);
    let sent = WorkerSession::start(s, None).unwrap().wait().unwrap();
    assert_eq!(sent.state, WorkerState::Done, "{:?}", sent.failure());
    let got: Vec<_> = (0..20)
        .map(|_| unit.next_event(Duration::from_secs(5)).unwrap())
        .collect();
    assert_eq!(got[0].data.as_ref().map(|d| d.len()), Some(4096));
    assert!(got[1..].iter().all(|e| e.data.is_none() && e.len == 4096));
    unit.stop().unwrap();
}
