//! BOOTP enumeration (devices broadcast from 12268 to 12267) and IP assignment.

use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::bootp::{self, EnumerationRepr, SetIpRepr};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// A device heard on the enumeration port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Where the announcement came from (HSB hosts take the device IP from here).
    pub peer: SocketAddr,
    /// What the device announced.
    pub repr: EnumerationRepr,
    /// The raw 300 bytes (a set-IP reply copies fields from them).
    pub raw: Vec<u8>,
}

impl Found {
    /// The device IP (the announcement's source address).
    pub fn ip(&self) -> IpAddr {
        self.peer.ip()
    }
    /// Board name for known UUIDs.
    pub fn board(&self) -> &'static str {
        match self.repr.vendor.uuid_string().as_str() {
            "889b7ce3-65a5-4247-8b05-4ff1904c3359" => "hololink-lite",
            "16af139b-9d14-482f-9805-3feb72ae0cec" => "hsb-emulator",
            u if u.starts_with("ed6a9292") => "microchip-polarfire",
            u if u.starts_with("f1627640") => "leopard-eagle",
            u if u.starts_with("9957a9ac") => "taurotech-da326",
            _ => "unknown",
        }
    }
}

/// Open the enumeration listener on `bind` (normally 0.0.0.0:12267), shareable with other
/// listeners (SO_REUSEADDR/SO_REUSEPORT, as HSB's host does).
pub fn listener(bind: SocketAddr) -> io::Result<UdpSocket> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        None,
    )?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_broadcast(true)?;
    s.bind(&bind.into())?;
    Ok(s.into())
}

/// Listen for `duration` (or until `max` devices were heard) and return each device once
/// (by MAC; the latest announcement wins). Garbage on the port is ignored.
pub fn listen(sock: &UdpSocket, duration: Duration, max: Option<usize>) -> io::Result<Vec<Found>> {
    let end = Instant::now() + duration;
    let mut found: Vec<Found> = Vec::new();
    let mut buf = [0u8; 2048];
    while Instant::now() < end && max.is_none_or(|m| found.len() < m) {
        let Some((n, peer)) = super::recv_until(sock, end, &mut buf)? else {
            break;
        };
        let Ok(p) = bootp::Packet::new_checked(&buf[..n]) else {
            continue;
        };
        let Ok(repr) = EnumerationRepr::parse(&p) else {
            continue;
        };
        let f = Found {
            peer,
            repr,
            raw: buf[..n].to_vec(),
        };
        match found.iter_mut().find(|x| x.repr.mac == repr.mac) {
            Some(x) => *x = f,
            None => found.push(f),
        }
    }
    Ok(found)
}

/// Assign `new_ip` to the device with `mac`: wait (up to `timeout`) for its enumeration,
/// send the BOOTP reply (yiaddr = new IP, siaddr = `host_ip`) to its current address, and
/// wait until it announces itself from the new address.
pub fn set_ip(
    sock: &UdpSocket,
    mac: Mac,
    new_ip: Ipv4Addr,
    host_ip: Ipv4Addr,
    timeout: Duration,
) -> io::Result<Found> {
    let end = Instant::now() + timeout;
    let mut sent = false;
    while Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        for f in listen(sock, left.min(Duration::from_millis(1500)), None)? {
            if f.repr.mac != mac {
                continue;
            }
            if f.ip() == IpAddr::V4(new_ip) && f.repr.ciaddr == Some(new_ip) {
                return Ok(f);
            }
            let p = bootp::Packet::new_checked(&f.raw[..])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let mut reply = [0u8; bootp::PACKET_LEN];
            SetIpRepr::answering(&p, new_ip, host_ip).emit(&mut reply);
            sock.send_to(
                &reply,
                SocketAddr::new(f.ip(), rocelink_wire::hsb::BOOTP_DEVICE_PORT),
            )?;
            sent = true;
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        if sent {
            format!("device {mac} did not come back as {new_ip}")
        } else {
            format!("no enumeration from {mac}")
        },
    ))
}
