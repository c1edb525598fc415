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
    let e = match UdpSocket::bind(SocketAddr::new(ip, port), &roce_config()) {
        Ok(s) => return Ok((s, ip)),
        Err(e) => e,
    };
    let named = |what: String| {
        let holder = (e.kind() == io::ErrorKind::AddrInUse)
            .then(|| rocelink_io::ports::udp_port_holder(SocketAddr::new(ip, port)))
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
        if let Ok(s) = UdpSocket::bind(SocketAddr::new(alt, port), &roce_config()) {
            return Ok((s, alt));
        }
    }
    Err(named(format!(
        "cannot bind RoCE UDP socket {ip}:{port}, nor port {port} on 127.0.0.2..254"
    )))
}

/// The socket options of a RoCE socket: `UDP_GRO`, so a segmented run arrives as one
/// message (the kernel does not split it again) and is split in place by the receiver.
pub fn roce_config() -> UdpConfig {
    UdpConfig {
        gro: true,
        ..UdpConfig::default()
    }
}

/// How a role reaches the network.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum BackendChoice {
    /// A UDP socket: the kernel's stack.
    #[default]
    Socket,
    /// An AF_XDP port on this interface: the role owns its address there (ARP, ICMP
    /// echo), IPv4 only.
    Xdp {
        /// The interface.
        ifname: String,
        /// Priority flow control on the port (`None`: off).
        #[serde(default)]
        pfc: Option<crate::xdp::PfcConfig>,
    },
}

/// A role's RoCE backend, opened.
pub struct RoceBackend {
    /// What datagrams go through.
    pub backend: Box<dyn rocelink_io::backend::Backend + Send>,
    /// The address it is at (a loopback address may have moved, as [`bind_roce`] says).
    pub ip: IpAddr,
    /// The AF_XDP port, kept for its counters.
    pub xdp: Option<crate::xdp::XdpPort>,
    /// What the socket's setup noticed (buffers capped, …).
    pub notes: Vec<String>,
}

impl std::fmt::Debug for RoceBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoceBackend")
            .field("ip", &self.ip)
            .field("xdp", &self.xdp.is_some())
            .finish_non_exhaustive()
    }
}

impl BackendChoice {
    /// AF_XDP on `ifname` when one is named, else a socket.
    pub fn xdp_or_socket(ifname: Option<&str>) -> BackendChoice {
        match ifname {
            Some(i) => BackendChoice::Xdp {
                ifname: i.to_owned(),
                pfc: None,
            },
            None => BackendChoice::Socket,
        }
    }

    /// The same, with priority flow control `pfc` on an AF_XDP port (a socket has none).
    pub fn with_pfc(self, pfc: Option<crate::xdp::PfcConfig>) -> BackendChoice {
        match self {
            BackendChoice::Xdp { ifname, .. } => BackendChoice::Xdp { ifname, pfc },
            other => other,
        }
    }

    /// The backend at `ip:port`: a socket bound as [`bind_roce`] binds it, or an AF_XDP
    /// port on the interface holding `port` for the host. Errors name the address or the
    /// interface.
    pub fn open(&self, ip: IpAddr, port: u16, chosen: bool) -> io::Result<RoceBackend> {
        match self {
            BackendChoice::Socket => {
                let (sock, ip) = bind_roce(ip, port, chosen)?;
                let notes = sock.notes.clone();
                Ok(RoceBackend {
                    backend: Box::new(sock),
                    ip,
                    xdp: None,
                    notes,
                })
            }
            BackendChoice::Xdp { ifname, pfc } => {
                use crate::xdp::{XdpPort, XdpPortConfig, XdpRole};
                let IpAddr::V4(v4) = ip else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("AF_XDP on {ifname}: IPv4 only, not {ip}"),
                    ));
                };
                let mut x = XdpPortConfig::new(ifname, v4, XdpRole::Host);
                x.host_ports = (port, port);
                x.pfc = *pfc;
                let named =
                    |e: io::Error| io::Error::new(e.kind(), format!("AF_XDP on {ifname}: {e}"));
                let xdp = XdpPort::open(&x).map_err(named)?;
                Ok(RoceBackend {
                    backend: Box::new(xdp.socket(port)),
                    ip,
                    xdp: Some(xdp),
                    notes: Vec::new(),
                })
            }
        }
    }
}
