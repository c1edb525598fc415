//! One AF_XDP port per receive queue, each read by its own thread: a veth pair with two
//! queues each way; namespace A's kernel sends UDP to ports 5000 and 5001 of B, a `tc`
//! egress program in A choosing the transmit queue by port (on veth the frame arrives on
//! the receive queue of that number — as a NIC's flow steering would place it); in B a
//! host port on queue 0 and its sibling on queue 1 share one XDP program, and each thread
//! must get exactly its port's datagrams, in order, with nothing crossing queues. Swapping
//! the steering swaps the queues the datagrams land on, so the steering — not chance
//! hashing — decides.

#![allow(clippy::unwrap_used)]

use rocelink_io::backend::Backend;
use rocelink_io::udp::RecvBatch;
use rocelink_io::xdp::TxQueueSteer;
use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole, XdpSocket};
use rocelink_testkit::netns::{VethPair, need, root_or_ci};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const PER_PORT: usize = 300;

/// Receive `want` datagrams on `sock` (or until 5 s pass): their texts, and this thread's id.
fn take(sock: XdpSocket, want: usize) -> (Vec<String>, std::thread::ThreadId) {
    let mut batch = RecvBatch::new(64, 2048);
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < want && t0.elapsed() < Duration::from_secs(5) {
        if sock
            .recv(&mut batch, Some(Duration::from_millis(20)))
            .unwrap()
            > 0
        {
            for (_, seg) in batch.segments() {
                got.push(String::from_utf8_lossy(seg).into_owned());
            }
        }
    }
    (got, std::thread::current().id())
}

/// Send PER_PORT datagrams to each of ports 5000 and 5001, interleaved.
fn send(from: &UdpSocket, round: u32) {
    for i in 0..PER_PORT {
        for port in [5000u16, 5001] {
            let dst = SocketAddr::from(([10, 215, 0, 2], port));
            from.send_to(format!("{round}:{port}:{i}").as_bytes(), dst)
                .unwrap();
        }
        if i % 32 == 31 {
            std::thread::sleep(Duration::from_millis(1)); // stay within the rings
        }
    }
}

#[test]
fn two_queues_two_threads_each_gets_its_own_port() {
    if !root_or_ci() || !need("ip", "iproute2") {
        return;
    }
    let ns = VethPair::with_queues("q2", &["10.215.0.1/24"], &["10.215.0.2/24"], 2);
    let (na, nb, va, vb) = (ns.a.clone(), ns.b.clone(), ns.va.clone(), ns.vb.clone());
    // B: queue 0's port and its sibling on queue 1, one XDP program
    let ports = std::thread::spawn(move || {
        rocelink_io::netns::enter(&nb).unwrap();
        let mut cfg = XdpPortConfig::new(&vb, "10.215.0.2".parse().unwrap(), XdpRole::Host);
        cfg.host_ports = (5000, 5001);
        let q0 = XdpPort::open(&cfg).unwrap();
        let q1 = q0.open_queue(1).unwrap();
        let err = q0.open_queue(2).unwrap_err().to_string();
        assert!(
            err.contains("2 receive queue(s)") && err.contains("no queue 2"),
            "{err}"
        );
        (q0, q1)
    })
    .join()
    .unwrap();
    assert_eq!((ports.0.queue(), ports.1.queue()), (0, 1));
    let na2 = na.clone();
    let sender = std::thread::spawn(move || {
        rocelink_io::netns::enter(&na2).unwrap();
        UdpSocket::bind("10.215.0.1:0").unwrap()
    })
    .join()
    .unwrap();
    for (round, steer) in [
        (0u32, [(5000u16, 0u32), (5001, 1)]),
        (1, [(5000, 1), (5001, 0)]),
    ] {
        let tc = {
            let (na, va) = (na.clone(), va.clone());
            std::thread::spawn(move || {
                rocelink_io::netns::enter(&na).unwrap();
                TxQueueSteer::attach(&va, &steer)
            })
            .join()
            .unwrap()
            .unwrap()
        };
        let before = (ports.0.stats().rx_frames, ports.1.stats().rx_frames);
        // each queue's port opens the socket of the port steered to it
        let on = |q: u32| steer.iter().find(|(_, x)| *x == q).unwrap().0;
        let (p0, p1) = (on(0), on(1));
        let (s0, s1) = (ports.0.socket(p0), ports.1.socket(p1));
        let (r0, r1) = std::thread::scope(|s| {
            let h0 = s.spawn(move || take(s0, PER_PORT));
            let h1 = s.spawn(move || take(s1, PER_PORT));
            std::thread::sleep(Duration::from_millis(50));
            send(&sender, round);
            (h0.join().unwrap(), h1.join().unwrap())
        });
        assert_ne!(r0.1, r1.1, "two threads");
        for (got, port) in [(&r0.0, p0), (&r1.0, p1)] {
            let want: Vec<String> = (0..PER_PORT)
                .map(|i| format!("{round}:{port}:{i}"))
                .collect();
            assert_eq!(
                got, &want,
                "round {round}: port {port}, in order, nothing else"
            );
        }
        // nothing crossed: each port's socket took every frame its queue received
        let (s0, s1) = (ports.0.stats(), ports.1.stats());
        assert_eq!(s0.rx_frames - before.0, PER_PORT as u64, "queue 0: {s0:?}");
        assert_eq!(s1.rx_frames - before.1, PER_PORT as u64, "queue 1: {s1:?}");
        assert_eq!((s0.no_port, s1.no_port), (0, 0));
        drop(tc);
    }
}
