//! The device's sockets: kernel UDP sockets on an address of this host, or UDP ports of an
//! AF_XDP port the device owns (`rocelink emulate --xdp`: its own ARP, ICMP and IPv4, the
//! address not configured on the interface).

use rocelink_io::backend::Backend;
use rocelink_io::udp::{UdpConfig, UdpSocket as RoceSocket};
use rocelink_runtime::xdp::{XdpPort, XdpSocket};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// A datagram socket of the device's control plane.
pub(super) enum Dgram {
    /// A kernel socket (non-blocking).
    Kernel(UdpSocket),
    /// A port of the device's AF_XDP port.
    Xdp(XdpSocket),
}

impl Dgram {
    /// The next datagram, or `WouldBlock`.
    pub(super) fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        match self {
            Dgram::Kernel(s) => s.recv_from(buf),
            Dgram::Xdp(s) => s
                .recv_from(buf)?
                .ok_or_else(|| io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Send one datagram.
    pub(super) fn send_to(&self, b: &[u8], dst: SocketAddr) -> io::Result<usize> {
        match self {
            Dgram::Kernel(s) => s.send_to(b, dst),
            Dgram::Xdp(s) => match s.send_to(b, dst)? {
                true => Ok(b.len()),
                false => Err(io::ErrorKind::WouldBlock.into()),
            },
        }
    }

    /// Its address.
    pub(super) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Dgram::Kernel(s) => s.local_addr(),
            Dgram::Xdp(s) => Ok(Backend::local_addr(s)),
        }
    }

    fn fd(&self) -> Option<RawFd> {
        match self {
            Dgram::Kernel(s) => Some(s.as_raw_fd()),
            Dgram::Xdp(_) => None,
        }
    }
}

/// Every socket of the device.
pub(super) struct Sockets {
    pub control: Dgram,
    pub bootp: Dgram,
    pub events: Dgram,
    pub data: Box<dyn Backend + Send>,
    /// The device's RoCE port, for sensor TX (`None`: not listening).
    pub stx: Option<Dgram>,
    /// The AF_XDP port they are on, if any.
    pub xdp: Option<XdpPort>,
}

/// `e` with the address or file it is about in front.
pub(super) fn named(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The data socket, bound to the source port the host programmed.
pub(super) fn bind_data(
    xdp: Option<&XdpPort>,
    ip: IpAddr,
    port: u16,
) -> io::Result<Box<dyn Backend + Send>> {
    if let Some(x) = xdp {
        return Ok(Box::new(x.socket(port)));
    }
    let s = RoceSocket::bind(
        SocketAddr::new(ip, port),
        &UdpConfig {
            recv_buffer: 1 << 16,
            send_buffer: 8 << 20,
            gro: false,
        },
    )
    .map_err(|e| named(e, &format!("{ip}:{port}")))?;
    Ok(Box::new(s))
}

/// Bind every socket at `ip` (kernel sockets), or open them on `xdp`.
pub(super) fn bind(
    xdp: Option<&XdpPort>,
    ip: IpAddr,
    control_port: u16,
    stx_port: Option<u16>,
    data_port: u16,
    notes: &rocelink_runtime::Notes,
) -> io::Result<Sockets> {
    if let Some(x) = xdp {
        return Ok(Sockets {
            control: Dgram::Xdp(x.socket(control_port)),
            bootp: Dgram::Xdp(x.socket(rocelink_wire::hsb::BOOTP_DEVICE_PORT)),
            events: Dgram::Xdp(x.socket(rocelink_wire::hsb::EVENT_SOURCE_PORT)),
            data: bind_data(xdp, ip, data_port)?,
            stx: stx_port.map(|p| Dgram::Xdp(x.socket(p))),
            xdp: Some(x.clone()),
        });
    }
    let udp =
        |port: u16| UdpSocket::bind((ip, port)).map_err(|e| named(e, &format!("{ip}:{port}")));
    let control = udp(control_port)?;
    control.set_nonblocking(true)?;
    let bootp = udp(rocelink_wire::hsb::BOOTP_DEVICE_PORT)?;
    bootp.set_nonblocking(true)?;
    bootp.set_broadcast(true)?;
    let data = bind_data(None, ip, data_port)?;
    let events = udp(rocelink_wire::hsb::EVENT_SOURCE_PORT)?;
    events.set_broadcast(true)?;
    // a host process bound to the wildcard address may hold the port: the device then
    // runs without sensor TX rather than not at all
    let stx = match stx_port.map(udp) {
        Some(Ok(s)) => {
            s.set_nonblocking(true)?;
            Some(Dgram::Kernel(s))
        }
        Some(Err(e)) => {
            notes.say(&format!("no sensor TX: {e}"));
            None
        }
        None => None,
    };
    Ok(Sockets {
        control: Dgram::Kernel(control),
        bootp: Dgram::Kernel(bootp),
        events: Dgram::Kernel(events),
        data,
        stx,
        xdp: None,
    })
}

impl Sockets {
    /// Sleep until a control-plane socket has something or `timeout` passes.
    pub(super) fn wait(&self, timeout: Duration) -> io::Result<()> {
        if let Some(x) = &self.xdp {
            x.wait_readable(Some(timeout))?;
            return Ok(());
        }
        let fds: Vec<RawFd> = [Some(&self.control), Some(&self.bootp), self.stx.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(Dgram::fd)
            .collect();
        rocelink_io::udp::wait_readable_any(&fds, Some(timeout))?;
        Ok(())
    }
}
