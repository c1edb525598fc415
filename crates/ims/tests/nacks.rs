//! Each NACK cause of Table 3.7 that software can produce, provoked on a simulated link:
//! the buffer unit answers with the right cause and VA, and the worker acts as Table 3.4
//! says (sends again, or stops on an invalid R_Key).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_ims::{Error, MarkBad, WorkerConfig, WorkerState};
use rocelink_transport::sim::LinkConfig;
use rocelink_transport::{Access, SendOp, SendWr, Sge};
use rocelink_wire::ims::{Events, marks};
use std::time::Duration;

const FRAME: usize = 10_000; // ten packets of 1024: FIRST, 8 MIDDLE, LAST
const FRAMES: u64 = 40;

fn setup(seed: u64) -> Net {
    net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        FRAMES,
        LinkConfig::default(),
        seed,
    )
}

/// The cause counted once at both ends, every frame still delivered once and intact.
fn assert_recovered(n: &Net, cause: u32) {
    assert_eq!(
        n.server.stats().nacked.get(cause),
        1,
        "{:?}",
        n.server.stats()
    );
    assert_eq!(n.server.stats().nacked.total(), 1);
    assert_eq!(n.worker.stats().nacked.get(cause), 1);
    assert!(n.worker.stats().retransmissions >= 1);
    assert_all_delivered(n, FRAME, FRAMES);
}

#[test]
fn a_lost_middle_packet_is_nacked_out_of_sequence_and_sent_again() {
    let mut n = setup(11);
    let hits = tamper(&mut n, WRITE_MIDDLE, 20, None);
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::OUT_OF_SEQUENCE);
}

#[test]
fn a_lost_first_packet_is_nacked_no_start_of_frame_with_va_0() {
    let mut n = setup(12);
    let hits = tamper(&mut n, WRITE_FIRST, 3, None);
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::NO_START_OF_FRAME);
    // the VA-0 NACK named no frame: the worker sent the oldest unanswered one again, and
    // no answer went unmatched
    assert_eq!(
        n.worker.stats().stale,
        0,
        "{:?} {:?}",
        n.worker.stats(),
        n.server.stats()
    );
}

#[test]
fn a_packet_its_sender_marked_bad_is_nacked_end_of_bad_packet() {
    let mut n = setup(17);
    // EBP in the BTH's reserved bits of one MIDDLE packet (the ICRC recomputed, as the
    // sender computes it over the marked header)
    let hits = tamper(&mut n, WRITE_MIDDLE, 30, Some(|b| b[8] |= marks::EBP));
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::END_OF_BAD_PACKET);
}

#[test]
fn a_frame_its_sender_marked_bad_is_nacked_end_of_bad_frame() {
    let mut n = setup(18);
    // EBF on the LAST packet of the fifth frame
    let hits = tamper(&mut n, WRITE_LAST, 4, Some(|b| b[8] |= marks::EBF));
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::END_OF_BAD_FRAME);
}

#[test]
fn frames_the_worker_marks_bad_are_nacked_and_sent_again_clean() {
    // the worker's own marking (WorkerConfig::mark_bad → SendWr::marks → the BTH)
    for (marks, cause, seed) in [
        (marks::EBF, Events::END_OF_BAD_FRAME, 19),
        (marks::EBP, Events::END_OF_BAD_PACKET, 20),
    ] {
        let w = WorkerConfig {
            mark_bad: Some(MarkBad { every: 8, marks }),
            ..cfg_worker()
        };
        let mut n = net(w, cfg_server(), FRAME, FRAMES, LinkConfig::default(), seed);
        n.run(Duration::from_secs(5));
        let (ss, ws) = (n.server.stats(), n.worker.stats());
        // frames 7, 15, 23, 31, 39 were marked the first time they went out
        assert_eq!(ws.marked, FRAMES / 8);
        assert_eq!(ss.nacked.get(cause), FRAMES / 8, "{ss:?}");
        assert_eq!(ss.nacked.total(), FRAMES / 8);
        assert_eq!(ws.nacked.get(cause), FRAMES / 8);
        assert_eq!(ws.retransmissions, FRAMES / 8);
        assert_all_delivered(&n, FRAME, FRAMES);
    }
    // a marking that could never end, or names no mark, is refused up front
    for bad in [(0, marks::EBF), (1, 0), (1, 0x40)] {
        let w = WorkerConfig {
            mark_bad: Some(MarkBad {
                every: bad.0,
                marks: bad.1,
            }),
            ..cfg_worker()
        };
        assert_eq!(
            w.check(FRAME),
            Err(Error::MarkBad {
                every: bad.0,
                marks: bad.1
            }),
            "{bad:?}"
        );
    }
}

#[test]
fn a_frame_longer_than_its_packets_is_nacked_frame_length() {
    let mut n = setup(13);
    // the RETH's DMA length (bytes 24..28 from the BTH) says 64 more than is sent
    let hits = tamper(
        &mut n,
        WRITE_FIRST,
        5,
        Some(|b| {
            let len = u32::from_be_bytes(b[24..28].try_into().unwrap()) + 64;
            b[24..28].copy_from_slice(&len.to_be_bytes());
        }),
    );
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::FRAME_LENGTH);
}

#[test]
fn an_unaligned_va_is_nacked_invalid_va() {
    let mut n = setup(14);
    // the RETH's VA (bytes 12..20) moved by 32: not 64-byte aligned. The NACK names that
    // VA, which is no frame of the worker's (counted stale); the frame itself is sent
    // again when its timeout passes. The frames after it wait for it unanswered (a frame
    // is ACKed once taken, in order): they time out too, and their second copies are
    // ACKed again (stale as well).
    let hits = tamper(
        &mut n,
        WRITE_FIRST,
        5,
        Some(|b| {
            let va = u64::from_be_bytes(b[12..20].try_into().unwrap()) + 32;
            b[12..20].copy_from_slice(&va.to_be_bytes());
        }),
    );
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    let (ss, ws) = (n.server.stats(), n.worker.stats());
    assert_eq!(ss.nacked.get(Events::INVALID_VA), 1);
    assert_eq!(ws.nacked.get(Events::INVALID_VA), 1);
    assert!(ws.stale >= 1, "{ws:?}");
    assert!(ws.timeouts >= 1);
    assert_eq!(
        ws.stale,
        1 + ss.acked - FRAMES,
        "the NACK and every ACK past the frames' own are stale"
    );
    assert_all_delivered(&n, FRAME, FRAMES);
}

#[test]
fn an_invalid_rkey_stops_the_worker_with_the_cause() {
    let mut n = setup(15);
    let hits = tamper(
        &mut n,
        WRITE_FIRST,
        5,
        Some(|b| b[20] ^= 0x80), // the R_Key's top byte
    );
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_eq!(n.server.stats().nacked.get(Events::INVALID_RKEY), 1);
    let WorkerState::Failed(e) = n.worker.state() else {
        panic!("{:?}", n.worker.state());
    };
    let Error::Refused { va, causes } = e else {
        panic!("{e}");
    };
    assert_eq!(*va, vas(cfg_server().va_offset, FRAME, 6)[5]);
    assert_eq!(causes, "invalid_rkey");
    // nothing was written for that frame, and the ring holds no frame past it
    assert!(n.server.stats().frames_delivered < FRAMES);
}

#[test]
fn a_first_packet_not_in_steps_of_64_is_nacked_packet_length() {
    let mut n = setup(21);
    // 24 bytes cut from a FIRST's 1024-byte payload (after BTH and RETH, bytes 28..): 1000
    // is no multiple of 64. Without the step rule the frame would fail on its length.
    let hits = tamper(
        &mut n,
        WRITE_FIRST,
        6,
        Some(|b| {
            b.drain(28..52);
        }),
    );
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    assert_recovered(&n, Events::PACKET_LENGTH);
}

#[test]
fn a_packet_shorter_than_64_bytes_is_nacked_packet_length() {
    let mut n = setup(16);
    // stream until the data channel is open, then send a 32-byte WRITE on the worker's
    // own data QP (as a faulty sender would)
    for _ in 0..100_000 {
        n.poll();
        if n.worker.data_channel().is_some() {
            break;
        }
        n.pair.step_until(n.worker.poll_timeout());
    }
    let (qpn, rkey, first) = n.worker.data_channel().unwrap();
    let src = n.pair.a.register_mr(vec![7u8; 64], 0, Access::NONE);
    // inside the window (256 KiB from the read pointer) and at no frame's VA (frames are
    // 10 048 bytes apart)
    let va = first.wrapping_add(192 << 10);
    let wr = SendWr {
        wr_id: 99,
        op: SendOp::Write { va, rkey },
        sg_list: Sge {
            lkey: src.lkey,
            va: 0,
            len: 32,
        }
        .into(),
        signaled: false,
        solicited: false,
        marks: 0,
    };
    n.pair.a.post_send(qpn, wr).unwrap();
    n.run(Duration::from_secs(5));
    let (ss, ws) = (n.server.stats(), n.worker.stats());
    assert_eq!(ss.nacked.get(Events::PACKET_LENGTH), 1, "{ss:?}");
    assert_eq!(ss.nacked.total(), 1);
    assert_eq!(
        (ws.stale, ws.retransmissions),
        (1, 0),
        "no frame of its own"
    );
    assert_all_delivered(&n, FRAME, FRAMES);
}

#[test]
fn a_packet_with_several_faults_is_nacked_with_every_cause() {
    let mut n = setup(17);
    // the 4th frame's FIRST: R_Key damaged and VA moved off the 64-byte grid
    let hits = tamper(
        &mut n,
        WRITE_FIRST,
        3,
        Some(|b| {
            b[20] ^= 0x80; // the R_Key's top byte
            b[19] ^= 0x04; // the VA's lowest byte
        }),
    );
    n.run(Duration::from_secs(5));
    assert_eq!(*hits.borrow(), 1);
    let (ss, ws) = (n.server.stats(), n.worker.stats());
    assert_eq!(ss.nacked.get(Events::INVALID_RKEY), 1, "{ss:?}");
    assert_eq!(ss.nacked.get(Events::INVALID_VA), 1, "{ss:?}");
    // one NACK packet carried both causes; the others held the worker back while the
    // frame was missing from the ring
    assert_eq!(ss.nacks, 1 + ss.out_of_window, "{ss:?}");
    assert_eq!(ws.nacks, ss.nacks);
    assert_eq!(ws.nacked.total(), ss.nacks + 1);
    assert!(
        ss.seen_again >= ss.out_of_window,
        "each refused frame came again: {ss:?}"
    );
    // its VA (as the worker sent it) is unknown to the worker: the NACK is stale, and
    // the frame is sent again on its timeout
    assert!(matches!(n.worker.state(), rocelink_ims::WorkerState::Done));
}

#[test]
fn a_unit_that_stops_takes_the_frames_before_a_gap_and_discards_those_behind_it() {
    // the unit stops while the fourth frame waits to be sent again: the frames after it
    // wait unanswered; nothing fills the gap any more, so they are discarded, never ACKed,
    // and the worker knows them as not stored
    let mut n = setup(21);
    let hits = tamper(&mut n, WRITE_LAST, 3, None);
    let end = n.pair.now + Duration::from_secs(5);
    while *hits.borrow() == 0 || n.server.stats().frames_delivered < 6 {
        assert!(n.pair.now < end, "{:?}", n.server.stats());
        n.poll();
        n.pair.step_until(n.worker.poll_timeout());
    }
    let s = n.server.stats();
    assert_eq!(
        s.frames_consumed, 3,
        "the gap holds back the frames behind it while serving"
    );
    let behind = n.server.pending();
    assert!(behind > 0);
    stop_unit(&mut n);
    let s = n.server.stats();
    assert_eq!(n.consumed(), vas(cfg_server().va_offset, FRAME, 3));
    assert_eq!(s.frames_discarded, behind as u64, "{s:?}");
    assert_acked_is_taken(&n, "a frame lost when the unit stopped");
    let never = n.worker.unacknowledged();
    assert!(
        never.len() > behind,
        "the lost frame and those behind it: {never:?}"
    );
}

/// A unit that stops: the frames it has delivered in order and not handed on yet go to the
/// consumer (each then ACKed); those behind a gap are discarded; the ACKs sent reach the
/// worker.
fn stop_unit(n: &mut Net) {
    let seen = n.seen.clone();
    let mut record = move |f: &rocelink_ims::Frame<'_>| {
        let mut s = seen.borrow_mut();
        s.0.push(f.va);
        s.1.entry(f.va).or_insert((0, true)).0 += 1;
    };
    let left = n.server.drain(&mut n.pair.b, n.pair.now, &mut record);
    assert_eq!(left, 0);
    n.server.discard(&mut n.pair.b);
    for _ in 0..1000 {
        let more = n.pair.step();
        n.worker.poll(&mut n.pair.a, n.pair.now, &mut n.source);
        if !more {
            break;
        }
    }
}

/// The frames the unit handed on, each once, and its counts: every ACK it sent names a
/// frame taken, every frame delivered was taken or discarded, and the worker saw ACKed
/// exactly the frames taken.
fn assert_acked_is_taken(n: &Net, what: &str) {
    let (ss, ws) = (n.server.stats(), n.worker.stats());
    let taken = n.consumed();
    let seen = n.seen.borrow();
    assert!(seen.1.values().all(|&(k, _)| k == 1), "{what}: once each");
    assert_eq!(ss.frames_consumed, taken.len() as u64, "{what}: {ss:?}");
    // (and again for a frame sent again after it was taken)
    assert!(
        ss.acked >= ss.frames_consumed,
        "{what}: an ACK per frame taken"
    );
    assert_eq!(
        ss.frames_delivered,
        ss.frames_consumed + ss.frames_discarded,
        "{what}: {ss:?}"
    );
    assert_eq!(ws.frames, ss.frames_consumed, "{what}: {ws:?} {ss:?}");
    let never = n.worker.unacknowledged();
    assert!(
        taken.iter().all(|va| !never.contains(va)),
        "{what}: a frame taken is one the worker saw ACKed"
    );
}

/// Frames 0..5 sent, the sixth faulted, and the worker's pipeline (eight in flight)
/// delivering the ones after it: run until `until` says so.
fn faulted_run(seed: u64, edit: fn(&mut Vec<u8>), until: fn(&Net) -> bool) -> Net {
    let mut n = setup(seed);
    let hits = tamper(&mut n, WRITE_FIRST, 5, Some(edit));
    let end = n.pair.now + Duration::from_secs(5);
    while !(*hits.borrow() == 1 && until(&n)) {
        assert!(n.pair.now < end, "{:?}", n.server.stats());
        n.poll();
        if !n.pair.step_until(n.worker.poll_timeout()) {
            break;
        }
    }
    n
}

#[test]
fn an_ack_means_the_frame_was_taken_whatever_ends_the_stream() {
    let rkey: fn(&mut Vec<u8>) = |b| b[20] ^= 0x80;
    let unaligned: fn(&mut Vec<u8>) = |b| {
        let va = u64::from_be_bytes(b[12..20].try_into().unwrap()) + 32;
        b[12..20].copy_from_slice(&va.to_be_bytes());
    };
    let first = vas(cfg_server().va_offset, FRAME, FRAMES);

    // a fatal NACK (invalid R_Key): the worker leaves; the frames it pipelined past the
    // refused one were delivered, never taken, never ACKed
    let mut n = faulted_run(31, rkey, |n| n.worker.finished());
    n.run(Duration::from_millis(100));
    assert!(matches!(n.worker.state(), WorkerState::Failed(_)));
    let ss = n.server.stats();
    assert!(
        ss.frames_delivered > 5,
        "frames past the refused one: {ss:?}"
    );
    assert_eq!(n.consumed(), first[..5], "the frames before it");
    assert_eq!(ss.frames_discarded, ss.frames_delivered - 5, "{ss:?}");
    assert_acked_is_taken(&n, "worker left after an invalid R_Key");

    // the same, and the unit stops before the worker's DATA_TERM comes: the worker is
    // not polled once the refused frame went out, its pipeline still arrives
    let mut n = faulted_run(32, rkey, |n| n.server.stats().frames_delivered >= 5);
    let end = n.pair.now + Duration::from_secs(1);
    while n.server.stats().frames_delivered < 7 && n.pair.now < end {
        let (mut nothing, now) = (|_: &rocelink_ims::Frame<'_>| {}, n.pair.now);
        n.server.poll(&mut n.pair.b, now, &mut nothing);
        if !n.pair.step() {
            break;
        }
    }
    let behind = n.server.pending();
    assert!(behind >= 2, "frames wait behind the refused one");
    stop_unit(&mut n);
    assert_eq!(n.consumed(), first[..5], "only the frames before the gap");
    assert_eq!(n.server.stats().frames_discarded, behind as u64);
    assert_acked_is_taken(&n, "unit stopped after an invalid R_Key");

    // an unaligned VA (fatal to a worker that knows the VA; this one waits for its
    // timeout): the unit stops while the frames after it wait
    let mut n = faulted_run(33, unaligned, |n| n.server.stats().frames_delivered >= 8);
    assert_eq!(n.server.stats().nacked.get(Events::INVALID_VA), 1);
    assert_eq!(
        n.worker.stats().frames,
        5,
        "nothing after the gap ACKed yet"
    );
    stop_unit(&mut n);
    assert_acked_is_taken(&n, "unit stopped after an invalid VA");

    // and served on: the frame comes again on its timeout and every frame is taken once
    let mut n = faulted_run(34, unaligned, |n| n.worker.finished());
    n.run(Duration::from_millis(100));
    assert_all_delivered(&n, FRAME, FRAMES);
    assert_acked_is_taken(&n, "served to the end");
}
