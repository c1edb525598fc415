use super::*;
use rocelink_wire::hsb::ecb::{RequestHeader, Response};

fn dev() -> DeviceCore {
    DeviceCore::new(DeviceConfig::new(Ipv4Addr::new(192, 168, 0, 2)))
}

fn req(cmd: Command, flags: u8, seq: u16, ops: &[(u32, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    RequestHeader {
        command: cmd,
        flags,
        sequence: seq,
    }
    .emit(ops, &mut v);
    v
}

fn status(reply: &[u8]) -> Status {
    Response::new_checked(reply).unwrap().status()
}

#[test]
fn read_version_ten_byte_request() {
    let mut d = dev();
    let r = d
        .handle_ecb(&req(
            Command::RD_DWORD,
            ecb::FLAG_ACK_REQUEST,
            0x100,
            &[(regs::HSB_IP_VERSION, 0)],
        ))
        .unwrap();
    let p = Response::new_checked(&r[..]).unwrap();
    assert_eq!(
        (p.command(), p.status(), p.op(0)),
        (0x94, Status::SUCCESS, Some((0x80, 0x2606)))
    );
    assert_eq!(p.latched_sequence(), Some(0x100));
    assert_eq!(r.len(), 6 + 8 + 2, "FPGA trailer is two bytes");
}

#[test]
fn writes_reply_only_with_ack_request() {
    let mut d = dev();
    assert!(
        d.handle_ecb(&req(
            Command::WR_DWORD,
            0,
            1,
            &[(regs::vp_reg(0, vp::QP), 5)]
        ))
        .is_none()
    );
    assert_eq!(d.read(regs::vp_reg(0, vp::QP)), Some(5));
    let r = d
        .handle_ecb(&req(
            Command::WR_DWORD,
            ecb::FLAG_ACK_REQUEST,
            2,
            &[(regs::vp_reg(0, vp::QP), 6)],
        ))
        .unwrap();
    assert_eq!((r[0], status(&r)), (0x84, Status::SUCCESS));
}

#[test]
fn sequence_check_latches_on_every_good_packet_and_refuses_without_executing() {
    let mut d = dev();
    let f = ecb::FLAG_ACK_REQUEST | ecb::FLAG_SEQUENCE_CHECK;
    let qp = regs::vp_reg(0, vp::QP);
    // first read without the check latches 0x100
    d.handle_ecb(&req(
        Command::RD_DWORD,
        ecb::FLAG_ACK_REQUEST,
        0x100,
        &[(0x80, 0)],
    ))
    .unwrap();
    assert_eq!(d.latched_sequence(), 0x100);
    let r = d
        .handle_ecb(&req(Command::WR_DWORD, f, 0x101, &[(qp, 7)]))
        .unwrap();
    assert_eq!(status(&r), Status::SUCCESS);
    // a stale sequence (another host) is refused and not executed
    let r = d
        .handle_ecb(&req(Command::WR_DWORD, f, 0x101, &[(qp, 8)]))
        .unwrap();
    assert_eq!(status(&r), Status::SEQUENCE_CHECK_FAIL);
    assert_eq!(d.read(qp), Some(7));
    assert_eq!(
        d.latched_sequence(),
        0x101,
        "a failed packet does not latch"
    );
    // a retry with the check cleared is accepted (HSB host retry behaviour)
    let r = d
        .handle_ecb(&req(
            Command::WR_DWORD,
            ecb::FLAG_ACK_REQUEST,
            0x101,
            &[(qp, 8)],
        ))
        .unwrap();
    assert_eq!(status(&r), Status::SUCCESS);
    assert_eq!(d.read(qp), Some(8));
    // wrap-around of the 16-bit sequence
    d.handle_ecb(&req(
        Command::RD_DWORD,
        ecb::FLAG_ACK_REQUEST,
        0xFFFF,
        &[(0x80, 0)],
    ));
    assert_eq!(
        status(
            &d.handle_ecb(&req(Command::RD_DWORD, f, 0, &[(0x80, 0)]))
                .unwrap()
        ),
        Status::SUCCESS
    );
}

#[test]
fn every_status_code() {
    let mut d = dev();
    let a = ecb::FLAG_ACK_REQUEST;
    // unknown command: raw command echoed
    let r = d
        .handle_ecb(&req(Command(0x20), a, 1, &[(0x80, 0)]))
        .unwrap();
    assert_eq!((r[0], status(&r)), (0x20, Status::INVALID_CMD));
    // defined but not executed by the FPGA
    assert_eq!(
        status(
            &d.handle_ecb(&req(Command(0x11), a, 2, &[(0x80, 0)]))
                .unwrap()
        ),
        Status::INVALID_CMD
    );
    // reserved flag bits
    assert_eq!(
        status(
            &d.handle_ecb(&req(Command::RD_DWORD, 0x81, 3, &[(0x80, 0)]))
                .unwrap()
        ),
        Status::INVALID_FLAGS
    );
    // invalid and misaligned addresses
    assert_eq!(
        status(
            &d.handle_ecb(&req(Command::RD_DWORD, a, 4, &[(0x4000_0000, 0)]))
                .unwrap()
        ),
        Status::INVALID_ADDR
    );
    assert_eq!(
        status(
            &d.handle_ecb(&req(Command::RD_DWORD, a, 5, &[(0x81, 0)]))
                .unwrap()
        ),
        Status::INVALID_ADDR
    );
    // a 10-byte write has no data word
    let mut short = req(Command::WR_DWORD, a, 6, &[(0x1000, 1)]);
    short.truncate(10);
    assert_eq!(
        status(&d.handle_ecb(&short).unwrap()),
        Status::INVALID_PKT_LENGTH
    );
    // a block with a dangling half pair
    let mut odd = req(Command::WR_BLOCK, a, 7, &[(0x1000, 1), (0x1004, 2)]);
    odd.truncate(odd.len() - 2);
    assert_eq!(
        status(&d.handle_ecb(&odd).unwrap()),
        Status::INVALID_PKT_LENGTH
    );
    // too many operations
    let many: Vec<(u32, u32)> = (0..512).map(|i| (0x2000 + 4 * (i % 1024), i)).collect();
    assert_eq!(
        status(&d.handle_ecb(&req(Command::WR_BLOCK, a, 8, &many)).unwrap()),
        Status::INVALID_BLOCK_SIZE
    );
    // a block with one bad address executes nothing
    let r = d
        .handle_ecb(&req(
            Command::WR_BLOCK,
            a,
            9,
            &[(0x1000, 0x11), (0x4000_0000, 1)],
        ))
        .unwrap();
    assert_eq!(status(&r), Status::INVALID_ADDR);
    assert_eq!(d.read(0x1000), Some(0));
    // runts are dropped and counted
    assert!(d.handle_ecb(&[0x14, 1]).is_none());
    assert_eq!(d.stats.runts, 1);
    assert!(d.stats.errors >= 8);
}

#[test]
fn block_read_and_write() {
    let mut d = dev();
    let a = ecb::FLAG_ACK_REQUEST;
    d.handle_ecb(&req(
        Command::WR_BLOCK,
        a,
        1,
        &[(0x2000, 1), (0x2004, 2), (0x2008, 3)],
    ))
    .unwrap();
    let r = d
        .handle_ecb(&req(
            Command::RD_BLOCK,
            a,
            2,
            &[(0x2000, 0), (0x2004, 0), (0x2008, 0)],
        ))
        .unwrap();
    let p = Response::new_checked(&r[..]).unwrap();
    assert_eq!(
        (0..3).map(|i| p.op(i).unwrap().1).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // the 4-byte trailer variant
    let mut cfg = DeviceConfig::new(Ipv4Addr::new(10, 0, 0, 2));
    cfg.trailer = ecb::Trailer::Four;
    let mut d4 = DeviceCore::new(cfg);
    let r = d4
        .handle_ecb(&req(Command::RD_DWORD, a, 3, &[(0x80, 0)]))
        .unwrap();
    assert_eq!(
        Response::new_checked(&r[..]).unwrap().trailer(),
        Some(ecb::Trailer::Four)
    );
}

#[test]
fn bootp_enumeration_and_set_ip() {
    let mut d = dev();
    let b = d.enumeration(3, (0x1234, 5));
    let p = bootp::Packet::new_checked(&b[..]).unwrap();
    let e = EnumerationRepr::parse(&p).unwrap();
    assert_eq!(
        (e.mac, e.ciaddr, e.vendor.hsb_ip_version),
        (d.config().mac, Some(Ipv4Addr::new(192, 168, 0, 2)), 0x2606)
    );
    // a reply for another MAC is ignored
    let mut other = [0u8; 300];
    SetIpRepr {
        xid: 0,
        secs: 0,
        chaddr: [9; 16],
        yiaddr: Ipv4Addr::new(192, 168, 0, 50),
        siaddr: Ipv4Addr::new(192, 168, 0, 101),
    }
    .emit(&mut other);
    assert_eq!(d.handle_bootp(&other), None);
    assert_eq!(d.handle_bootp(&[1, 2, 3]), None);
    let mut reply = [0u8; 300];
    SetIpRepr::answering(
        &p,
        Ipv4Addr::new(192, 168, 0, 50),
        Ipv4Addr::new(192, 168, 0, 101),
    )
    .emit(&mut reply);
    assert_eq!(d.handle_bootp(&reply), Some(Ipv4Addr::new(192, 168, 0, 50)));
    assert_eq!(d.ip(), Ipv4Addr::new(192, 168, 0, 50));
    assert_eq!(d.stats.bootp_ignored, 2);
}

#[test]
fn streams_only_when_configured_and_enabled() {
    let mut d = dev();
    assert!(d.vp_stream(0).is_none());
    for (off, v) in [
        (vp::QP, 0xCAF0),
        (vp::RKEY, 0xBEEF),
        (vp::BUFFER_LENGTH, 4096),
        (vp::HOST_IP, 0x0A00_0001),
        (vp::HOST_UDP_PORT, 0x1_12B7),
    ] {
        d.write(regs::vp_reg(1, off), v);
    }
    assert!(d.vp_stream(1).is_none(), "configured but not enabled");
    d.write(regs::hif_reg(0, hif::VP_MASK), 0b10);
    let s = d.vp_stream(1).unwrap();
    assert_eq!(
        s.host.port(),
        0x12B7,
        "port masked to 16 bits (HSB issue #96)"
    );
    assert!(s.md_disable);
    assert_eq!(s.src_port, 12288);
    assert!(d.vp_stream(0).is_none());
    // reset clears the configuration
    d.write(regs::RESET_CTRL, 0x8);
    assert!(d.vp_stream(1).is_none());
    assert_eq!(d.read(regs::HSB_IP_VERSION), Some(0x2606));
}

#[test]
fn async_events_on_enabled_edges() {
    use rocelink_wire::hsb::event::{EventRepr, bits};
    let mut d = dev();
    d.set_level(bits::SIF_0_FRAME_END, true, (1, 2));
    assert!(
        d.take_events().is_empty(),
        "nothing enabled, no destination"
    );
    d.write(regs::CTRL_EVT_HOST_IP, 0xFFFF_FFFF);
    d.write(regs::CTRL_EVT_HOST_UDP_PORT, 40000);
    d.write(regs::CTRL_EVT_RISING, 1 << bits::SIF_0_FRAME_END);
    d.write(regs::CTRL_EVT_FALLING, 1 << bits::SW_EVENT);
    d.set_level(bits::SIF_0_FRAME_END, false, (1, 2));
    assert!(
        d.take_events().is_empty(),
        "falling edge of frame end not enabled"
    );
    d.set_level(bits::SIF_0_FRAME_END, true, (7, 8));
    let ev = d.take_events();
    assert_eq!(ev.len(), 1);
    let (b, dst) = &ev[0];
    assert_eq!(dst.to_string(), "255.255.255.255:40000");
    let e = EventRepr::parse(b).unwrap();
    assert_eq!(
        (
            e.interrupt_active,
            e.interrupt_state,
            e.seconds,
            e.nanoseconds
        ),
        (1 << 16, 1 << 16, 7, 8)
    );
    // the software event: write 1 then 0; only the enabled falling edge reports
    d.write(regs::CTRL_EVT_SW_EVENT, 1);
    assert!(d.take_events().is_empty());
    d.write(regs::CTRL_EVT_SW_EVENT, 0);
    let ev = d.take_events();
    assert_eq!(
        EventRepr::parse(&ev[0].0).unwrap().interrupt_active,
        1 << bits::SW_EVENT
    );
    assert_eq!(d.event_port(), 8432);
}

proptest::proptest! {
    /// Whatever arrives on the control and BOOTP ports, the device answers with a
    /// well-formed ECB response or nothing, counts what it ignores, and keeps working.
    #[test]
    fn arbitrary_control_and_bootp_input_never_breaks_the_device(
        packets in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..700), 1..20),
        flags in proptest::num::u8::ANY,
    ) {
        let mut d = dev();
        for mut p in packets {
            if p.len() > 1 { p[1] = flags; }
            if let Some(r) = d.handle_ecb(&p) {
                proptest::prop_assert!(Response::new_checked(&r[..]).is_ok(), "reply {r:?}");
            }
            let before = d.stats.bootp_ignored;
            if d.handle_bootp(&p).is_none() {
                proptest::prop_assert_eq!(d.stats.bootp_ignored, before + 1);
            }
        }
        // still serves a plain read of the version register (no sequence check)
        let r = d.handle_ecb(&req(Command::RD_DWORD, ecb::FLAG_ACK_REQUEST, 0x100, &[(regs::HSB_IP_VERSION, 0)]));
        proptest::prop_assert_eq!(r.map(|r| status(&r)), Some(Status::SUCCESS));
    }
}
