//! Instruction count, per packet, of the HSB receiver's whole user-space path as a camera
//! stream takes it: the landing receive (the plan, the scatter `recvmmsg` with GRO, the
//! batch sorted against the plan), the transport's lane (ICRC, QP, PSN, bounds) and the frame
//! tracker — everything but the kernel and the CRC itself, which is counted alone and
//! subtracted (its code depends on the CPU valgrind presents).
//!
//! The stream is made and sent before the receiver runs (and not counted), into its socket
//! buffer, in GSO runs of 16 packets, so GRO hands the receiver the same batches on every
//! run and the count does not depend on timing. The test runs itself under `valgrind --tool=callgrind` with 8 and
//! 24 frames of 142 packets of 1408 bytes (and metadata); the difference over the extra
//! packets is one packet's cost (start-up cancels out). It prints the figure and fails above
//! the budget. valgrind must be installed (`.ci/run` does).

#![allow(clippy::unwrap_used)]

use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_testkit::callgrind;
use rocelink_testkit::camera::Stream;
use std::io::IoSlice;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// 142 packets of 1408 bytes and a metadata packet per frame.
const WINDOW: usize = 142 * PAYLOAD;
const PAYLOAD: usize = 1408;
/// Packets per GSO send (a paced camera stream's receives bring about 15).
const RUN: usize = 16;
/// Budget per packet besides the CRC, in the release profile it is set for (`.ci/run`
/// runs it) and in the test profile (`cargo test`). Measured (rustc 1.95, valgrind 3.19),
/// release: 674 (699–705 before the scatter receive stopped clearing its iovec list per
/// call; 1 543 one packet at a time, before runs). The budget is the release target, 700;
/// it leaves room for GRO's run-to-run batch spread (about 6), not for a second CRC pass
/// over the payload (+741) or lookups and allocations creeping back in per packet.
const BUDGET: u64 = if cfg!(debug_assertions) { 1_300 } else { 700 };

/// Receive `frames` frames, sent beforehand; every one must be good.
fn receive(frames: u64) {
    let dev = Ipv4Addr::new(127, 0, 83, 2);
    let host = Ipv4Addr::new(127, 0, 83, 1);
    let mut rc = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host), 0), dev, WINDOW);
    rc.pages = 4;
    rc.qp_rkey = Some((0x42, 0x4242));
    rc.recv_buffer = 64 << 20;
    let mut rx = Receiver::new(rc).unwrap();
    let stream = Stream {
        pages: 4,
        payload: PAYLOAD,
        ..Stream::to(
            dev,
            SocketAddrV4::new(host, rx.local_addr().port()),
            rx.page_size() as u64,
            WINDOW,
        )
    };
    let wire = stream.packets(frames);
    let sock = UdpSocket::bind(
        SocketAddr::new(IpAddr::V4(dev), rocelink_wire::hsb::DATA_SOURCE_PORT),
        &UdpConfig::default(),
    )
    .unwrap();
    for run in wire.chunk_by(|a, b| a.len() == b.len()) {
        for part in run.chunks(RUN) {
            let parts: Vec<IoSlice<'_>> = part.iter().map(|p| IoSlice::new(p)).collect();
            sock.send_gso(rx.local_addr(), &parts, part[0].len() as u16)
                .unwrap();
        }
    }
    assert_eq!(measured_receive(&mut rx), frames);
    let fs = rx.fast_stats().unwrap();
    // the fast path took the stream: all but the first run's packets landed in place
    assert!(fs.gathered <= RUN as u64, "{fs:?}");
    assert_eq!(fs.in_place + fs.gathered, wire.len() as u64, "{fs:?}");
}

/// What is counted: every frame received (each must be good); how many.
#[inline(never)]
fn measured_receive(rx: &mut Receiver) -> u64 {
    let mut good = 0;
    while let Some(f) = rx.next_frame(Duration::from_millis(500)).unwrap() {
        assert!(f.good(), "{f:?}");
        good += 1;
    }
    good
}

/// The CRC-32 alone over as many bytes as one data packet's ICRC covers.
#[inline(never)]
fn measured_crc(packets: u64) {
    let bytes: Vec<u8> = (0..8 + 20 + 8 + 12 + 16 + PAYLOAD)
        .map(|i| i as u8)
        .collect();
    let mut acc = 0u32;
    for _ in 0..packets {
        acc ^= crc32fast::hash(std::hint::black_box(&bytes));
    }
    std::hint::black_box(acc);
}

/// The child: does the work when asked to.
#[test]
fn callgrind_child() {
    if let Ok(n) = std::env::var("ROCELINK_CALLGRIND_FRAMES") {
        let n: u64 = n.parse().unwrap();
        match std::env::var("ROCELINK_CALLGRIND_MODE").as_deref() {
            Ok("crc") => measured_crc(n * 143),
            _ => receive(n),
        }
    }
}

fn instructions(frames: u64, mode: &str) -> u64 {
    let env = [
        ("ROCELINK_CALLGRIND_FRAMES", frames.to_string()),
        ("ROCELINK_CALLGRIND_MODE", mode.to_string()),
    ];
    // only the receive (or the CRC) is counted: not the packets' making and sending
    callgrind::instructions("callgrind_child", &env, Some("*measured_*"))
}

/// Per packet: the difference between 24 and 8 frames over the 16 frames' packets.
fn per_packet(mode: &str) -> u64 {
    let (a, b) = (instructions(8, mode), instructions(24, mode));
    assert!(b > a, "more frames cost more instructions ({a} vs {b})");
    (b - a) / (16 * 143)
}

#[test]
fn hsb_receive_instructions_per_packet_within_budget() {
    if !callgrind::available() {
        return;
    }
    let all = per_packet("receive");
    let crc = per_packet("crc");
    println!(
        "HSB receive (1408-byte payloads, GRO runs of {RUN}): {all} instructions per packet \
         (callgrind), of which the CRC-32 {crc}, the rest {}",
        all.saturating_sub(crc)
    );
    assert!(all > crc, "{all}: the packets were not checked");
    assert!(
        all - crc <= BUDGET,
        "{} instructions per packet besides the CRC, budget {BUDGET}",
        all - crc
    );
}
