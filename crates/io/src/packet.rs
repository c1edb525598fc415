//! AF_PACKET sockets for one EtherType on one interface: how HSB's Linux CoE receiver
//! takes Camera-over-Ethernet frames (EtherType 0x22F0) without XDP. Whole frames,
//! Ethernet header included, one per `recv`; the kernel keeps a receive buffer and counts
//! what it had to drop (`PACKET_STATISTICS`).

use crate::sys;
use socket2::Socket;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// An AF_PACKET socket bound to one interface and EtherType.
#[derive(Debug)]
pub struct PacketSocket {
    sock: Socket,
    ifindex: u32,
    ifname: String,
    ethertype: u16,
    host_drops: AtomicU64,
}

impl PacketSocket {
    /// Open a socket for `ethertype` frames on `ifname` (needs CAP_NET_RAW) with a receive
    /// buffer of `recv_buffer` bytes (the kernel may grant less without CAP_NET_ADMIN).
    pub fn open(ifname: &str, ethertype: u16, recv_buffer: usize) -> io::Result<PacketSocket> {
        let ifindex = sys::if_index(ifname).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no network interface {ifname:?}"),
            )
        })?;
        let sock = sys::packet_socket(ethertype, ifindex).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
                e.kind(),
                format!("a raw socket on {ifname} needs CAP_NET_RAW (run as root): {e}"),
            ),
            _ => io::Error::new(e.kind(), format!("raw socket on {ifname}: {e}")),
        })?;
        let _ = sock.set_recv_buffer_size(recv_buffer);
        if sock.recv_buffer_size().unwrap_or(0) < recv_buffer {
            // above rmem_max: the privileged variant
            let _ = sys::setsockopt_int(
                &sock,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                recv_buffer.min(i32::MAX as usize) as i32,
            );
        }
        Ok(PacketSocket {
            sock,
            ifindex,
            ifname: ifname.to_owned(),
            ethertype,
            host_drops: AtomicU64::new(0),
        })
    }

    /// The interface: name and index.
    pub fn interface(&self) -> (&str, u32) {
        (&self.ifname, self.ifindex)
    }

    /// The EtherType it takes.
    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }

    /// The next frame into `buf` (Ethernet header first), if one waits; a longer frame is
    /// cut to `buf` and its whole length returned. Frames this host sent are skipped (on
    /// `lo` every frame is seen leaving, then arriving).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match sys::recv_packet(self.sock.as_raw_fd(), buf) {
                Ok((_, t)) if t == libc::PACKET_OUTGOING => continue,
                Ok((n, _)) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Send one whole frame (Ethernet header first) out of the interface; `false` when the
    /// socket has no room now. A frame this host dropped on its way out (a netfilter rule,
    /// a full device queue: `ENOBUFS`) counts as sent, as on a wire — see
    /// [`PacketSocket::host_drops`].
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        match self.sock.send(frame) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                self.host_drops.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// Frames sent that this host dropped on their way out.
    pub fn host_drops(&self) -> u64 {
        self.host_drops.load(Ordering::Relaxed)
    }

    /// Sleep until a frame waits or `timeout` passes.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        sys::poll_fds(&[self.sock.as_raw_fd()], libc::POLLIN, timeout)
    }

    /// Frames the kernel dropped for want of buffer since the last call.
    pub fn drops(&self) -> io::Result<u64> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        sys::getsockopt_raw(
            self.sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st,
        )?;
        Ok(u64::from(st.tp_drops))
    }
}
