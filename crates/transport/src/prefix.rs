//! The part of the ICRC that covers the IP and UDP headers, kept per flow: for a datagram
//! sent or received through a UDP socket those headers are what the kernel builds, the
//! same for every packet of a flow and length (a WRITE's middle packets, a READ's
//! responses), so their CRC state is computed once and cloned.

use rocelink_wire::{icrc, udp};
use std::net::{IpAddr, SocketAddr};

/// Flows whose IP+UDP ICRC prefix is kept (most recently used first).
const PREFIXES: usize = 4;

/// The kept ICRC prefixes: (source, destination, IB length) → hash of the IP and UDP
/// headers as a UDP socket's kernel builds them.
#[derive(Debug, Default)]
pub(crate) struct PrefixCache(Vec<(SocketAddr, SocketAddr, usize, icrc::IcrcHasher)>);

impl PrefixCache {
    /// The IP+UDP ICRC prefix of a socket flow from `src` to `dst` carrying `ib_len` bytes
    /// (BTH … ICRC), from the cache or computed and kept. `None` for mixed families.
    pub(crate) fn get(
        &mut self,
        src: &SocketAddr,
        dst: &SocketAddr,
        ib_len: usize,
    ) -> Option<icrc::IcrcHasher> {
        let cache = &mut self.0;
        // compared where they are (by reference): copying the addresses out first stalled on
        // store forwarding in the per-packet profile
        if let Some(i) = cache
            .iter()
            .position(|(s, t, n, _)| *n == ib_len && s == src && t == dst)
        {
            if i > 0 {
                cache[..=i].rotate_right(1);
            }
            return Some(cache[0].3.clone());
        }
        let mut synth = [0u8; 40];
        let udp_len = udp::HEADER_LEN + ib_len;
        let ip = net_header(None, *src, *dst, udp_len, &mut synth)?;
        let u = icrc::socket_udp_header(*src, *dst, ib_len).ok()?;
        let h = icrc::IcrcHasher::prefix(ip, &u).ok()?;
        if cache.len() == PREFIXES {
            cache.pop();
        }
        cache.insert(0, (*src, *dst, ib_len, h.clone()));
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
