//! The stack between peers, frames passed by hand: ping from bytes scapy built, ARP with
//! eviction and concurrent misses released in order, VLAN and FCS, and a PFC pause that
//! keeps one class lossless while another goes on.

#![allow(clippy::unwrap_used)]

use rocelink_netstack::arp_cache::ArpConfig;
use rocelink_netstack::iface::{IfaceConfig, Interface, Rx, Sent, UdpTx};
use rocelink_netstack::pfc::{PfcRx, PfcTx, pause_time};
use rocelink_wire::bytes::Mac;
use rocelink_wire::ethernet::{Frame, ethertype};
use rocelink_wire::{arp, icmpv4, ipv4};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

fn iface(n: u8, f: impl FnOnce(&mut IfaceConfig)) -> Interface {
    let mut c = IfaceConfig::new(mac(n), ip(n));
    f(&mut c);
    Interface::new(c).unwrap()
}

/// Ether/IP(id 0x1234, DF, TTL 64)/ICMP echo request id 7 seq 1 "abcdefgh", 10.0.0.1 →
/// 10.0.0.2, as scapy 2.x builds it.
static PING: [u8; 50] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x24, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x14, 0xa3, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
    0x00, 0x02, 0x08, 0x00, 0x66, 0x62, 0x00, 0x07, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66,
    0x67, 0x68,
];

#[test]
fn answers_a_ping_scapy_built_after_resolving_the_sender() {
    let t = Instant::now();
    let mut dev = iface(2, |_| {});
    assert!(dev.handle_frame(t, &PING).is_none());
    // the sender is unknown: the reply waits behind an ARP request for it
    let req = dev.poll_transmit(t).unwrap();
    let f = Frame::new_checked(&req[..]).unwrap();
    assert_eq!(f.ethertype(), ethertype::ARP);
    let r = arp::Repr::parse(&arp::Packet::new_checked(f.payload()).unwrap()).unwrap();
    assert_eq!(
        (r.operation, r.spa, r.tpa),
        (arp::Operation::Request, ip(2), ip(1))
    );
    assert!(dev.poll_transmit(t).is_none());
    // the answer releases it
    let mut answer = vec![0u8; 60];
    rocelink_wire::ethernet::Repr {
        dst: mac(2),
        src: mac(1),
        vlan: None,
        ethertype: ethertype::ARP,
    }
    .emit(&mut answer);
    arp::Repr {
        operation: arp::Operation::Reply,
        sha: mac(1),
        spa: ip(1),
        tha: mac(2),
        tpa: ip(2),
    }
    .emit(&mut answer[14..]);
    dev.handle_frame(t, &answer);
    let reply = dev.poll_transmit(t).unwrap();
    let f = Frame::new_checked(&reply[..]).unwrap();
    assert_eq!((f.dst(), f.src()), (mac(1), mac(2)));
    let p = ipv4::Packet::new_checked(f.payload()).unwrap();
    assert!(p.verify_checksum());
    assert_eq!((p.src(), p.dst(), p.protocol()), (ip(2), ip(1), 1));
    let icmp = icmpv4::Packet::new_checked(p.payload()).unwrap();
    let e = icmpv4::EchoRepr::parse(&icmp).unwrap();
    assert!(!e.request);
    assert_eq!((e.ident, e.seq, icmp.data()), (7, 1, &b"abcdefgh"[..]));
    assert_eq!(dev.stats.echo_replies, 1);
    // a corrupted IPv4 header is dropped and counted
    let mut bad = PING;
    bad[22] ^= 1; // TTL
    assert!(dev.handle_frame(t, &bad).is_none());
    assert_eq!(dev.stats.bad_ip_checksum, 1);
    assert!(dev.poll_transmit(t).is_none());
}

/// Deliver every frame `from` has to every interface in `to`, the UDP payloads each got.
fn pump(t: Instant, from: &mut Interface, to: &mut [&mut Interface]) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while let Some(f) = from.poll_transmit(t) {
        for i in to.iter_mut() {
            if let Some(Rx::Udp(u)) = i.handle_frame(t, &f) {
                got.push(u.payload.to_vec());
            }
        }
    }
    got
}

#[test]
fn concurrent_misses_are_released_in_order_and_a_small_cache_evicts() {
    let t = Instant::now();
    // one set of two ways: the third peer evicts the least recently used
    let mut host = iface(1, |c| {
        c.arp = ArpConfig {
            sets: 1,
            ways: 2,
            ..ArpConfig::default()
        }
    });
    let mut peers: Vec<Interface> = (2..=4).map(|n| iface(n, |_| {})).collect();
    let to = |n: u8| UdpTx {
        dst: SocketAddrV4::new(ip(n), 4791),
        src_port: 49152,
        dscp: 26,
        pcp: 0,
    };
    for n in [2u8, 3, 4, 2] {
        assert_eq!(host.send_udp(t, to(n), &[n; 40]).unwrap(), Sent::Held);
    }
    // three ARP requests (one per address), nothing else yet
    let mut reqs = Vec::new();
    while let Some(f) = host.poll_transmit(t) {
        reqs.push(f);
    }
    assert_eq!(reqs.len(), 3);
    // peers answer in reverse order
    for p in peers.iter_mut().rev() {
        for r in &reqs {
            p.handle_frame(t, r);
        }
        let answer = p.poll_transmit(t).unwrap();
        host.handle_frame(t, &answer);
    }
    // the datagrams come out in the order they were sent, to the right MACs
    let mut order = Vec::new();
    while let Some(f) = host.poll_transmit(t) {
        let fr = Frame::new_checked(&f[..]).unwrap();
        let p = ipv4::Packet::new_checked(fr.payload()).unwrap();
        assert_eq!(fr.dst(), mac(p.dst().octets()[3]));
        assert_eq!(p.dscp(), 26);
        order.push(p.dst().octets()[3]);
    }
    assert_eq!(order, [2, 3, 4, 2]);
    let s = host.arp().stats;
    assert_eq!((s.misses, s.requests, s.evictions), (4, 3, 1));
    assert_eq!(
        (2..=4)
            .filter(|&n| host.arp().peek(ip(n), t).is_some())
            .count(),
        2
    );
}

#[test]
fn unanswered_arp_drops_what_waited_and_says_so() {
    let mut t = Instant::now();
    let mut host = iface(1, |_| {});
    let to = UdpTx {
        dst: SocketAddrV4::new(ip(9), 4791),
        src_port: 1,
        dscp: 0,
        pcp: 0,
    };
    host.send_udp(t, to, b"x").unwrap();
    let mut requests = 0;
    for _ in 0..10 {
        while host.poll_transmit(t).is_some() {
            requests += 1;
        }
        match host.poll_timeout() {
            Some(next) => t = next,
            None => break,
        }
        host.handle_timeout(t);
    }
    assert_eq!(requests, 3);
    assert_eq!(host.stats.unresolved_drops, 1);
}

#[test]
fn vlan_and_fcs() {
    let t = Instant::now();
    let tagged = |c: &mut IfaceConfig| {
        c.vlan = Some(100);
        c.fcs = true;
    };
    let mut a = iface(1, tagged);
    let mut b = iface(2, tagged);
    let mut other = iface(3, |c| {
        c.ip = ip(2); // same address, other VLAN
        c.vlan = Some(200);
        c.fcs = true;
    });
    let to = UdpTx {
        dst: SocketAddrV4::new(ip(2), 4791),
        src_port: 7,
        dscp: 0,
        pcp: 5,
    };
    a.send_udp(t, to, b"tagged").unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(pump(t, &mut a, &mut [&mut b, &mut other]));
        pump(t, &mut b, &mut [&mut a]);
    }
    assert_eq!(got, [b"tagged".to_vec()]);
    assert_eq!(other.stats.udp_rx, 0);
    assert!(other.stats.not_ours > 0);
    // the data frame carried PCP 5 on VLAN 100; a flipped bit fails the FCS
    a.send_udp(t, to, b"again").unwrap();
    let mut f = a.poll_transmit(t).unwrap();
    let tag = Frame::new_checked(&f[..f.len() - 4])
        .unwrap()
        .vlan()
        .unwrap();
    assert_eq!((tag.vid, tag.pcp), (100, 5));
    f[30] ^= 0x80;
    assert!(b.handle_frame(t, &f).is_none());
    assert_eq!(b.stats.bad_fcs, 1);
}

/// A sender with classes 1 and 3 and a receiver that drains class 3 at a tenth of the
/// rate, pause frames travelling back over the same link delay: class 3 loses nothing
/// and class 1 keeps flowing while class 3 is paused.
#[test]
fn a_pause_keeps_one_class_lossless_while_another_goes_on() {
    let t0 = Instant::now();
    let link_bps = 10_000_000_000u64;
    let slot = Duration::from_nanos(1_200); // one 1500-byte frame at 10 Gbit/s
    let delay_slots = 20usize;
    let mut tx: PfcTx<(u8, u32)> = PfcTx::new(1 << 20, link_bps);
    // queue 64; pause at 24 (40 left for the round trip of 2 × 20 frames), resume at 4
    let mut rx: PfcRx<(u8, u32)> = PfcRx::new(64, 24, 4, 0xFFFF, link_bps);
    for i in 0..2_000 {
        tx.push(1, (1, i)).unwrap();
        tx.push(3, (3, i)).unwrap();
    }
    let mut wire: VecDeque<Option<(u8, (u8, u32))>> = (0..delay_slots).map(|_| None).collect();
    let mut back: VecDeque<Vec<rocelink_wire::pfc::Repr>> =
        (0..delay_slots).map(|_| Vec::new()).collect();
    let mut delivered = [Vec::new(), Vec::new()];
    let mut class1_while_paused = 0u64;
    for step in 0..200_000u64 {
        let now = t0 + slot * step as u32;
        for f in back.pop_front().unwrap() {
            tx.handle_pause(now, &f);
        }
        let paused3 = tx.is_paused(3, now);
        wire.push_back(tx.poll(now));
        if let Some((class, item)) = wire.pop_front().unwrap() {
            rx.push(now, class, item)
                .unwrap_or_else(|_| panic!("class {class} dropped"));
        }
        if let Some(x) = rx.pop(1) {
            delivered[0].push(x.1);
            if paused3 {
                class1_while_paused += 1;
            }
        }
        if step % 10 == 0
            && let Some(x) = rx.pop(3)
        {
            delivered[1].push(x.1);
        }
        let mut frames = Vec::new();
        while let Some(f) = rx.poll_pause(now) {
            frames.push(f);
        }
        back.push_back(frames);
        if tx.is_empty() && rx.is_empty() && wire.iter().all(Option::is_none) {
            break;
        }
    }
    let all: Vec<u32> = (0..2_000).collect();
    assert_eq!(delivered[0], all, "class 1: every packet, in order");
    assert_eq!(delivered[1], all, "class 3: every packet, in order");
    assert_eq!(rx.stats[3].dropped, 0);
    assert!(rx.stats[3].pauses > 0 && tx.stats[3].pauses > 0);
    assert_eq!(rx.stats[1].pauses, 0, "the fast class was never paused");
    assert!(
        class1_while_paused > 500,
        "class 1 went on during class 3's pauses: {class1_while_paused}"
    );
    // without the pause, the slow class would have overflowed its 64-packet queue
    assert!(pause_time(0xFFFF, link_bps) > slot * 64);
}

#[test]
fn frames_written_in_place_match_the_queued_ones_and_wait_their_turn() {
    let t = Instant::now();
    let mut a = iface(1, |_| {});
    let mut b = iface(2, |_| {});
    let to = UdpTx {
        dst: SocketAddrV4::new(ip(2), 4791),
        src_port: 5000,
        dscp: 26,
        pcp: 0,
    };
    let mut buf = [0u8; 256];
    // unresolved: not in place; the queued datagram resolves first
    assert_eq!(a.emit_udp(t, to, &[b"head", b"body"], &mut buf), Ok(None));
    assert_eq!(a.send_udp(t, to, b"headbody"), Ok(Sent::Held));
    pump(t, &mut a, &mut [&mut b]); // the ARP request, answered
    pump(t, &mut b, &mut [&mut a]);
    // the held frame is queued ahead: still not in place, so order holds
    assert_eq!(a.emit_udp(t, to, &[b"x"], &mut buf), Ok(None));
    let queued = a.poll_transmit(t).unwrap();
    assert!(a.poll_transmit(t).is_none());
    // now in place, byte for byte what the queue made
    let n = a
        .emit_udp(t, to, &[b"he", b"adb", b"ody"], &mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..n], &queued[..]);
    match b.handle_frame(t, &buf[..n]) {
        Some(Rx::Udp(u)) => {
            assert_eq!(
                (u.src, u.dst_port, u.dscp),
                (SocketAddrV4::new(ip(1), 5000), 4791, 26)
            );
            assert_eq!(u.payload, b"headbody");
        }
        other => panic!("{other:?}"),
    }
    // too small a buffer: not written
    assert_eq!(a.emit_udp(t, to, &[&[0u8; 300]], &mut buf), Ok(None));
}

#[test]
fn a_host_port_learns_neighbours_from_their_ip_packets() {
    let t = Instant::now();
    let mut host = iface(1, |c| c.learn_from_ip = true);
    let mut plain = iface(3, |_| {});
    let mut dev = iface(2, |_| {});
    // the device knows the host (say, from the kernel's ARP) and sends it a datagram
    for peer in [&mut host, &mut plain] {
        let me = peer.config().ip;
        let mut d = iface(2, |_| {});
        let mut req = vec![0u8; 60];
        rocelink_wire::ethernet::Repr {
            dst: Mac::BROADCAST,
            src: peer.config().mac,
            vlan: None,
            ethertype: ethertype::ARP,
        }
        .emit(&mut req);
        arp::Repr {
            operation: arp::Operation::Request,
            sha: peer.config().mac,
            spa: me,
            tha: Mac([0; 6]),
            tpa: ip(2),
        }
        .emit(&mut req[14..]);
        d.handle_frame(t, &req);
        d.poll_transmit(t).unwrap(); // its ARP reply, never delivered
        let to = UdpTx {
            dst: SocketAddrV4::new(me, 4791),
            src_port: 4791,
            dscp: 0,
            pcp: 0,
        };
        assert_eq!(d.send_udp(t, to, b"data"), Ok(Sent::Queued));
        let f = d.poll_transmit(t).unwrap();
        assert!(matches!(peer.handle_frame(t, &f), Some(Rx::Udp(_))));
        dev = d;
    }
    let back = UdpTx {
        dst: SocketAddrV4::new(ip(2), 4791),
        src_port: 4791,
        dscp: 0,
        pcp: 0,
    };
    // the learning port answers at once; the other has to ask
    assert_eq!(host.send_udp(t, back, b"ack"), Ok(Sent::Queued));
    assert_eq!(plain.send_udp(t, back, b"ack"), Ok(Sent::Held));
    let f = host.poll_transmit(t).unwrap();
    assert_eq!(&f[..6], &mac(2).0);
    assert!(matches!(dev.handle_frame(t, &f), Some(Rx::Udp(_))));
}
