//! The frame pipeline against the emulator over loopback: every sink sees every frame in
//! order, the recording holds them, a stop request and silence end the loop as documented.
#![allow(clippy::unwrap_used)]

use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, Pacing};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_hsb::sensor::Sensor;
use rocelink_hsb_host::*;
use rocelink_testkit::emulator::Running;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const FRAME: usize = 50_000;

fn setup(dev: Ipv4Addr) -> (Receiver, Control, Running) {
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev));
    cfg.bootp_target = None;
    cfg.sensor = Sensor::Pattern;
    cfg.pacing = Pacing::Fps(200.0);
    // bound before the host starts: no sleep needed
    let emu = Running::start(&cfg);
    let o = dev.octets();
    let host = Ipv4Addr::new(o[0], o[1], o[2], 1);
    let rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, FRAME);
    let rx = Receiver::new(rc).unwrap();
    let ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    (rx, ctl, emu)
}

#[test]
fn every_sink_sees_every_frame_and_the_recording_holds_them() {
    let (mut rx, mut ctl, emu) = setup(Ipv4Addr::new(127, 0, 78, 2));
    rx.configure(&mut ctl).unwrap();
    let dir = std::env::temp_dir().join(format!("rocelink-hsb-host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // room for all 20 frames: the recorder drops what its writer cannot take (by design,
    // tested in rocelink-record), and a loaded machine's disk once fell 11 frames behind
    let mut cfg = RecordSink::config(dir.clone(), None, FRAME);
    cfg.queue = 32;
    let mut rec = RecordSink::start(cfg).unwrap();
    let mut json = JsonLines::new(Vec::new());
    let mut seen = Vec::new();
    let mut mine = |d: &Delivered<'_>| -> Result<(), SessionError> {
        let mut want = Vec::new();
        Sensor::Pattern.frame(d.report.frame_number, FRAME, &mut want);
        seen.push((
            d.report.frame_number,
            d.report.good(),
            d.data == &want[..],
            d.last,
        ));
        Ok(())
    };
    let never = AtomicBool::new(false);
    let out = {
        let mut sinks: [&mut dyn FrameSink; 3] = [&mut rec, &mut json, &mut mine];
        let out = run(&mut rx, &Limits::frames(20), &never, &mut sinks).unwrap();
        finish(&mut sinks).unwrap();
        out
    };
    rx.stop(&mut ctl).unwrap();
    emu.stop();
    assert_eq!((out.frames, out.stopped), (20, StopReason::Frames));
    assert_eq!(seen.len(), 20);
    assert!(
        seen.iter().all(|s| s.1 && s.2),
        "good and byte-exact: {seen:?}"
    );
    assert!(seen.windows(2).all(|w| w[1].0 == w[0].0 + 1), "in order");
    assert_eq!(
        seen.iter().filter(|s| s.3).count(),
        1,
        "only the 20th is last"
    );
    assert!(seen[19].3);
    let lines = String::from_utf8(json.into_inner()).unwrap();
    assert_eq!(lines.lines().count(), 20);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["good"], true);
    assert_eq!(rec.summary().unwrap().frames, 20);
    let r = rocelink_record::read::Recording::open(&dir).unwrap();
    assert_eq!(r.len(), 20);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_request_and_silence_end_the_loop() {
    let (mut rx, _ctl, emu) = setup(Ipv4Addr::new(127, 0, 79, 2));
    // stop already requested: no frame, stopped
    let stop = AtomicBool::new(true);
    let out = run(&mut rx, &Limits::unlimited(), &stop, &mut []).unwrap();
    assert_eq!((out.frames, out.stopped), (0, StopReason::Stopped));
    // the device was never configured: silence, and the error says nothing arrived
    stop.store(false, Ordering::Relaxed);
    let lim = Limits::unlimited().with_timeout(Duration::from_millis(300));
    let e = run(&mut rx, &lim, &stop, &mut []).unwrap_err();
    assert!(matches!(e, SessionError::NoFrame { after: 0, .. }), "{e}");
    assert!(e.to_string().contains("no RoCE datagram arrived"), "{e}");
    emu.stop();
}
