//! Both IMS roles through the transport's simulated link: setup, frames delivered exactly
//! once and intact under loss, reordering, duplication and corruption, each NACK cause
//! software can produce, a slow consumer holding the worker back, version refusal.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_ims::{Error, RateConsumer, UnitConfig, WorkerConfig, WorkerState};
use rocelink_transport::sim::{Dir, LinkConfig};
use rocelink_wire::ims::Events;
use std::time::Duration;

#[test]
fn a_clean_link_delivers_every_frame_once_and_closes_both_channels() {
    let (frame, frames) = (10_000, 200);
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        frame,
        frames,
        LinkConfig::default(),
        1,
    );
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, frame, frames);
    let (ws, ss) = (n.worker.stats(), n.server.stats());
    assert_eq!(
        (ws.retransmissions, ws.timeouts, ws.nacked.total()),
        (0, 0, 0)
    );
    assert_eq!((ss.acked, ss.duplicates, ss.nacked.total()), (frames, 0, 0));
}

#[test]
fn loss_reordering_duplication_and_corruption_lose_nothing() {
    let (frame, frames) = (6_000, 300);
    let mut retx = 0;
    for seed in 1..=6 {
        let link = LinkConfig {
            loss: 0.02,
            duplicate: 0.02,
            reorder: 0.02,
            corrupt: 0.01,
            ..LinkConfig::default()
        };
        let mut n = net(cfg_worker(), cfg_server(), frame, frames, link, seed);
        n.run(Duration::from_secs(60));
        assert_all_delivered(&n, frame, frames);
        let ws = n.worker.stats();
        assert!(ws.retransmissions > 0, "seed {seed}: nothing was lost?");
        retx += ws.retransmissions;
        assert!(n.pair.stats.lost > 0 && n.pair.stats.corrupted > 0);
    }
    assert!(retx > 10);
}

#[test]
fn a_slow_consumer_holds_the_worker_back_with_outside_window_nacks() {
    let (frame, frames) = (16_384, 60);
    let s = UnitConfig {
        ring_bytes: 4 * frame, // four frames; the worker has eight in flight
        ..cfg_server()
    };
    let mut n = net(cfg_worker(), s, frame, frames, LinkConfig::default(), 3);
    n.rate = Some(RateConsumer::new(0.5)); // 16 KiB per 262 µs
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, frame, frames);
    let (ws, ss) = (n.worker.stats(), n.server.stats());
    assert!(ws.window_stalls > 0 && ss.out_of_window > 0);
    assert_eq!(ws.window_stalls, ws.nacked.get(Events::OUTSIDE_WINDOW));
    assert_eq!(ss.nacked.get(Events::OUTSIDE_WINDOW), ss.out_of_window);
}

#[test]
fn a_buffer_unit_of_another_major_version_is_refused() {
    let s = UnitConfig {
        version: (2, 0),
        ..cfg_server()
    };
    let mut n = net(cfg_worker(), s, 4096, 10, LinkConfig::default(), 4);
    n.run(Duration::from_secs(1));
    assert_eq!(
        n.worker.state(),
        &WorkerState::Failed(Error::Version { major: 2, minor: 0 })
    );
    assert_eq!(n.server.stats().frames_delivered, 0);
    let msg = Error::Version { major: 2, minor: 0 }.to_string();
    assert!(msg.contains("2.0") && msg.contains("1.1"), "{msg}");
    // and a worker of a future major version refuses a 1.1 buffer unit
    let w = WorkerConfig {
        major: 2,
        ..cfg_worker()
    };
    let mut n = net(w, cfg_server(), 4096, 10, LinkConfig::default(), 4);
    n.run(Duration::from_secs(1));
    assert_eq!(
        n.worker.state(),
        &WorkerState::Failed(Error::Version { major: 1, minor: 1 })
    );
}

#[test]
fn no_buffer_unit_is_a_clear_error() {
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        4096,
        10,
        LinkConfig::default(),
        5,
    );
    n.pair.set_filter(|dir, _| dir != Dir::BtoA); // the buffer unit never answers
    n.run(Duration::from_secs(2));
    let WorkerState::Failed(e) = n.worker.state() else {
        panic!("{:?}", n.worker.state())
    };
    assert!(
        matches!(
            e,
            Error::NoAnswer {
                what: "STAT_RES",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("10.0.0.2:4791"), "{e}");
}

#[test]
fn a_worker_whose_every_stat_down_is_lost_still_ends_done_and_says_so() {
    let (frame, frames) = (4096, 20);
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        frame,
        frames,
        LinkConfig::default(),
        6,
    );
    // the unit's status answers, in order: STAT_RES, DATA_RES, DATA_DOWN, STAT_DOWN...
    let answers = std::cell::Cell::new(0);
    n.pair.set_filter(move |dir, bytes| {
        if dir != Dir::BtoA || bytes.first() != Some(&0x64) {
            return true; // not a UD SEND from the unit
        }
        answers.set(answers.get() + 1);
        answers.get() <= 3
    });
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, frame, frames);
    assert!(n.worker.stats().leave_unconfirmed);
    // and a unit whose goodbye arrives is confirmed
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        frame,
        frames,
        LinkConfig::default(),
        6,
    );
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, frame, frames);
    assert!(!n.worker.stats().leave_unconfirmed);
}
