//! Who uses a port in this network namespace: a TCP listener, the process holding a UDP
//! port.

use std::net::IpAddr;

/// Whether something in this network namespace listens on TCP `port` (any address), as
/// `/proc/net/tcp` and `tcp6` show — looked at without connecting, which a one-shot server
/// would take for its client.
pub fn tcp_listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            // local_address is the 2nd column, st (0A: LISTEN) the 4th
            t.lines().skip(1).any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.len() > 3 && c[1].ends_with(&want) && c[3] == "0A"
            })
        })
    })
}

/// Who holds UDP port `addr` in this network namespace: "PID (COMMAND)" of a process with
/// a socket bound to it (or to the wildcard address at its port), read from
/// `/proc/net/udp[6]` and the processes' descriptors this process may read. `None` when
/// it cannot be told.
pub fn udp_port_holder(addr: std::net::SocketAddr) -> Option<String> {
    let inode = udp_socket_inode(addr)?;
    let want = format!("socket:[{inode}]");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()));
        if holds {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            return Some(format!("process {pid} ({})", comm.trim()));
        }
    }
    None
}

/// The inode of a UDP socket bound to `addr` or to the wildcard at its port.
fn udp_socket_inode(addr: std::net::SocketAddr) -> Option<u64> {
    let (table, want_ip) = match addr.ip() {
        IpAddr::V4(v4) => (
            "/proc/net/udp",
            format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        ),
        IpAddr::V6(v6) => {
            let hex: String = v6
                .octets()
                .chunks(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            ("/proc/net/udp6", hex)
        }
    };
    let any = "0".repeat(want_ip.len());
    let text = std::fs::read_to_string(table).ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (ip, port) = f.get(1)?.split_once(':')?;
        let port = u16::from_str_radix(port, 16).ok()?;
        (port == addr.port() && (ip == want_ip || ip == any)).then(|| f.get(9)?.parse().ok())?
    })
}

#[cfg(test)]
mod holder_tests {
    use super::*;

    #[test]
    fn the_holder_of_a_udp_port_is_named() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = s.local_addr().unwrap();
        let who = udp_port_holder(at).unwrap();
        assert!(who.contains(&std::process::id().to_string()), "{who}");
        drop(s);
        assert_eq!(udp_port_holder(at), None);
    }
}
