//! The part of the ICRC that covers the IP and UDP headers, kept per flow: for a datagram
//! sent or received through a UDP socket those headers are what the kernel builds, the
//! same for every packet of a flow and length (a WRITE's middle packets, a READ's
//! responses), so their CRC state is computed once and cloned.

use rocelink_wire::{icrc, udp};
use std::net::{IpAddr, SocketAddr};

/// Flows whose IP+UDP ICRC prefix is kept (most recently used first).
const PREFIXES: usize = 4;

/// The kept ICRC prefixes: (source, destination, IB length) → hash of the IP and UDP
/// headers as a UDP socket's kernel builds them. Found where they are (a ping-pong
/// alternates between its flows, so keeping them in recency order moved entries on every
/// lookup); a new one replaces the oldest kept.
#[derive(Debug, Default)]
pub(crate) struct PrefixCache {
    kept: Vec<(SocketAddr, SocketAddr, usize, icrc::IcrcHasher)>,
    /// The entry the next new prefix replaces, once all are taken.
    next: usize,
}

impl PrefixCache {
    /// The IP+UDP ICRC prefix of a socket flow from `src` to `dst` carrying `ib_len` bytes
    /// (BTH … ICRC), from the cache or computed and kept. `None` for mixed families.
    pub(crate) fn get(
        &mut self,
        src: &SocketAddr,
        dst: &SocketAddr,
        ib_len: usize,
    ) -> Option<icrc::IcrcHasher> {
        // compared where they are (by reference): copying the addresses out first stalled on
        // store forwarding in the per-packet profile
        if let Some(e) = self
            .kept
            .iter()
            .find(|(s, t, n, _)| *n == ib_len && s == src && t == dst)
        {
            return Some(e.3.clone());
        }
        let mut synth = [0u8; 40];
        let udp_len = udp::HEADER_LEN + ib_len;
        let ip = net_header(None, *src, *dst, udp_len, &mut synth)?;
        let u = icrc::socket_udp_header(*src, *dst, ib_len).ok()?;
        let h = icrc::IcrcHasher::prefix(ip, &u).ok()?;
        let e = (*src, *dst, ib_len, h.clone());
        if self.kept.len() < PREFIXES {
            self.kept.push(e);
        } else {
            self.kept[self.next] = e;
            self.next = (self.next + 1) % PREFIXES;
        }
        Some(h)
    }
}

/// The IP header the ICRC covers: as received, or rebuilt as a UDP socket's kernel built it
/// (IPv4: ID 0, DF) into `synth`. `None` for mixed address families.
pub(crate) fn net_header<'a>(
    received: Option<&'a [u8]>,
    src: SocketAddr,
    dst: SocketAddr,
    udp_len: usize,
    synth: &'a mut [u8; 40],
) -> Option<&'a [u8]> {
    if let Some(h) = received {
        return Some(h);
    }
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(t)) => {
            synth[..20].copy_from_slice(&icrc::socket_ipv4_header(s, t, udp_len));
            Some(&synth[..20])
        }
        (IpAddr::V6(s), IpAddr::V6(t)) => {
            *synth = icrc::socket_ipv6_header(s, t, udp_len);
            Some(&synth[..])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix as computed afresh, never from a cache.
    fn fresh(src: &SocketAddr, dst: &SocketAddr, ib_len: usize) -> u32 {
        PrefixCache::default()
            .get(src, dst, ib_len)
            .unwrap()
            .finalize()
    }

    #[test]
    fn every_flow_gets_its_own_prefix_however_many_take_turns() {
        let mut c = PrefixCache::default();
        let a: SocketAddr = "10.0.0.1:4791".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();
        let c6: SocketAddr = "[fd00::1]:4791".parse().unwrap();
        // more flows than are kept, in turns and then in reverse, twice over
        let flows: Vec<(SocketAddr, SocketAddr, usize)> = (0..PREFIXES + 2)
            .map(|i| {
                if i % 2 == 0 {
                    (a, b, 20 + 4 * i)
                } else {
                    (b, a, 20 + 4 * i)
                }
            })
            .collect();
        let order: Vec<_> = flows.iter().chain(flows.iter().rev()).collect();
        for _ in 0..2 {
            for &&(s, t, n) in &order {
                assert_eq!(c.get(&s, &t, n).unwrap().finalize(), fresh(&s, &t, n));
                assert!(c.kept.len() <= PREFIXES);
            }
        }
        // the IP header is part of the prefix: the reverse flow's differs
        assert_ne!(fresh(&a, &b, 36), fresh(&b, &a, 36));
        // mixed families have none
        assert!(c.get(&a, &c6, 36).is_none());
    }
}
