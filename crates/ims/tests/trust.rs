//! What the IMS roles accept from whom: answers only from the unit's data channel (its
//! address and port, in PSN order, about frames that left whole), requests on the status
//! channel only from the address that registered, a bounded worker table; and what a
//! worker does when the unit refuses it, fails it or goes silent.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_ims::{Error, UnitConfig, WorkerConfig, WorkerState};
use rocelink_transport::Datagram;
use rocelink_transport::sim::{Dir, LinkConfig};
use rocelink_wire::ib::{BthRepr, DethRepr, IbRepr, Opcode};
use rocelink_wire::ims::{AckRepr, AckType, Events, Method, StatusRepr, ack, status};
use std::net::SocketAddr;
use std::time::Duration;

const FRAME: usize = 10_000;

/// A UC SEND ONLY carrying `a` to the worker's data QP, from `src`, with PSN `psn`.
fn answer(n: &mut Net, src: SocketAddr, psn: u32, a: AckRepr) {
    let (qpn, _, _) = n.worker.data_channel().unwrap();
    let mut body = [0u8; ack::PACKET_LEN];
    a.emit(&mut body);
    let ib = IbRepr {
        bth: BthRepr {
            opcode: Opcode::UC_SEND_ONLY,
            dest_qp: qpn,
            psn,
            ..Default::default()
        },
        payload_len: body.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, &body);
    let dst = addr(WORKER);
    rocelink_wire::icrc::fill_socket(src, dst, &mut b).unwrap();
    let now = n.pair.now;
    n.pair.a.handle_datagram(
        now,
        Datagram {
            src,
            dst,
            ip_header: None,
            payload: &b,
        },
    );
}

fn ack_of(va: u64) -> AckRepr {
    AckRepr {
        kind: AckType::Ack,
        events: Events(0),
        va,
    }
}

/// Run until the worker streams and has frames posted.
fn streaming(n: &mut Net) {
    for _ in 0..100_000 {
        n.poll();
        if n.worker.data_channel().is_some() && n.worker.in_flight() > 0 {
            return;
        }
        assert!(n.pair.step_until(n.worker.poll_timeout()), "stalled");
    }
    panic!("no data channel");
}

#[test]
fn answers_from_another_port_of_the_units_address_are_refused() {
    let frames = 40;
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        frames,
        LinkConfig::default(),
        31,
    );
    // the unit never sees a data packet: only forged ACKs could make the worker believe
    n.pair
        .set_filter(|dir, b| dir != Dir::AtoB || !matches!(b.first(), Some(0x24..=0x2B)));
    streaming(&mut n);
    n.pair.step(); // the frames in flight leave whole
    n.poll();
    let vas = vas(cfg_server().va_offset, FRAME, frames);
    let forger = SocketAddr::new(addr(SERVER).ip(), 50_000);
    for (i, &va) in vas.iter().enumerate() {
        answer(&mut n, forger, i as u32, ack_of(va));
    }
    n.poll();
    let (qpn, _, _) = n.worker.data_channel().unwrap();
    assert_eq!(n.pair.a.qp_stats(qpn).unwrap().foreign_port, frames);
    assert_eq!(n.worker.stats().frames, 0);
    assert_eq!(n.worker.stats().acked, 0);
    // nor does a forged "invalid R_Key" NACK (which would end the stream) from that port
    let fatal = AckRepr {
        kind: AckType::Nack,
        events: Events(Events::INVALID_RKEY),
        va: vas[0],
    };
    answer(&mut n, forger, 0, fatal);
    n.poll();
    assert_eq!(n.worker.state(), &WorkerState::Streaming);
    // the same ACK from the unit's own port is believed (the check is the port)
    answer(&mut n, addr(SERVER), 0, ack_of(vas[0]));
    n.poll();
    assert_eq!(n.worker.stats().frames, 1);
}

#[test]
fn answers_out_of_psn_order_are_refused() {
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        40,
        LinkConfig::default(),
        32,
    );
    n.pair
        .set_filter(|dir, b| dir != Dir::AtoB || !matches!(b.first(), Some(0x24..=0x2B)));
    streaming(&mut n);
    n.pair.step();
    n.poll();
    let vas = vas(cfg_server().va_offset, FRAME, 8);
    let unit = addr(SERVER);
    // far ahead of the unit's answer stream (which starts at 0), and a replay behind it
    answer(&mut n, unit, 5000, ack_of(vas[0]));
    answer(&mut n, unit, 0, ack_of(vas[1]));
    answer(&mut n, unit, 0, ack_of(vas[2]));
    n.poll();
    let (qpn, _, _) = n.worker.data_channel().unwrap();
    assert_eq!(n.pair.a.qp_stats(qpn).unwrap().psn_refused, 2);
    assert_eq!(n.worker.stats().frames, 1, "only the in-sequence one");
}

#[test]
fn an_ack_for_a_frame_not_yet_sent_whole_is_refused() {
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        40,
        LinkConfig::default(),
        33,
    );
    streaming(&mut n); // frames posted, none transmitted yet
    let va = vas(cfg_server().va_offset, FRAME, 1)[0];
    answer(&mut n, addr(SERVER), 0, ack_of(va));
    n.poll();
    assert_eq!(n.worker.stats().early_acks, 1);
    assert_eq!(n.worker.stats().frames, 0);
    // the real stream then completes: the early ACK cost nothing
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, FRAME, 40);
}

#[test]
fn a_fatal_nack_takes_both_channels_down_before_the_worker_ends() {
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        40,
        LinkConfig::default(),
        34,
    );
    // the 6th frame's R_Key is damaged on the wire: the unit NACKs it "invalid RKEY"
    tamper(&mut n, WRITE_FIRST, 5, Some(|b| b[20] ^= 0x80));
    n.run(Duration::from_secs(5));
    let WorkerState::Failed(Error::Refused { causes, .. }) = n.worker.state() else {
        panic!("{:?}", n.worker.state());
    };
    assert_eq!(causes, "invalid_rkey");
    // DATA_TERM and STAT_TERM went out and were answered: the unit holds nothing for it
    assert_eq!((n.server.workers(), n.server.channels()), (0, 0));
    assert!(!n.worker.unacknowledged().is_empty());
}

#[test]
fn a_refused_version_still_leaves_the_status_channel() {
    let s = UnitConfig {
        version: (2, 0),
        ..cfg_server()
    };
    let mut n = net(cfg_worker(), s, 4096, 10, LinkConfig::default(), 35);
    n.run(Duration::from_secs(2));
    assert_eq!(
        n.worker.state(),
        &WorkerState::Failed(Error::Version { major: 2, minor: 0 })
    );
    assert_eq!(n.server.workers(), 0, "STAT_TERM was sent");
}

#[test]
fn a_unit_that_goes_silent_ends_the_stream_with_an_error() {
    let w = WorkerConfig {
        silence: Duration::from_millis(200),
        ..cfg_worker()
    };
    let mut n = net(w, cfg_server(), FRAME, 1000, LinkConfig::default(), 36);
    streaming(&mut n);
    let start = n.pair.now;
    // from now on nothing reaches the worker
    n.pair.set_filter(|dir, _| dir != Dir::BtoA);
    n.run(Duration::from_secs(5));
    let WorkerState::Failed(e) = n.worker.state() else {
        panic!("{:?}", n.worker.state());
    };
    assert!(
        matches!(e, Error::Silent { frames, .. } if *frames > 0),
        "{e}"
    );
    assert!(e.to_string().contains("10.0.0.2:4791"), "{e}");
    assert!(n.pair.now - start < Duration::from_secs(2));
}

/// A status packet (UD SEND ONLY to the unit's status QP) from `src` carrying `p`.
fn status_from(n: &mut Net, src: SocketAddr, p: StatusRepr) {
    let mut body = [0u8; status::PACKET_LEN];
    p.emit(&mut body);
    let ib = IbRepr {
        bth: BthRepr {
            opcode: Opcode::UD_SEND_ONLY,
            dest_qp: rocelink_ims::STATUS_QPN,
            ..Default::default()
        },
        deth: Some(DethRepr {
            qkey: rocelink_ims::STATUS_QKEY,
            src_qp: p.qpn,
        }),
        payload_len: body.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, &body);
    let dst = addr(SERVER);
    rocelink_wire::icrc::fill_socket(src, dst, &mut b).unwrap();
    let now = n.pair.now;
    n.pair.b.handle_datagram(
        now,
        Datagram {
            src,
            dst,
            ip_header: None,
            payload: &b,
        },
    );
}

fn request(method: Method, lid_of: SocketAddr, qpn: u32, qkey_or_qpnd: u32) -> StatusRepr {
    StatusRepr {
        major: 1,
        minor: 1,
        method,
        lid: rocelink_ims::lid_of(lid_of),
        qpn,
        qkey_or_qpnd,
        va: 0,
        rkey: 0,
    }
}

#[test]
fn terms_for_a_worker_from_another_address_or_port_are_refused() {
    let frames = 200;
    let mut n = net(
        cfg_worker(),
        cfg_server(),
        FRAME,
        frames,
        LinkConfig::default(),
        37,
    );
    streaming(&mut n);
    let qpn = n.worker.status_qpn();
    let worker = addr(WORKER);
    let elsewhere = [
        SocketAddr::new(worker.ip(), 50_000), // its address, another port
        addr("10.0.0.99:4791"),               // another address claiming its LID
    ];
    for src in elsewhere {
        for m in [
            Method::DataTerm,
            Method::StatTerm,
            Method::DataReq,
            Method::StatReq,
        ] {
            status_from(&mut n, src, request(m, worker, qpn, 0x1234));
        }
    }
    n.run(Duration::from_secs(10));
    assert_all_delivered(&n, FRAME, frames);
    assert_eq!(n.server.stats().status_foreign, 8);
}

#[test]
fn the_worker_table_is_bounded_and_answers_are_rate_limited() {
    let s = UnitConfig {
        max_workers: 8,
        answers_per_sec: 100,
        ..cfg_server()
    };
    let mut n = net(cfg_worker(), s, FRAME, 10, LinkConfig::default(), 38);
    let flood = addr("10.0.0.9:4791");
    for q in 0..5000u32 {
        status_from(&mut n, flood, request(Method::StatReq, flood, 0x100 + q, 7));
    }
    n.pair.step();
    n.poll();
    let st = n.server.stats();
    // (the status QP's posted receives bound how many reached the unit at once)
    let taken = st.status_packets;
    assert!(taken >= 100, "{st:?}");
    assert_eq!(n.server.workers(), 8);
    assert_eq!(st.workers_refused, taken - 8);
    // a burst of at most 16 answers went out at once; the rest were not sent
    assert_eq!(st.answers_dropped, taken - 16, "{st:?}");
    // the real worker is refused too, and told why
    n.run(Duration::from_secs(5));
    let WorkerState::Failed(e) = n.worker.state() else {
        panic!("{:?}", n.worker.state());
    };
    assert!(matches!(e, Error::Full { what: "worker", .. }), "{e}");
    assert!(e.to_string().contains("full"), "{e}");
}

#[test]
fn silent_workers_are_forgotten_and_their_channels_freed() {
    let s = UnitConfig {
        max_channels: 2,
        idle_timeout: Duration::from_millis(300),
        ..cfg_server()
    };
    let mut n = net(cfg_worker(), s, FRAME, 20, LinkConfig::default(), 39);
    // two workers that open a data channel each and never send a frame
    let squatter = addr("10.0.0.9:4791");
    for q in [0x200, 0x201] {
        status_from(&mut n, squatter, request(Method::StatReq, squatter, q, 7));
        status_from(
            &mut n,
            squatter,
            request(Method::DataReq, squatter, q, q + 0x10),
        );
    }
    n.pair.step();
    n.poll();
    assert_eq!(n.server.channels(), 2);
    // the real worker is turned away from a data channel, and told why
    n.run(Duration::from_secs(5));
    let WorkerState::Failed(e) = n.worker.state() else {
        panic!("{:?}", n.worker.state());
    };
    assert!(
        matches!(
            e,
            Error::Full {
                what: "data channel",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(n.server.stats().channels_refused, 1);
    // the squatters expire: their channels are free again
    let later = n.pair.now + Duration::from_millis(400);
    n.pair.step_until(Some(later));
    n.poll();
    let st = n.server.stats();
    assert_eq!(st.workers_expired, 2, "{st:?}");
    assert_eq!((n.server.workers(), n.server.channels()), (0, 0));
}
