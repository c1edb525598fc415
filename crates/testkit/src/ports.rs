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

/// `n` loopback addresses (127.a.b.c, spread at random) on which UDP port 4791 — RoCE v2's
/// — is free, for tests that run RoCE endpoints side by side with whatever else holds
/// 127.0.0.1:4791.
pub fn free_roce_ips(n: usize) -> Vec<IpAddr> {
    let mut r = crate::Rng::new(
        u64::from(std::process::id()) << 32
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
    );
    let mut out: Vec<IpAddr> = Vec::new();
    for _ in 0..1000 {
        if out.len() == n {
            break;
        }
        let v = r.next_u64();
        let ip = IpAddr::from([
            127,
            (v >> 8) as u8 | 1,
            (v >> 16) as u8,
            (v >> 24) as u8 | 2,
        ]);
        if !out.contains(&ip) && UdpSocket::bind(SocketAddr::new(ip, 4791)).is_ok() {
            out.push(ip);
        }
    }
    assert_eq!(out.len(), n, "no {n} loopback addresses with UDP 4791 free");
    out
}

/// A TCP port free on every address (bound on 0.0.0.0, then released).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free TCP port")
}

/// Wait until something listens on TCP `port` (on any address), as `/proc/net/tcp{,6}`
/// shows, without connecting to it (a one-shot server would take the probe for its
/// client); false after `timeout`.
pub fn wait_tcp_listening(port: u16, timeout: std::time::Duration) -> bool {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if rocelink_io::ports::tcp_listening(port) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_port_free_on_two_addresses() {
        let p = super::free_udp_port(&["127.0.0.1", "127.0.0.2"]);
        assert!(p > 0);
        std::net::UdpSocket::bind(("127.0.0.2", p)).unwrap();
    }

    #[test]
    fn roce_addresses_are_free_and_a_listener_is_seen() {
        let ips = super::free_roce_ips(3);
        assert_eq!(ips.len(), 3);
        for ip in &ips {
            assert!(ip.is_loopback());
            std::net::UdpSocket::bind((*ip, 4791)).unwrap();
        }
        let p = super::free_tcp_port();
        assert!(!super::wait_tcp_listening(
            p,
            std::time::Duration::from_millis(30)
        ));
        let _l = std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
        assert!(super::wait_tcp_listening(
            p,
            std::time::Duration::from_secs(2)
        ));
    }
}
