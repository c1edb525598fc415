//! The device's own stack on a real link: an `XdpPort` in namespace A owns 10.213.0.1
//! (an address of no interface) with a small ARP cache and sends UDP to three kernel
//! sockets at three addresses of namespace B. The kernel of B answers ARP; the port must
//! resolve the three next hops concurrently (one request each, however many datagrams
//! wait), deliver every datagram in order per destination, evict when its two ways are
//! full, and resolve an evicted neighbour again with exactly one more request.

#![allow(clippy::unwrap_used)]

use rocelink_netstack::arp_cache::ArpConfig;
use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
use rocelink_testkit::netns::{VethPair, need, root_or_ci};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["10.213.0.2", "10.213.0.3", "10.213.0.4"];

/// Pump the port until every socket got `want` datagrams (or 5 s pass); what each got.
fn collect(port: &XdpPort, socks: &[UdpSocket], want: usize) -> Vec<Vec<String>> {
    let mut got = vec![Vec::new(); socks.len()];
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    while got.iter().any(|g| g.len() < want) && t0.elapsed() < Duration::from_secs(5) {
        port.wait_readable(Some(Duration::from_millis(5))).unwrap();
        port.poll().unwrap();
        // the stack answers ARP replies as frames come in: any socket read takes them
        let s = port.socket(7000);
        let _ = s.recv_from(&mut buf).unwrap();
        for (i, k) in socks.iter().enumerate() {
            while let Ok((n, _)) = k.recv_from(&mut buf) {
                got[i].push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }
    got
}

#[test]
fn arp_with_concurrent_misses_and_eviction_over_veth() {
    if !root_or_ci() || !need("ip", "iproute2") {
        return;
    }
    let b_addrs: Vec<String> = HOSTS.iter().map(|h| format!("{h}/24")).collect();
    let b_refs: Vec<&str> = b_addrs.iter().map(String::as_str).collect();
    let ns = VethPair::new("r16", &[], &b_refs);
    // the receivers, made in namespace B
    let (nb, ha) = (ns.b.clone(), ns.a.clone());
    let socks: Vec<UdpSocket> = std::thread::spawn(move || {
        rocelink_io::netns::enter(&nb).unwrap();
        HOSTS
            .iter()
            .map(|h| {
                let s = UdpSocket::bind((*h, 5000)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect()
    })
    .join()
    .unwrap();
    let va = ns.va.clone();
    let (iface, stats) = std::thread::spawn(move || {
        rocelink_io::netns::enter(&ha).unwrap();
        let mut cfg = XdpPortConfig::new(&va, "10.213.0.1".parse().unwrap(), XdpRole::Device);
        cfg.arp = ArpConfig {
            sets: 1,
            ways: 2,
            ..ArpConfig::default()
        };
        let port = match XdpPort::open(&cfg) {
            Ok(p) => p,
            Err(e) => panic!("AF_XDP on veth in a namespace: {e}"),
        };
        let tx = port.socket(6000);
        // 1. two datagrams to each of three unknown neighbours, before any answer
        for round in 0..2 {
            for h in HOSTS {
                let dst: SocketAddr = format!("{h}:5000").parse().unwrap();
                assert!(tx.send_to(format!("{h} #{round}").as_bytes(), dst).unwrap());
            }
        }
        let first = port.arp_stats();
        let got = collect(&port, &socks, 2);
        let after = port.arp_stats();
        for (i, h) in HOSTS.iter().enumerate() {
            assert_eq!(
                got[i],
                vec![format!("{h} #0"), format!("{h} #1")],
                "{got:?}"
            );
        }
        // 2. once more to each: the two-way cache lost one of them
        for h in HOSTS {
            let dst: SocketAddr = format!("{h}:5000").parse().unwrap();
            assert!(tx.send_to(format!("{h} #2").as_bytes(), dst).unwrap());
        }
        let again = collect(&port, &socks, 1);
        for (i, h) in HOSTS.iter().enumerate() {
            assert_eq!(again[i], vec![format!("{h} #2")], "{again:?}");
        }
        let last = port.arp_stats();
        (port.iface_stats(), (first, after, last))
    })
    .join()
    .unwrap();
    let (first, after, last) = stats;
    // three concurrent misses, one request each (the second datagram to each waited)
    assert_eq!(first.requests, 3, "{first:?}");
    assert_eq!(after.requests, 3, "{after:?}");
    assert_eq!(
        after.evictions, 1,
        "three neighbours in two ways: {after:?}"
    );
    // the evicted one asked for again, once; two hits
    assert_eq!(last.requests, 4, "{last:?}");
    assert_eq!(last.evictions, 2, "{last:?}");
    assert_eq!(iface.unresolved_drops, 0, "{iface:?}");
}
