//! Link, network and transport headers: Ethernet/VLAN, ARP, IPv4, IPv6, UDP, ICMP, PFC.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_wire::{arp, ethernet, icmpv4, ipv4, ipv6, pfc, udp};

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = ethernet::Frame::new_checked(data) {
        let _ = (ethernet::Repr::parse(&f), f.payload());
    }
    if let Ok(p) = arp::Packet::new_checked(data) {
        let _ = arp::Repr::parse(&p);
    }
    if let Ok(p) = ipv4::Packet::new_checked(data) {
        let _ = (ipv4::Repr::parse(&p), p.payload(), p.header());
    }
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let _ = (ipv6::Repr::parse(&p), p.payload());
    }
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = (udp::Repr::parse(&p), p.payload());
    }
    if let Ok(p) = icmpv4::Packet::new_checked(data) {
        let _ = (icmpv4::EchoRepr::parse(&p), p.data());
    }
    if let Ok(p) = pfc::Packet::new_checked(data) {
        let _ = pfc::Repr::parse(&p);
    }
});
