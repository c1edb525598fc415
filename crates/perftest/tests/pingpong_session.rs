//! The pingpong session keeps the session contract's stop: a server still waiting for its
//! client gives up, exchanges under way end with what they did, and the counters stay
//! readable through `progress` (a board of the session's own).
#![allow(clippy::unwrap_used)]

use rocelink_perftest::pingpong::PingpongConfig;
use rocelink_perftest::pingpong::PingpongError;
use rocelink_perftest::pingpong::session::{
    PingpongEvent, PingpongSession, PingpongSessionConfig, Session, Side,
};
use rocelink_transport::QpType;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

fn config(side: Side, bind: IpAddr, iters: u32) -> PingpongSessionConfig {
    let mut pingpong = PingpongConfig::new(QpType::Rc);
    pingpong.iters = iters;
    pingpong.time_limit = Duration::from_secs(60);
    PingpongSessionConfig {
        bind: Some(bind),
        ..PingpongSessionConfig::new(pingpong, side)
    }
}

#[test]
fn a_stop_ends_a_server_still_waiting_for_its_client() {
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let at = SocketAddr::new(ip, 0);
    let s = PingpongSession::start(config(Side::Server(at), ip, 10), None).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!s.is_finished(), "it waits for a client");
    let t = Instant::now();
    let e = s.stop().unwrap_err();
    assert!(
        matches!(
            e,
            PingpongError::Stopped {
                received: 0,
                sent: 0
            }
        ),
        "{e:?}"
    );
    // looked at every 50 ms, not at the 60 s time limit
    assert!(t.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_stop_ends_exchanges_under_way_and_leaves_their_counters() {
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    let server = PingpongSession::start(
        config(Side::Server(SocketAddr::new(ips[0], 0)), ips[0], u32::MAX),
        None,
    )
    .unwrap();
    let client = PingpongSession::start(
        config(Side::Client(server.exchange_addr()), ips[1], u32::MAX),
        None,
    )
    .unwrap();
    let e = client.next_event(Duration::from_secs(30));
    assert!(matches!(e, Some(PingpongEvent::Addresses { .. })), "{e:?}");
    // some exchanges, then the stop
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.progress().total("rx_packets") < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let rx = client.progress().total("rx_packets");
    assert!(rx >= 100, "exchanges ran: {rx} packets received");
    let e = client.stop().unwrap_err();
    let PingpongError::Stopped { received, sent } = e else {
        panic!("{e:?}");
    };
    assert!(received > 0 && sent > 0, "{received} {sent}");
    let e = server.stop().unwrap_err();
    assert!(matches!(e, PingpongError::Stopped { .. }), "{e:?}");
}
