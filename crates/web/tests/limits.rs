//! The server under hostile clients: idle connections and a slowloris do not delay a
//! GET; a slow head is cut off; the wildcard address needs asking for.
#![allow(clippy::unwrap_used)]

use rocelink_runtime::counters::{Board, Link};
use rocelink_transport::{Endpoint, EndpointConfig};
use rocelink_web::{Exposure, Limits, Server, check_addr, metrics};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn board() -> Board {
    let b = Board::new("test");
    let ep = Endpoint::new(EndpointConfig::new("127.0.0.1:4791".parse().unwrap()));
    b.set_link(Link::of("data", &ep, 42, 7));
    b
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

#[test]
fn metrics_are_served_and_other_paths_are_404() {
    let s = Server::start(
        "127.0.0.1:0".parse().unwrap(),
        metrics(board()),
        Limits::default(),
        "metrics",
    )
    .unwrap();
    let ok = get(s.addr(), "/metrics");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("\nrocelink_rx_packets_total{link=\"data\""),
        "{ok}"
    );
    let nf = get(s.addr(), "/other");
    assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
}

#[test]
fn idle_and_slow_clients_do_not_delay_a_request() {
    let limits = Limits {
        header_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let s = Server::start(
        "127.0.0.1:0".parse().unwrap(),
        metrics(board()),
        limits,
        "metrics",
    )
    .unwrap();
    // five connections that never send a byte, and one that drips its head
    let idle: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(s.addr()).unwrap())
        .collect();
    let mut slow = TcpStream::connect(s.addr()).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let t = Instant::now();
    let ok = get(s.addr(), "/metrics");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    // the slow head is cut off once its time is up
    std::thread::sleep(Duration::from_millis(700));
    let _ = slow.write_all(b"Host: x\r\n");
    slow.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rest = Vec::new();
    let n = slow.read_to_end(&mut rest).unwrap_or(0);
    let text = String::from_utf8_lossy(&rest[..n]);
    assert!(!text.contains("200 OK"), "{text}");
    drop(idle);
}

/// 300 connections sending their heads a byte a second (another local user blinding the
/// operator) hold every slot; a GET still gets in, shedding the oldest of them, and is
/// answered at once — also while they keep coming.
#[test]
fn three_hundred_slow_clients_do_not_blind_the_operator() {
    let s = Server::start(
        "127.0.0.1:0".parse().unwrap(),
        metrics(board()),
        Limits::default(),
        "metrics",
    )
    .unwrap();
    let addr = s.addr();
    let slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"G").unwrap();
            c
        })
        .collect();
    // the drip: a byte a second on each, and a fresh slow client every 10 ms
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dripper = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut slow = slow;
            let mut next = Instant::now();
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && n < 500 {
                if Instant::now() >= next {
                    for c in &mut slow {
                        let _ = c.write_all(b"E");
                    }
                    next += Duration::from_secs(1);
                }
                if let Ok(mut c) = TcpStream::connect(addr) {
                    let _ = c.write_all(b"G");
                    slow.push(c);
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            slow.len()
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    for _ in 0..3 {
        let t = Instant::now();
        let ok = get(addr, "/metrics");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(dripper.join().unwrap() > 300);
}

#[test]
fn a_wildcard_address_needs_asking_for() {
    let any: SocketAddr = "0.0.0.0:9464".parse().unwrap();
    let e = check_addr(any, Exposure::Local, "--metrics").unwrap_err();
    assert!(e.contains("--metrics-public"), "{e}");
    assert!(
        check_addr(any, Exposure::Public, "--metrics")
            .unwrap()
            .is_some()
    );
    assert_eq!(
        check_addr("127.0.0.1:1".parse().unwrap(), Exposure::Local, "--metrics"),
        Ok(None)
    );
    let one = check_addr("10.1.2.3:1".parse().unwrap(), Exposure::Local, "--metrics").unwrap();
    assert!(one.unwrap().contains("10.1.2.3"));
    assert!(check_addr("[::]:1".parse().unwrap(), Exposure::Local, "--metrics").is_err());
}
