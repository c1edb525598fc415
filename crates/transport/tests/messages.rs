//! Per-message outcomes of UC WRITEs (`QpInit::report_messages`): every WRITE message that
//! ends at the responder is reported delivered, or not with its cause — what a protocol
//! that acknowledges messages itself (IMS) turns into ACKs and NACKs.
#![allow(clippy::unwrap_used)]

mod common;

use common::ring::{RING, RingPair};
use rocelink_transport::sim::Dir;
use rocelink_transport::*;
use std::cell::Cell;
use std::rc::Rc;

const BASE: u64 = 5 << 50;

type Setup = RingPair;

fn setup(report: bool) -> Setup {
    setup_mtu(report, Mtu::M1024)
}

fn setup_mtu(report: bool, mtu: Mtu) -> Setup {
    RingPair::new(0x5A, BASE, 32 * 1024, report, mtu, 9)
}

/// Post a UC WRITE of `len` bytes to `va` with `rkey`, run the link, and return B's
/// message reports since the last call: (va, rkey, len, outcome).
fn write(s: &mut Setup, va: u64, rkey: u32, len: u32) -> Vec<(u64, u32, u32, MessageOutcome)> {
    s.write(va, rkey, len);
    reports(s)
}

fn reports(s: &mut Setup) -> Vec<(u64, u32, u32, MessageOutcome)> {
    let mut out = Vec::new();
    while let Some(e) = s.pair.b.poll_qp_event(s.qb) {
        if let Event::WriteMessage {
            va,
            rkey,
            len,
            outcome,
            ..
        } = e
        {
            out.push((va, rkey, len, outcome));
        }
    }
    out
}

/// Drop the data packets (A → B) whose 0-based index is in `lose`.
fn lose(s: &mut Setup, lose: &'static [usize]) {
    let n = Rc::new(Cell::new(0usize));
    s.pair.set_filter(move |dir, _| {
        if dir != Dir::AtoB {
            return true;
        }
        let i = n.get();
        n.set(i + 1);
        !lose.contains(&i)
    });
}

#[test]
fn whole_messages_are_reported_delivered_with_their_reth() {
    let mut s = setup(true);
    let k = s.ring.rkey;
    // FIRST, MIDDLE, LAST; then an ONLY
    assert_eq!(
        write(&mut s, BASE, k, 3000),
        [(BASE, k, 3000, MessageOutcome::Delivered)]
    );
    assert_eq!(
        write(&mut s, BASE + 4096, k, 500),
        [(BASE + 4096, k, 500, MessageOutcome::Delivered)]
    );
    let ring = s.pair.b.mr(s.ring.lkey).unwrap().bytes();
    let off = (BASE % RING as u64) as usize;
    assert!(ring[off..off + 3000].iter().all(|&b| b == 0x5A));
}

#[test]
fn a_lost_middle_reports_the_message_out_of_sequence() {
    let mut s = setup(true);
    let k = s.ring.rkey;
    lose(&mut s, &[1]);
    assert_eq!(
        write(&mut s, BASE, k, 3000),
        [(BASE, k, 3000, MessageOutcome::Sequence)]
    );
    // the next message is whole again
    assert_eq!(
        write(&mut s, BASE + 4096, k, 3000),
        [(BASE + 4096, k, 3000, MessageOutcome::Delivered)]
    );
}

#[test]
fn a_lost_first_reports_no_start_once() {
    let mut s = setup(true);
    let k = s.ring.rkey;
    lose(&mut s, &[0]);
    // the MIDDLE shows the message has no start; its LAST adds nothing
    assert_eq!(
        write(&mut s, BASE, k, 3000),
        [(0, 0, 0, MessageOutcome::NoStart)]
    );
    assert_eq!(
        write(&mut s, BASE + 4096, k, 2048),
        [(BASE + 4096, k, 2048, MessageOutcome::Delivered)]
    );
}

#[test]
fn refused_destinations_are_reported_with_the_reason() {
    let mut s = setup(true);
    let k = s.ring.rkey;
    // an unknown R_Key, for a multi-packet message and for an ONLY
    assert_eq!(
        write(&mut s, BASE, k ^ 0x100, 3000),
        [(BASE, k ^ 0x100, 3000, MessageOutcome::UnknownKey)]
    );
    assert_eq!(
        write(&mut s, BASE, k ^ 0x100, 100),
        [(BASE, k ^ 0x100, 100, MessageOutcome::UnknownKey)]
    );
    // past the window's end: refused before a byte lands
    let va = BASE + 32 * 1024 - 1024;
    assert_eq!(
        write(&mut s, va, k, 3000),
        [(va, k, 3000, MessageOutcome::OutsideWindow)]
    );
    assert!(
        s.pair
            .b
            .mr(s.ring.lkey)
            .unwrap()
            .bytes()
            .iter()
            .all(|&b| b == 0),
        "nothing refused was written"
    );
    // the consumer frees space: the same frame is delivered
    s.pair
        .b
        .set_ring_window(s.ring.lkey, BASE + 16 * 1024, 32 * 1024)
        .unwrap();
    assert_eq!(
        write(&mut s, va, k, 3000),
        [(va, k, 3000, MessageOutcome::Delivered)]
    );
}

#[test]
fn without_report_messages_nothing_is_reported() {
    let mut s = setup(false);
    let k = s.ring.rkey;
    assert!(write(&mut s, BASE, k, 3000).is_empty());
    lose(&mut s, &[1]);
    assert!(write(&mut s, BASE, k, 3000).is_empty());
    // (the damage itself is still reported, as before)
    assert_eq!(s.pair.b.qp_stats(s.qb).unwrap().damaged_messages, 1);
}

#[test]
fn packet_sizes_between_the_ib_mtus_carry_whole_messages() {
    // IMS packets are 64..4096 bytes in steps of 64, not only the InfiniBand MTUs
    for size in [64u16, 192, 1472, 4032] {
        let mut s = setup_mtu(true, Mtu::Jumbo(size));
        let k = s.ring.rkey;
        assert_eq!(
            write(&mut s, BASE + 64, k, 5000),
            [(BASE + 64, k, 5000, MessageOutcome::Delivered)],
            "{size}-byte packets"
        );
        let packets = s.pair.b.qp_stats(s.qb).unwrap().rx_packets;
        assert_eq!(
            packets,
            5000u64.div_ceil(u64::from(size)),
            "{size}-byte packets"
        );
        let off = ((BASE + 64) % RING as u64) as usize;
        let ring = s.pair.b.mr(s.ring.lkey).unwrap().bytes();
        assert!(ring[off..off + 5000].iter().all(|&b| b == 0x5A));
    }
}

#[test]
fn write_rules_refuse_short_packets_and_misaligned_messages() {
    // the IMS buffer unit's limits: at least 64 payload bytes per packet, 64-byte aligned
    let rules = WriteRules {
        min_packet: 64,
        va_align: 64,
        ..WriteRules::NONE
    };
    let mut s = RingPair::with_rules(0x5A, BASE, 32 * 1024, Mtu::Jumbo(256), rules, 9);
    let k = s.ring.rkey;
    // whole packets of 256 and a last one of 64: delivered
    assert_eq!(
        write(&mut s, BASE, k, 3 * 256 + 64),
        [(BASE, k, 832, MessageOutcome::Delivered)]
    );
    // a last packet of 63 bytes: refused as a length error, the message not delivered
    assert_eq!(
        write(&mut s, BASE + 1024, k, 256 + 63),
        [(BASE + 1024, k, 319, MessageOutcome::Length)]
    );
    // a single packet shorter than 64
    assert_eq!(
        write(&mut s, BASE + 2048, k, 10),
        [(BASE + 2048, k, 10, MessageOutcome::Length)]
    );
    // a VA that is not 64-byte aligned: refused before a byte is written
    let before = s.ring_bytes().iter().filter(|&&b| b != 0).count();
    assert_eq!(
        write(&mut s, BASE + 4096 + 32, k, 512),
        [(BASE + 4096 + 32, k, 512, MessageOutcome::Misaligned)]
    );
    assert_eq!(s.ring_bytes().iter().filter(|&&b| b != 0).count(), before);
    // and the QP goes on: the next aligned message is delivered
    assert_eq!(
        write(&mut s, BASE + 8192, k, 256),
        [(BASE + 8192, k, 256, MessageOutcome::Delivered)]
    );
}

#[test]
fn marked_messages_are_refused_only_where_the_marks_are_honoured() {
    // a sender marks a message bad in the reserved BTH bits of its last packet
    // (SendWr::marks); a responder honouring those bits refuses the message, and one that
    // does not ignores them as InfiniBand says
    let rules = WriteRules {
        marks: 0x03,
        ..WriteRules::NONE
    };
    let mut s = RingPair::with_rules(0x5A, BASE, 32 * 1024, Mtu::M1024, rules, 9);
    let k = s.ring.rkey;
    s.write_marked(BASE + 2048, k, 1100, 0x02);
    assert_eq!(
        reports(&mut s),
        [(BASE + 2048, k, 1100, MessageOutcome::Marked(0x02))]
    );
    // the FIRST was placed (UC places what it accepts); the marked LAST placed nothing
    assert!(s.ring_bytes()[2048..3072].iter().all(|&b| b == 0x5A));
    assert!(s.ring_bytes()[3072..3148].iter().all(|&b| b == 0));
    // a bit the QP does not honour is ignored
    s.write_marked(BASE, k, 1100, 0x40);
    assert_eq!(
        reports(&mut s),
        [(BASE, k, 1100, MessageOutcome::Delivered)]
    );
    // both honoured bits at once, on a single-packet message
    s.write_marked(BASE + 8192, k, 64, 0x43);
    assert_eq!(
        reports(&mut s),
        [(BASE + 8192, k, 64, MessageOutcome::Marked(0x03))]
    );
    // the QP goes on
    assert_eq!(
        write(&mut s, BASE + 4096, k, 2000),
        [(BASE + 4096, k, 2000, MessageOutcome::Delivered)]
    );

    // without the rule every mark is ignored
    let mut plain = setup(true);
    let k = plain.ring.rkey;
    plain.write_marked(BASE, k, 1100, 0x03);
    assert_eq!(
        reports(&mut plain),
        [(BASE, k, 1100, MessageOutcome::Delivered)]
    );
}
