//! Where the device's Camera-over-Ethernet frames leave: the AF_XDP port it owns
//! (`emulate --xdp`), or an AF_PACKET socket on an interface (`emulate --coe-iface`, as
//! HSB's emulator sends them). Raw Ethernet to the host MAC the host programmed, paced.

use rocelink_io::packet::PacketSocket;
use rocelink_runtime::xdp::XdpPort;
use rocelink_wire::bytes::Mac;
use rocelink_wire::ethernet::ethertype;
use std::io;
use std::time::{Duration, Instant};

/// A raw Ethernet sender.
pub(super) enum RawLink {
    /// The device's AF_XDP port (its stack adds the header, and the VLAN tag if set).
    Xdp(XdpPort),
    /// An AF_PACKET socket and the MAC the frames come from.
    Packet(PacketSocket, Mac),
}

/// How long a frame may wait for room in the socket before it counts as lost.
const ROOM_WAIT: Duration = Duration::from_millis(200);

impl RawLink {
    /// The sender the configuration asks for: the AF_XDP port, else a socket on
    /// `coe_iface`, else none. Errors name the interface.
    pub(super) fn open(
        xdp: Option<&XdpPort>,
        coe_iface: Option<&str>,
    ) -> io::Result<Option<RawLink>> {
        if let Some(x) = xdp {
            return Ok(Some(RawLink::Xdp(x.clone())));
        }
        let Some(ifname) = coe_iface else {
            return Ok(None);
        };
        let mac = rocelink_io::xdp::iface_mac(ifname)?;
        let sock = PacketSocket::open(ifname, ethertype::IEEE1722, 1 << 20)?;
        Ok(Some(RawLink::Packet(sock, Mac(mac))))
    }

    /// Send one CoE packet (the bytes after the Ethernet header) to `dst`, waiting for
    /// room a bounded time; `false` when it could not go.
    fn send(&self, dst: Mac, coe: &[u8], frame: &mut Vec<u8>) -> io::Result<bool> {
        let t0 = Instant::now();
        loop {
            let sent = match self {
                RawLink::Xdp(x) => x.send_frame(dst, ethertype::IEEE1722, &[coe])?,
                RawLink::Packet(s, src) => {
                    frame.clear();
                    frame.extend_from_slice(&dst.0);
                    frame.extend_from_slice(&src.0);
                    frame.extend_from_slice(&ethertype::IEEE1722.to_be_bytes());
                    frame.extend_from_slice(coe);
                    s.send(frame)?
                }
            };
            if sent {
                return Ok(true);
            }
            if t0.elapsed() >= ROOM_WAIT {
                return Ok(false);
            }
            if let RawLink::Xdp(x) = self {
                x.poll()?;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Frames this host dropped on their way out (AF_PACKET: netfilter, a full queue).
    pub(super) fn host_drops(&self) -> u64 {
        match self {
            RawLink::Xdp(_) => 0,
            RawLink::Packet(s, _) => s.host_drops(),
        }
    }

    /// Send `pkts` to `dst` spread at `gbps`. Returns (bytes sent, packets that found no
    /// room).
    pub(super) fn send_paced(
        &self,
        dst: Mac,
        pkts: &[Vec<u8>],
        gbps: f64,
    ) -> io::Result<(u64, u64)> {
        let t0 = Instant::now();
        let (mut bytes, mut lost) = (0u64, 0u64);
        let mut frame = Vec::new();
        for p in pkts {
            if self.send(dst, p, &mut frame)? {
                bytes += 14 + p.len() as u64;
            } else {
                lost += 1;
            }
            let due = t0 + Duration::from_secs_f64(bytes as f64 * 8.0 / (gbps.max(0.01) * 1e9));
            let now = Instant::now();
            if due > now + Duration::from_micros(50) {
                std::thread::sleep(due - now);
            }
        }
        Ok((bytes, lost))
    }
}
