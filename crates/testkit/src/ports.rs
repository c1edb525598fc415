//! Free ports for tests: a test never assumes a well-known port (4791, 8192, …) is free,
//! since another program on the machine may hold it.

use std::net::{IpAddr, SocketAddr, UdpSocket};

/// A UDP port free on every address in `ips` at once (bound on all of them, then
/// released). Another process could take it before the test binds it; the kernel's
/// ephemeral range makes that unlikely.
pub fn free_udp_port(ips: &[&str]) -> u16 {
    for _ in 0..100 {
        let Some(first) = ips.first() else {
            return 0;
        };
        let ip: IpAddr = first.parse().expect("an IP address");
        let Ok(s) = UdpSocket::bind(SocketAddr::new(ip, 0)) else {
            continue;
        };
        let Ok(port) = s.local_addr().map(|a| a.port()) else {
            continue;
        };
        let rest: Vec<_> = ips[1..]
            .iter()
            .map(|i| UdpSocket::bind(SocketAddr::new(i.parse().expect("an IP address"), port)))
            .collect();
        if rest.iter().all(Result::is_ok) {
            return port;
        }
    }
    panic!("no UDP port free on all of {ips:?}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_port_free_on_two_addresses() {
        let p = super::free_udp_port(&["127.0.0.1", "127.0.0.2"]);
        assert!(p > 0);
        std::net::UdpSocket::bind(("127.0.0.2", p)).unwrap();
    }
}
