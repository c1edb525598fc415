//! A host bringing up emulated IMX274s over I2C through the sequencer, as HSB's host does on
//! a real board: nothing streams until the camera is configured and started; each mode
//! gives frames of its size, byte-exact; a stopped camera stops; bad addresses and absent
//! peripherals are clear errors; two cameras on one port stream to two receivers on two
//! threads.

#![allow(clippy::unwrap_used)]

use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, Pacing};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::i2c::{I2c, I2cError};
use rocelink_hsb::host::imx274::Camera;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_hsb::regs::i2c::CAM_BUS;
use rocelink_hsb::sensor::{Imx274Mode, Sensor};
use rocelink_testkit::emulator::Running;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

fn emulator(dev: Ipv4Addr, cameras: usize) -> Running {
    let mut d = DeviceConfig::new(dev);
    d.cameras = cameras;
    let mut cfg = EmulatorConfig::new(d);
    cfg.bootp_target = None;
    cfg.pacing = Pacing::Fps(100.0);
    cfg.link_gbps = 20.0;
    Running::start(&cfg)
}

fn receiver(dev: Ipv4Addr, vp: u32, mode: Imx274Mode) -> Receiver {
    let o = dev.octets();
    let host = IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 1));
    let mut rc = ReceiverConfig::new(SocketAddr::new(host, 0), dev, mode.frame_len());
    rc.pages = 2;
    rc.vp = vp;
    Receiver::new(rc).unwrap()
}

/// `n` good frames, each byte-exact against the camera's mode.
fn frames_of(rx: &mut Receiver, mode: Imx274Mode, n: usize) {
    let mut want = Vec::new();
    for _ in 0..n {
        let f = rx
            .next_frame(Duration::from_secs(5))
            .unwrap()
            .expect("a frame");
        assert!(f.good(), "{f:?}");
        let data = rx.frame_data(&f);
        assert_eq!(data.len(), mode.frame_len());
        Sensor::Imx274(mode).frame(f.frame_number, mode.frame_len(), &mut want);
        assert!(data == &want[..], "frame {} differs", f.frame_number);
    }
}

#[test]
fn each_mode_streams_only_after_bring_up_and_stops_on_stop() {
    let dev = Ipv4Addr::new(127, 0, 170, 2);
    let emu = emulator(dev, 2);
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    let cam = Camera::new(0).unwrap();
    for mode in [
        Imx274Mode::P1080Raw10,
        Imx274Mode::P2160Raw10,
        Imx274Mode::P2160Raw12,
    ] {
        let mut rx = receiver(dev, 0, mode);
        rx.configure(&mut ctl).unwrap();
        // the data channel is programmed, but the camera is in standby: no packet at all
        assert!(
            rx.next_frame(Duration::from_millis(300)).unwrap().is_none(),
            "{mode:?}: a frame before the camera started"
        );
        let mut bus = I2c::new(&mut ctl, CAM_BUS).unwrap();
        cam.configure(&mut bus, mode).unwrap();
        assert_eq!(cam.mode(&mut bus).unwrap(), Some(mode));
        cam.start(&mut bus).unwrap();
        frames_of(&mut rx, mode, 3);
        cam.stop(&mut bus).unwrap();
        // frames already queued in the socket may still come (how many depends on how
        // far the receiver lags); then the stream goes quiet, where a streaming camera
        // would bring 100 frames a second
        let mut after = 0;
        while rx.next_frame(Duration::from_millis(300)).unwrap().is_some() {
            after += 1;
            assert!(after <= 50, "{mode:?}: still streaming after stop");
        }
        rx.stop(&mut ctl).unwrap();
    }
    let stats = emu.stop();
    assert!(stats.i2c_transactions > 3 * 2 * 80, "{stats:?}");
    assert!(stats.programs >= stats.i2c_transactions, "{stats:?}");
}

#[test]
fn bad_addresses_and_absent_peripherals_are_clear_errors() {
    let dev = Ipv4Addr::new(127, 0, 171, 2);
    let _emu = emulator(dev, 1);
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    let mut bus = I2c::new(&mut ctl, CAM_BUS).unwrap();
    // refused before anything reaches the device
    let before = bus.transactions;
    let e = bus.transaction(0x80, &[0], 0).unwrap_err();
    assert!(matches!(e, I2cError::BadAddress(0x80)), "{e}");
    assert!(e.to_string().contains("7-bit"), "{e}");
    let e = bus.transaction(0x1A, &[0; 257], 0).unwrap_err();
    assert!(matches!(e, I2cError::TooLong { len: 257, .. }), "{e}");
    assert_eq!(bus.transactions, before);
    // nobody at 0x36; the camera not enabled behind the expander
    let e = bus.transaction(0x36, &[0x30, 0x00], 1).unwrap_err();
    assert!(
        matches!(
            e,
            I2cError::Nak {
                bus: 1,
                address: 0x36
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("0x36"), "{e}");
    let e = bus.transaction(0x1A, &[0x30, 0x00], 1).unwrap_err();
    assert!(matches!(e, I2cError::Nak { address: 0x1A, .. }), "{e}");
    // camera 1 does not exist on this board: its output enables nothing
    let e = Camera::new(1)
        .unwrap()
        .register(&mut bus, 0x3000)
        .unwrap_err();
    assert!(matches!(e, I2cError::Nak { address: 0x1A, .. }), "{e}");
    assert_eq!(
        Camera::new(0).unwrap().register(&mut bus, 0x3000).unwrap(),
        0x12
    );
    // another bus has nothing on it
    let mut other = I2c::new(&mut ctl, 0).unwrap();
    let e = other.transaction(0x70, &[1], 0).unwrap_err();
    assert!(matches!(e, I2cError::Nak { bus: 0, .. }), "{e}");
}

#[test]
fn stereo_two_cameras_one_port_two_threads() {
    let dev = Ipv4Addr::new(127, 0, 172, 2);
    let _emu = emulator(dev, 2);
    let mode = Imx274Mode::P1080Raw10;
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    let mut rxs: Vec<Receiver> = (0..2).map(|vp| receiver(dev, vp, mode)).collect();
    for rx in &rxs {
        rx.configure(&mut ctl).unwrap();
    }
    let mut bus = I2c::new(&mut ctl, CAM_BUS).unwrap();
    for i in 0..2 {
        let cam = Camera::new(i).unwrap();
        cam.configure(&mut bus, mode).unwrap();
        cam.start(&mut bus).unwrap();
    }
    std::thread::scope(|s| {
        for rx in rxs.iter_mut() {
            s.spawn(move || frames_of(rx, mode, 5));
        }
    });
}
