//! The RoCE socket of a role: bound where asked, with the rdma-core habit of running both
//! ends on one host's loopback, and an error that names the address and who holds it.

use rocelink_io::udp::{UdpConfig, UdpSocket};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The RoCE socket at `ip:port`. On one host the rdma-core idiom runs both ends on the
/// loopback address; when its port is taken by the other end and no address was asked for
/// (`chosen` false), the next free 127/8 address is used (the peer learns it from the GID
/// or the protocol's own exchange). Errors name the address, and for a taken port the
/// process that holds it where it can be told.
pub fn bind_roce(ip: IpAddr, port: u16, chosen: bool) -> io::Result<(UdpSocket, IpAddr)> {
    let e = match UdpSocket::bind(SocketAddr::new(ip, port), &UdpConfig::default()) {
        Ok(s) => return Ok((s, ip)),
        Err(e) => e,
    };
    let named = |what: String| {
        let holder = (e.kind() == io::ErrorKind::AddrInUse)
            .then(|| rocelink_io::net::udp_port_holder(SocketAddr::new(ip, port)))
            .flatten()
            .map(|h| format!(" (held by {h})"))
            .unwrap_or_default();
        io::Error::new(e.kind(), format!("{what}: {e}{holder}"))
    };
    if chosen || !ip.is_loopback() || e.kind() != io::ErrorKind::AddrInUse {
        return Err(named(format!("cannot bind RoCE UDP socket {ip}:{port}")));
    }
    for k in 2..=254u8 {
        let alt = IpAddr::V4(Ipv4Addr::new(127, 0, 0, k));
        if alt == ip {
            continue;
        }
        if let Ok(s) = UdpSocket::bind(SocketAddr::new(alt, port), &UdpConfig::default()) {
            return Ok((s, alt));
        }
    }
    Err(named(format!(
        "cannot bind RoCE UDP socket {ip}:{port}, nor port {port} on 127.0.0.2..254"
    )))
}
