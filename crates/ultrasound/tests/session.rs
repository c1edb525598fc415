//! The ultrasound roles as library sessions over loopback: a probe session, a host session
//! that triggers it and hands every shot on as an event, a round-trip measurement (also across
//! a probe restart), each stopped from another thread as a Ctrl-C handler or a Python caller
//! would.
#![allow(clippy::unwrap_used)]

use rocelink_runtime::Session;
use rocelink_runtime::counters::Board;
use rocelink_testkit::ports::free_udp_port;
use rocelink_ultrasound::Geometry;
use rocelink_ultrasound::session::LinkAddrs;
use rocelink_ultrasound::session::probe::{ProbeSession, ProbeSessionConfig};
use rocelink_ultrasound::session::round_trip::{RoundTrip, RoundTripConfig};
use rocelink_ultrasound::session::shots::{ShotsConfig, ShotsSession};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A probe on `at` with free RoCE and trigger ports.
fn probe(at: &str, host: &str, g: Geometry) -> (ProbeSession, u16, SocketAddr) {
    let port = free_udp_port(&[at, host]);
    let trig = free_udp_port(&[at]);
    let p = probe_on(at, port, trig, g);
    let t = p.links()[0].triggers;
    (p, port, t)
}

/// A probe on `at` with these RoCE and trigger ports.
fn probe_on(at: &str, port: u16, trig: u16, g: Geometry) -> ProbeSession {
    let cfg = ProbeSessionConfig {
        links: LinkAddrs {
            addrs: vec![ip(at)],
            port,
            chosen: true,
        },
        trigger_port: trig,
        trigger_hz: 2000.0,
        duration: Some(Duration::from_secs(30)),
        ..ProbeSessionConfig::new(g)
    };
    ProbeSession::start(cfg, None).unwrap()
}

#[test]
fn shots_come_as_events_in_order_and_the_summary_counts_them() {
    let g = Geometry::new(500, 96);
    let (probe, port, trig) = probe("127.0.0.161", "127.0.0.162", g);
    let board = Board::new("shots");
    let cfg = ShotsConfig {
        links: LinkAddrs {
            addrs: vec![ip("127.0.0.162")],
            port,
            chosen: true,
        },
        probes: vec![trig],
        shots: Some(50),
        verify_seed: Some(1),
        duration: Some(Duration::from_secs(20)),
        ..ShotsConfig::new(g)
    };
    let host = ShotsSession::start(cfg, Some(board.clone())).unwrap();
    assert_eq!(host.links()[0].probe, Some(trig));
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match host.next_event(Duration::from_millis(100)) {
            Some(e) => events.push(e),
            None if host.is_finished() => break,
            None => {}
        }
    }
    while let Some(e) = host.next_event(Duration::ZERO) {
        events.push(e);
    }
    let sum = host.wait().unwrap();
    assert_eq!(events.len(), 50, "one event per shot handed on");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.report.shot, i as u64);
        assert_eq!(e.link, 0);
        if e.report.complete {
            assert_eq!(e.outcome.verified, Some(true), "{e:?}");
        }
    }
    assert_eq!(sum.sink(|s| s.shots), 50);
    assert_eq!(sum.sink(|s| s.corrupt), 0);
    assert_eq!(sum.events_dropped, 0);
    assert!(sum.links[0].triggers.commands >= 1, "it started the probe");
    // its counters reached the board it was given
    let counters = board.snapshot();
    assert!(counters.total("roce_rx") >= 50 * u64::from(g.messages()));
    // the probe went on sending until the stop reached it: those shots stay unread, not
    // counted as dropped for want of a posted receive (nothing here was lost)
    assert_eq!(counters.total("qp_drops"), 0, "{}", counters.line());
    let p = probe.stop().unwrap();
    assert!(p.probe.shots >= 50, "{p:?}");
    assert_eq!(p.triggers.gate.not_allowed, 0);
}

#[test]
fn a_stopper_on_another_thread_ends_a_session_that_has_no_end() {
    let g = Geometry::new(100, 16);
    let (probe, port, trig) = probe("127.0.0.163", "127.0.0.164", g);
    let cfg = ShotsConfig {
        links: LinkAddrs {
            addrs: vec![ip("127.0.0.164")],
            port,
            chosen: true,
        },
        probes: vec![trig],
        ..ShotsConfig::new(g)
    };
    let host = ShotsSession::start(cfg, None).unwrap();
    let stopper = host.stopper();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        stopper.stop();
    });
    let t0 = Instant::now();
    while !host.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the stop did not end it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.join().unwrap();
    let sum = host.wait().unwrap();
    assert!(sum.sink(|s| s.shots) > 0, "shots came before the stop");
    // the host told the probe to stop: it goes idle (no shots after a moment)
    std::thread::sleep(Duration::from_millis(200));
    let before = probe.progress().shots;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        probe.progress().shots,
        before,
        "the probe was stopped by the host"
    );
    probe.stop().unwrap();
}

#[test]
fn a_round_trip_gives_a_row_per_size_and_no_probe_is_a_clear_error() {
    let g = |s| Geometry::new(s, 96);
    let (probe, port, trig) = probe("127.0.0.165", "127.0.0.166", g(1));
    let cfg = RoundTripConfig {
        probe: trig,
        bind: ip("127.0.0.166"),
        port,
        chosen: true,
        count: 30,
        warmup: 2,
        verify_seed: Some(1),
        ..RoundTripConfig::new(vec![g(1), g(500)])
    };
    let rows = RoundTrip::start(cfg.clone()).unwrap().wait().unwrap();
    assert_eq!(rows.len(), 2);
    for (r, samples) in rows.iter().zip([1, 500]) {
        assert_eq!(r.geometry.samples, samples);
        assert_eq!(r.rtt_us.len() as u64 + r.lost, 30, "{r:?}");
        assert!(r.rtt_us.windows(2).all(|w| w[0] <= w[1]), "sorted");
        assert!(r.quantile(0.0) > 0.0 && r.quantile(0.5) <= r.quantile(1.0));
        assert_eq!(r.corrupt, 0);
    }
    probe.stop().unwrap();
    // nobody at the trigger address: an error naming the probe, within a few timeouts
    let cfg = RoundTripConfig {
        timeout: Duration::from_millis(100),
        sizes: vec![g(1)],
        ..cfg
    };
    let e = RoundTrip::start(cfg).unwrap().wait().unwrap_err();
    assert!(e.to_string().contains(&trig.to_string()), "{e}");
}

#[test]
fn a_restarted_probe_challenges_again_and_the_host_goes_on_with_it() {
    // a probe that restarts has a new secret: it refuses the host's cookie with a fresh
    // challenge, which the host must take (it looks for one every few ms once it has a
    // cookie) to go on triggering one shot at a time
    let g = Geometry::new(1, 96);
    let (first, port, trig) = probe("127.0.0.167", "127.0.0.168", g);
    let cfg = RoundTripConfig {
        probe: trig,
        bind: ip("127.0.0.168"),
        port,
        chosen: true,
        count: 10_000_000,
        warmup: 0,
        timeout: Duration::from_millis(500),
        verify_seed: Some(1),
        ..RoundTripConfig::new(vec![g])
    };
    let rt = RoundTrip::start(cfg).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let until = |p: &ProbeSession, shots: u64| {
        while p.progress().shots < shots && Instant::now() < deadline && !rt.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    until(&first, 100);
    let a = first.stop().unwrap();
    assert!(a.probe.shots >= 100, "{a:?}");
    assert_eq!(a.triggers.gate.challenges, 1, "{a:?}");
    // the same addresses, a new run of the probe
    let second = probe_on("127.0.0.167", port, trig.port(), g);
    until(&second, 100);
    assert!(!rt.is_finished(), "the host gave up on the restarted probe");
    rt.stopper().stop();
    let b = second.stop().unwrap();
    let rows = rt.wait().unwrap();
    assert!(b.probe.shots >= 100, "{b:?}");
    assert!(b.triggers.gate.challenges >= 1, "{b:?}");
    // every shot of both runs came whole and right; at most the triggers sent while
    // neither ran (each given up after the timeout) are lost
    let r = &rows[0];
    assert_eq!(r.corrupt, 0);
    assert!(r.rtt_us.len() as u64 + 2 >= a.probe.shots + 100, "{r:?}");
    assert!(r.lost <= 2, "{} lost", r.lost);
}

#[test]
fn configs_are_plain_data_that_round_trip_through_json() {
    let g = Geometry::new(500, 32);
    let mut p = ProbeSessionConfig::new(g);
    p.gate.allow = vec!["10.0.0.0/8".parse().unwrap()];
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["gate"]["allow"][0], "10.0.0.0/8", "{v}");
    let back: ProbeSessionConfig = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    let s = ShotsConfig::new(g);
    let v = serde_json::to_value(&s).unwrap();
    let back: ShotsConfig = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    // a prefix that is not one is refused with the reason
    let mut bad = serde_json::to_value(&p).unwrap();
    bad["gate"]["allow"][0] = "10.0.0.0/99".into();
    let e = serde_json::from_value::<ProbeSessionConfig>(bad).unwrap_err();
    assert!(e.to_string().contains("10.0.0.0/99"), "{e}");
}

#[test]
fn events_carry_each_complete_shots_samples_when_asked() {
    let g = Geometry::new(200, 16);
    let (probe, port, trig) = probe("127.0.0.165", "127.0.0.166", g);
    let cfg = ShotsConfig {
        links: LinkAddrs {
            addrs: vec![ip("127.0.0.166")],
            port,
            chosen: true,
        },
        probes: vec![trig],
        shots: Some(5),
        duration: Some(Duration::from_secs(20)),
        with_data: true,
        ..ShotsConfig::new(g)
    };
    let host = ShotsSession::start(cfg, None).unwrap();
    let echoes = rocelink_ultrasound::shot::Echoes::new(1);
    let mut complete = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && complete < 5 {
        let Some(e) = host.next_event(Duration::from_millis(100)) else {
            continue;
        };
        let Some(d) = e.data.as_deref().filter(|_| e.report.complete) else {
            assert!(!e.report.complete, "a complete shot without its bytes");
            continue;
        };
        assert_eq!(d.len(), g.bytes());
        // 12-bit samples, two channels in three bytes (CSI RAW12), a row per sample time
        for (t, c) in [(0u32, 0u16), (7, 3), (199, 15), (150, 8)] {
            let row = &d[t as usize * g.row_bytes()..];
            let b = &row[usize::from(c / 2) * 3..];
            let v = match c % 2 {
                0 => (u16::from(b[0]) << 4) | u16::from(b[2] & 0xF),
                _ => (u16::from(b[1]) << 4) | u16::from(b[2] >> 4),
            };
            assert_eq!(
                v,
                echoes.sample(e.report.shot, t, c, 16),
                "shot {} t {t} c {c}",
                e.report.shot
            );
        }
        complete += 1;
    }
    assert_eq!(complete, 5);
    host.stop().unwrap();
    probe.stop().unwrap();
}

#[test]
fn with_data_every_an_hour_only_the_first_complete_shot_carries_its_samples() {
    let g = Geometry::new(200, 16);
    let (probe, port, trig) = probe("127.0.0.167", "127.0.0.168", g);
    let cfg = ShotsConfig {
        links: LinkAddrs {
            addrs: vec![ip("127.0.0.168")],
            port,
            chosen: true,
        },
        probes: vec![trig],
        shots: Some(6),
        duration: Some(Duration::from_secs(20)),
        with_data: true,
        data_every: Duration::from_secs(3600),
        ..ShotsConfig::new(g)
    };
    let host = ShotsSession::start(cfg, None).unwrap();
    let mut complete = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && complete.len() < 6 {
        match host.next_event(Duration::from_millis(100)) {
            Some(e) if e.report.complete => complete.push(e.data.map(|d| d.len())),
            _ => {}
        }
    }
    assert_eq!(complete.len(), 6);
    assert_eq!(complete[0], Some(g.bytes()));
    assert!(complete[1..].iter().all(Option::is_none), "{complete:?}");
    host.stop().unwrap();
    probe.stop().unwrap();
}
