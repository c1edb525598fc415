//! Emulator (thread) and receiver over loopback: every frame good and byte-exact, for each
//! sensor and for the documented layout variants; the configuration registers are what
//! HSB's host writes.

#![allow(clippy::unwrap_used)]

use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::device::packetizer::PacketizerOptions;
use rocelink_hsb::emulator::{EmulatorConfig, Pacing};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_hsb::regs::{self, vp};
use rocelink_hsb::sensor::{Imx274Mode, Sensor};
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

struct Run {
    frames: u64,
    sensor: Sensor,
    window: usize,
    md_disable: bool,
    opts: PacketizerOptions,
    dev: Ipv4Addr,
}

fn run(r: Run) {
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(r.dev));
    cfg.bootp_target = None;
    cfg.sensor = r.sensor.clone();
    cfg.pacing = Pacing::Fps(200.0);
    cfg.link_gbps = 20.0;
    cfg.packetizer = r.opts;
    // bound when this returns: no wait before the host starts
    let emu = rocelink_testkit::emulator::Running::start(&cfg);
    let host = Ipv4Addr::new(r.dev.octets()[0], r.dev.octets()[1], r.dev.octets()[2], 1);
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), r.dev, r.window);
    rc.md_disable = r.md_disable;
    rc.layout = r.opts;
    rc.pages = 3;
    let mut rx = Receiver::new(rc).unwrap();
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(r.dev), 8192)).unwrap();
    assert_eq!(ctl.read(regs::HSB_IP_VERSION).unwrap() & 0xFFFF, 0x2606);
    rx.configure(&mut ctl).unwrap();
    // the registers are what the HSB host writes
    assert_eq!(ctl.read(regs::vp_reg(0, vp::QP)).unwrap(), rx.qpn());
    assert_eq!(ctl.read(regs::vp_reg(0, vp::RKEY)).unwrap(), rx.rkey());
    assert_eq!(
        ctl.read(regs::vp_reg(0, vp::PAGE_INC)).unwrap() as usize,
        rx.page_size() >> 7
    );
    assert_eq!(ctl.read(regs::vp_reg(0, vp::MAX_BUFF)).unwrap(), 2);
    assert_eq!(
        ctl.read(regs::vp_reg(0, vp::BUFFER_LENGTH)).unwrap() as usize,
        r.window
    );
    assert_eq!(
        ctl.read(regs::vp_reg(0, vp::HOST_IP)).unwrap(),
        u32::from(host)
    );
    let mut last = None;
    let mut expected = Vec::new();
    for _ in 0..r.frames {
        let f = rx
            .next_frame(Duration::from_secs(5))
            .unwrap()
            .expect("a frame");
        assert!(f.good(), "{f:?}");
        assert_eq!(f.dropped_packets, 0);
        if let Some(l) = last {
            assert_eq!(f.frame_number, l + 1, "consecutive frame numbers");
        }
        last = Some(f.frame_number);
        // byte-exact: the frame is what the sensor produced for that frame number
        // (the first frames after enabling may have been sent before we looked)
        r.sensor.frame(f.frame_number, r.window, &mut expected);
        let data = rx.frame_data(&f);
        assert_eq!(data.len(), r.window);
        assert!(
            data == &expected[..],
            "frame {} differs from the sensor output",
            f.frame_number
        );
        if !r.md_disable {
            assert_eq!(f.crc_ok, Some(true));
            assert_eq!(f.crc, rocelink_wire::hsb::metadata::jamcrc(&expected));
            assert!(
                f.meta.0 >= f.sof.0 && f.sof.0 > 1_700_000_000,
                "PTP times from the host clock"
            );
        }
    }
    rx.stop(&mut ctl).unwrap();
    let s = emu.stop();
    assert!(s.frames >= r.frames);
    assert_eq!(rx.stats.icrc_errors, 0);
}

#[test]
fn pattern_sensor_window_is_what_the_host_programs() {
    run(Run {
        frames: 30,
        sensor: Sensor::Pattern,
        window: 100_000,
        md_disable: false,
        opts: PacketizerOptions::default(),
        dev: Ipv4Addr::new(127, 0, 41, 2),
    });
}

#[test]
fn imx274_1080p_raw10() {
    let m = Imx274Mode::P1080Raw10;
    run(Run {
        frames: 10,
        sensor: Sensor::Imx274(m),
        window: m.frame_len(),
        md_disable: false,
        opts: PacketizerOptions::default(),
        dev: Ipv4Addr::new(127, 0, 42, 2),
    });
}

#[test]
fn ultrasound_md_disable() {
    let s = Sensor::Ultrasound {
        channels: 16,
        samples: 1000,
    };
    run(Run {
        frames: 20,
        window: s.frame_len().unwrap(),
        sensor: s,
        md_disable: true,
        opts: PacketizerOptions::default(),
        dev: Ipv4Addr::new(127, 0, 43, 2),
    });
}

#[test]
fn documented_variants_little_endian_metadata_and_2510_immediate() {
    let opts = PacketizerOptions {
        imm_layout: ImmLayout::Psn24Buf8,
        endian: Endian::Little,
    };
    run(Run {
        frames: 10,
        sensor: Sensor::Pattern,
        window: 30_000,
        md_disable: false,
        opts,
        dev: Ipv4Addr::new(127, 0, 44, 2),
    });
}

#[test]
fn async_event_messages_from_port_8432() {
    use rocelink_wire::hsb::event::{EventRepr, bits};
    let dev = Ipv4Addr::new(127, 0, 45, 2);
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev));
    cfg.bootp_target = None;
    cfg.pacing = Pacing::Fps(100.0);
    // bound when this returns: no wait before the host starts
    let emu = rocelink_testkit::emulator::Running::start(&cfg);
    let listener = std::net::UdpSocket::bind("127.0.45.1:0").unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    // the HSB host's event setup: destination, rising edges of frame end, falling of SW event
    ctl.write_block(&[
        (
            regs::CTRL_EVT_HOST_IP,
            u32::from(Ipv4Addr::new(127, 0, 45, 1)),
        ),
        (regs::CTRL_EVT_HOST_UDP_PORT, u32::from(port)),
        (regs::CTRL_EVT_RISING, 1 << bits::SIF_0_FRAME_END),
        (regs::CTRL_EVT_FALLING, 1 << bits::SW_EVENT),
    ])
    .unwrap();
    ctl.write(regs::CTRL_EVT_SW_EVENT, 1).unwrap();
    ctl.write(regs::CTRL_EVT_SW_EVENT, 0).unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = listener.recv_from(&mut buf).unwrap();
    assert_eq!(from, SocketAddr::new(IpAddr::V4(dev), 8432));
    let e = EventRepr::parse(&buf[..n]).unwrap();
    assert_eq!(e.interrupt_active, 1 << bits::SW_EVENT);
    // stream frames: each frame end is one event message
    let mut rc = ReceiverConfig::new(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 45, 1)), 0),
        dev,
        10_000,
    );
    rc.pages = 2;
    let rx = Receiver::new(rc).unwrap();
    rx.configure(&mut ctl).unwrap();
    let mut ends = 0;
    while ends < 3 {
        let (n, _) = listener.recv_from(&mut buf).unwrap();
        let e = EventRepr::parse(&buf[..n]).unwrap();
        if e.interrupt_active == 1 << bits::SIF_0_FRAME_END {
            ends += 1;
        }
    }
    assert!(emu.stop().events >= 4);
}

#[test]
fn hostile_roce_packets_are_refused_and_frames_stay_good() {
    use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
    let dev = Ipv4Addr::new(127, 0, 46, 2);
    let host = Ipv4Addr::new(127, 0, 46, 1);
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev));
    cfg.bootp_target = None;
    cfg.pacing = Pacing::Fps(100.0);
    // bound when this returns: no wait before the host starts
    let emu = rocelink_testkit::emulator::Running::start(&cfg);
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, 20_000);
    rc.pages = 2;
    let mut rx = Receiver::new(rc).unwrap();
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev), 8192)).unwrap();
    rx.configure(&mut ctl).unwrap();
    let target = rx.local_addr();
    // from a stranger, and forged as the device with a wrong R_Key, a VA past the ring,
    // a wrong QP, and a bad ICRC
    let stranger = std::net::UdpSocket::bind("127.0.46.9:12288").unwrap();
    let forger = std::net::UdpSocket::bind("127.0.46.2:0").unwrap();
    let ring = rx.page_size() as u64 * 2;
    let cases = [
        (rx.qpn(), rx.rkey() ^ 1, 0u64, true),
        (rx.qpn(), rx.rkey(), ring - 8, true),
        (rx.qpn() + 1, rx.rkey(), 0, true),
        (rx.qpn(), rx.rkey(), 0, false),
    ];
    for (sock, (qp, rkey, va, good_icrc)) in [&stranger, &forger]
        .into_iter()
        .flat_map(|s| cases.iter().map(move |c| (s, *c)))
    {
        let ib = IbRepr {
            bth: BthRepr {
                opcode: Opcode::UC_RDMA_WRITE_ONLY,
                dest_qp: qp,
                psn: 1,
                ..Default::default()
            },
            reth: Some(RethRepr {
                va,
                rkey,
                dma_len: 64,
            }),
            payload_len: 64,
            ..Default::default()
        };
        let mut b = vec![0u8; ib.buffer_len()];
        ib.emit(&mut b, &[0xEE; 64]);
        rocelink_wire::icrc::fill_socket(sock.local_addr().unwrap(), target, &mut b).unwrap();
        if !good_icrc {
            b[20] ^= 1;
        }
        sock.send_to(&b, target).unwrap();
    }
    let mut expected = Vec::new();
    for _ in 0..5 {
        let f = rx.next_frame(Duration::from_secs(5)).unwrap().unwrap();
        assert!(f.good(), "{f:?}");
        Sensor::Pattern.frame(f.frame_number, 20_000, &mut expected);
        assert!(rx.frame_data(&f) == &expected[..], "no forged byte landed");
    }
    let (es, qs) = rx.transport_stats();
    assert_eq!(es.icrc_errors, 2, "{es:?}");
    assert_eq!(
        es.unknown_qp,
        3 + 1,
        "the stranger's three, the forger's wrong QP: {es:?}"
    );
    assert_eq!(
        qs.access_violations, 2,
        "wrong R_Key and VA past the ring: {qs:?}"
    );
    emu.stop();
}

#[test]
fn lost_metadata_and_reordered_packets_never_panic_and_are_reported() {
    // a stream built by the packetizer, delivered with faults: metadata packets lost,
    // data packets swapped, data packets of two frames interleaved
    let dev = Ipv4Addr::new(127, 0, 47, 2);
    let host = Ipv4Addr::new(127, 0, 47, 1);
    let window = 10_000usize;
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, window);
    rc.pages = 2;
    rc.qp_rkey = Some((0x99, 0x999));
    let mut rx = Receiver::new(rc).unwrap();
    let to = std::net::SocketAddrV4::new(host, rx.local_addr().port());
    let frames = rocelink_testkit::camera::Stream {
        qp_rkey: (0x99, 0x999),
        src_port: 12288,
        first_psn: 5,
        ..rocelink_testkit::camera::Stream::to(dev, to, rx.page_size() as u64, window)
    }
    .frames(6);
    let mut order: Vec<Vec<u8>> = Vec::new();
    order.extend(frames[0].iter().cloned()); // intact
    let f1 = &frames[1];
    order.extend(f1[..f1.len() - 1].iter().cloned()); // metadata lost: merges into frame 2
    order.extend(frames[2].iter().cloned());
    let mut f3 = frames[3].clone();
    f3.swap(1, 3); // reordered but complete
    order.extend(f3);
    order.extend(frames[4][..3].iter().cloned()); // interleaved with frame 5's packets
    order.extend(frames[5].iter().cloned());
    order.extend(frames[4][3..].iter().cloned());
    let s = std::net::UdpSocket::bind(SocketAddr::new(IpAddr::V4(dev), 12288)).unwrap();
    for b in &order {
        s.send_to(b, rx.local_addr()).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut got = Vec::new();
    while let Some(f) = rx.next_frame(Duration::from_millis(300)).unwrap() {
        got.push(f);
    }
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(got[0].good(), "{:?}", got[0]);
    assert!(
        !got[1].good(),
        "frame 2 absorbed frame 1's data: {:?}",
        got[1]
    );
    assert!(
        got[2].good(),
        "reordered but complete: CRC from one pass over the page: {:?}",
        got[2]
    );
    assert!(!got[3].good() && !got[4].good());
}
