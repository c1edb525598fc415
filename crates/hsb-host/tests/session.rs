//! The HSB host as a session against the emulator over loopback: virtual ports on their
//! own threads each receive every frame byte-exact, a stop from another thread ends it,
//! a silent device is an error naming the port, bad configurations fail before anything
//! opens.
#![allow(clippy::unwrap_used)]

use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, Pacing};
use rocelink_hsb::sensor::Sensor;
use rocelink_hsb_host::session::{Device, HostConfig, HostError, HostSession, Note};
use rocelink_hsb_host::{Delivered, FrameSink, Limits, SessionError, StopReason};
use rocelink_runtime::Session;
use rocelink_testkit::emulator::Running;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

const FRAME: usize = 40_000;

/// What a virtual port's sink saw: (frame number, good, byte-exact).
#[derive(Debug, Default)]
struct Seen(Vec<(u64, bool, bool)>);

impl FrameSink for Seen {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        let mut want = Vec::new();
        Sensor::Pattern.frame(d.report.frame_number, FRAME, &mut want);
        self.0
            .push((d.report.frame_number, d.report.good(), d.data == &want[..]));
        Ok(())
    }
}

fn emulator(dev: Ipv4Addr) -> Running {
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev));
    cfg.bootp_target = None;
    cfg.sensor = Sensor::Pattern;
    cfg.pacing = Pacing::Fps(200.0);
    Running::start(&cfg)
}

fn host_of(dev: Ipv4Addr) -> SocketAddr {
    let o = dev.octets();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 1)), 0)
}

#[test]
fn two_virtual_ports_each_receive_every_frame_on_their_own_thread() {
    let dev = Ipv4Addr::new(127, 0, 79, 2);
    let emu = emulator(dev);
    let mut cfg = HostConfig::new(Device::ecb(dev), host_of(dev), FRAME);
    cfg.vps = vec![0, 1];
    cfg.limits = Limits::frames(12);
    let mut notes = Vec::new();
    let s = HostSession::start(
        cfg,
        vec![Seen::default(), Seen::default()],
        None,
        &mut |n| notes.push(n.clone()),
    )
    .unwrap();
    assert_eq!(s.vps(), [0, 1]);
    let Ok(sum) = s.wait();
    emu.stop();
    let ports: Vec<_> = notes
        .iter()
        .filter_map(|n| match n {
            Note::Port { vp, .. } => Some(*vp),
            _ => None,
        })
        .collect();
    assert_eq!(ports, [0, 1], "{notes:?}");
    assert_eq!(sum.ports.len(), 2);
    assert!(sum.warnings.is_empty(), "{:?}", sum.warnings);
    for p in &sum.ports {
        let out = p.outcome.as_ref().unwrap();
        assert_eq!((out.frames, out.stopped), (12, StopReason::Frames));
        let seen = &p.sink.0;
        assert_eq!(seen.len(), 12, "vp {}", p.vp);
        assert!(seen.iter().all(|s| s.1 && s.2), "vp {}: {seen:?}", p.vp);
        assert!(seen.windows(2).all(|w| w[1].0 == w[0].0 + 1), "in order");
        assert_eq!(p.stats.frames, 12, "{:?}", p.stats);
    }
}

#[test]
fn a_stopper_on_another_thread_ends_every_port() {
    let dev = Ipv4Addr::new(127, 0, 79, 3);
    let emu = emulator(dev);
    let cfg = HostConfig::new(Device::ecb(dev), host_of(dev), FRAME);
    let s = HostSession::start(cfg, vec![Seen::default()], None, &mut |_| {}).unwrap();
    let stop = s.stopper();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.stop();
    });
    let t0 = Instant::now();
    let Ok(sum) = s.wait();
    t.join().unwrap();
    emu.stop();
    assert!(t0.elapsed() < Duration::from_secs(20), "bounded");
    let p = &sum.ports[0];
    let out = p.outcome.as_ref().unwrap();
    assert_eq!(out.stopped, StopReason::Stopped);
    assert!(out.frames > 0, "200 fps for 300 ms: {out:?}");
    assert_eq!(p.sink.0.len() as u64, out.frames);
    assert!(p.sink.0.iter().all(|s| s.1 && s.2));
}

#[test]
fn a_silent_device_is_an_error_that_names_its_port() {
    // a passive host told of a device that never sends
    let dev = Ipv4Addr::new(127, 0, 79, 4);
    let device = Device::Passive {
        ip: dev,
        qp: 0x123,
        rkey: 0x456,
    };
    let mut cfg = HostConfig::new(device, host_of(dev), FRAME);
    cfg.limits.timeout = Duration::from_millis(300);
    let s = HostSession::start(cfg, vec![Seen::default()], None, &mut |_| {}).unwrap();
    let Ok(sum) = s.wait();
    match &sum.ports[0].outcome {
        Err(HostError::Frames {
            vp: 0,
            source: SessionError::NoFrame { .. },
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(sum.ports[0].sink.0.is_empty());
}

#[test]
fn bad_configurations_fail_before_anything_opens() {
    let dev = Ipv4Addr::new(127, 0, 79, 5);
    let start = |cfg: HostConfig, sinks: usize| {
        let sinks = (0..sinks).map(|_| Seen::default()).collect();
        HostSession::start(cfg, sinks, None, &mut |_| {}).unwrap_err()
    };
    let base = HostConfig::new(Device::ecb(dev), host_of(dev), FRAME);
    let mut twice = base.clone();
    twice.vps = vec![1, 1];
    assert!(matches!(start(twice, 2), HostError::Vps));
    assert!(matches!(
        start(base.clone(), 2),
        HostError::Sinks { sinks: 2, vps: 1 }
    ));
    let mut huge = base.clone();
    huge.pages = u32::MAX;
    assert!(matches!(start(huge, 1), HostError::Ring { .. }));
    for mtu in [255, 9001] {
        let mut odd = base.clone();
        odd.mtu = mtu;
        assert!(matches!(start(odd, 1), HostError::Mtu(m) if m == mtu));
    }
    let passive = Device::Passive {
        ip: dev,
        qp: 1,
        rkey: 1,
    };
    let mut two = HostConfig::new(passive, host_of(dev), FRAME);
    two.vps = vec![0, 1];
    assert!(matches!(start(two, 2), HostError::PassiveSeveral));
    // no device answers at this address: nothing was started, the error names it
    let mut quiet = base;
    quiet.device = Device::ecb(Ipv4Addr::new(127, 0, 79, 6));
    let e = start(quiet, 1);
    assert!(e.to_string().contains("127.0.79.6:8192"), "{e}");
}

#[test]
fn the_default_mtu_is_the_links_within_hsbs_range() {
    // loopback's 64 KiB is taken as a jumbo link, as the CLI and Python take it
    let dev = Ipv4Addr::new(127, 0, 79, 8);
    let cfg = HostConfig::new(Device::ecb(dev), host_of(dev), FRAME);
    let lo = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
    let want = lo.trim().parse::<u32>().unwrap().clamp(256, 9000);
    assert_eq!(cfg.mtu, want);
    assert_eq!(rocelink_hsb_host::session::iface_mtu("lo"), want);
    assert_eq!(rocelink_hsb_host::session::iface_mtu("no-such-if0"), 1500);
}

#[test]
fn a_config_is_plain_data_that_round_trips_through_json() {
    let dev = Ipv4Addr::new(127, 0, 79, 7);
    let mut cfg = HostConfig::new(Device::ecb(dev), host_of(dev), FRAME);
    cfg.vps = vec![0, 1];
    cfg.limits = Limits::frames(5);
    cfg.bring_up.camera = Some(rocelink_hsb::sensor::Imx274Mode::P2160Raw12);
    cfg.tuning.cpus = vec![2, 3];
    let v = serde_json::to_value(&cfg).unwrap();
    let back: HostConfig = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    assert_eq!(back.vps, [0, 1]);
    assert_eq!(back.device, Device::ecb(dev));
    assert_eq!(v["bring_up"]["camera"], "P2160Raw12", "{v}");
    assert_eq!(v["limits"]["frames"], 5, "{v}");
}
