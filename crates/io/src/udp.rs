//! UDP sockets for RoCE v2: batched receive (`recvmmsg`, optional `UDP_GRO`), batched send
//! (`sendmmsg`), gather send with `UDP_SEGMENT` (GSO), and the socket options that make the
//! kernel's IPv4 header predictable for the ICRC (unconnected — a connected socket numbers
//! its datagrams —, explicit source, `IP_PMTUDISC_DO` → DF and Identification 0; see
//! `docs/reference/udp-socket.md`); a ping-pong's plain `recvfrom` and `sendto`.
//!
//! The libc plumbing (addresses, options, the one `recvmmsg`) is in `sys`; the `unsafe`
//! blocks left here are the send calls and the ping-pong's `recvfrom`, each saying why it
//! is sound.

use crate::sys::{
    MmsgRecv, RawAddr, cmsg_space, from_raw, getsockopt_int, nothing_received, poll_fds, raw_addr,
    setsockopt_int,
};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSlice};
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Socket options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpConfig {
    /// Receive buffer to ask for (bytes).
    pub recv_buffer: usize,
    /// Send buffer to ask for (bytes).
    pub send_buffer: usize,
    /// Ask the kernel to coalesce received segments (`UDP_GRO`).
    pub gro: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            recv_buffer: 8 << 20,
            send_buffer: 4 << 20,
            gro: false,
        }
    }
}

/// A bound UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    sock: Socket,
    local: SocketAddr,
    gro: std::cell::Cell<bool>,
    host_drops: std::cell::Cell<u64>,
    /// The receive timeout last set (`SO_RCVTIMEO`).
    rcv_timeout: std::cell::Cell<Option<Duration>>,
    /// Set for a ping-pong ([`UdpSocket::set_ping_pong`]).
    ping_pong: std::cell::Cell<bool>,
    /// Things the operator should know (capped buffers, GRO unavailable).
    pub notes: Vec<String>,
}

/// One received datagram (or a GRO super-datagram of equal segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// Index of the buffer holding it.
    buf: usize,
    /// Sender.
    pub src: SocketAddr,
    /// Bytes received.
    pub len: usize,
    /// With GRO: size of each segment but possibly the last; else `len`.
    pub segment: usize,
    /// The IPv4 header it came with, when the backend sees it (AF_XDP; not a socket).
    pub ip_header: Option<[u8; 20]>,
}

/// Buffers for `recv_batch`.
#[derive(Debug)]
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    meta: Vec<RecvMeta>,
    iovs: Vec<libc::iovec>,
    groups: Vec<std::ops::Range<usize>>,
    mmsg: MmsgRecv,
    /// How many datagrams the next `recvmmsg` asks for: as many as the last one got when
    /// it emptied the queue (one for a ping-pong, so the kernel does not look for a second
    /// that is not there), twice as many when it filled them all, up to the capacity.
    want: usize,
}

// SAFETY: the raw pointers in `iovs` are written at the start of each receive and used only
// inside it, while the buffers they point at are borrowed; moving the value between threads
// cannot make anything unsound.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `count` buffers of `size` bytes (use 65 536 with GRO).
    pub fn new(count: usize, size: usize) -> RecvBatch {
        RecvBatch {
            bufs: (0..count)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect(),
            meta: Vec::with_capacity(count),
            iovs: Vec::with_capacity(count),
            groups: (0..count).map(|i| i..i + 1).collect(),
            mmsg: MmsgRecv::new(count),
            want: count,
        }
    }
    /// Ask the next receive for at most `n` datagrams (GRO messages), at least one; later
    /// ones grow back as the queue allows.
    pub fn ask_at_most(&mut self, n: usize) {
        self.want = self.want.min(n).max(1);
    }
    /// Datagrams of the last receive.
    pub fn len(&self) -> usize {
        self.meta.len()
    }
    /// True when the last receive got nothing.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }
    /// Datagram `i`: metadata and bytes.
    pub fn get(&self, i: usize) -> (RecvMeta, &[u8]) {
        let m = self.meta[i];
        (m, &self.bufs[m.buf][..m.len])
    }
    /// Start a receive that fills the batch with [`RecvBatch::push`] (a backend without
    /// `recvmmsg`).
    pub fn clear(&mut self) {
        self.meta.clear();
    }

    /// Datagrams the batch holds at most.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Append a datagram by copying it into the next buffer (a backend that reads frames
    /// elsewhere, as AF_XDP does). False, and nothing appended, when the batch is full or
    /// `bytes` exceeds a buffer.
    pub fn push(&mut self, src: SocketAddr, ip_header: Option<[u8; 20]>, bytes: &[u8]) -> bool {
        let i = self.meta.len();
        let Some(buf) = self.bufs.get_mut(i) else {
            return false;
        };
        let Some(dst) = buf.get_mut(..bytes.len()) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        self.meta.push(RecvMeta {
            buf: i,
            src,
            len: bytes.len(),
            segment: bytes.len(),
            ip_header,
        });
        true
    }

    /// Every received segment as (sender, IPv4 header if the backend saw it, bytes).
    pub fn segments_with_ip(
        &self,
    ) -> impl Iterator<Item = (SocketAddr, Option<&[u8; 20]>, &[u8])> + '_ {
        self.meta.iter().flat_map(|m| {
            self.bufs[m.buf][..m.len]
                .chunks(m.segment.max(1))
                .map(move |c| (m.src, m.ip_header.as_ref(), c))
        })
    }

    /// Every received segment as (sender, bytes), GRO super-datagrams split without copying.
    pub fn segments(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.meta.iter().flat_map(|m| {
            self.bufs[m.buf][..m.len]
                .chunks(m.segment.max(1))
                .map(move |c| (m.src, c))
        })
    }
}

impl UdpSocket {
    /// Bind to `local`, which must name an explicit IP (the ICRC covers it).
    pub fn bind(local: SocketAddr, cfg: &UdpConfig) -> io::Result<UdpSocket> {
        if local.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bind to an explicit IP address: the RoCE ICRC covers it",
            ));
        }
        let domain = if local.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let sock = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        if local.is_ipv6() {
            sock.set_only_v6(true)?;
        }
        // name the address: "Address already in use" alone does not say which
        sock.bind(&local.into())
            .map_err(|e| io::Error::new(e.kind(), format!("bind {local}: {e}")))?;
        // the socket blocks (for `recv_batch_wait`); every other call says MSG_DONTWAIT
        let mut notes = Vec::new();
        // DF with Identification 0 for unconnected sends (IPv4); no fragmentation (IPv6).
        if local.is_ipv4() {
            setsockopt_int(
                &sock,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
            )?;
        } else {
            setsockopt_int(
                &sock,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
            )?;
        }
        size_buffer(&sock, cfg.recv_buffer, true, &mut notes);
        size_buffer(&sock, cfg.send_buffer, false, &mut notes);
        let mut gro = false;
        if cfg.gro {
            match setsockopt_int(&sock, libc::SOL_UDP, libc::UDP_GRO, 1) {
                Ok(()) => gro = true,
                Err(e) => notes.push(format!(
                    "UDP_GRO unavailable ({e}); receiving datagram by datagram"
                )),
            }
        }
        let local = sock.local_addr()?.as_socket().unwrap_or(local);
        Ok(UdpSocket {
            sock,
            local,
            gro: std::cell::Cell::new(gro),
            host_drops: std::cell::Cell::new(0),
            rcv_timeout: std::cell::Cell::new(None),
            ping_pong: std::cell::Cell::new(false),
            notes,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The socket as a blocking `std::net::UdpSocket` (options set at bind time stay).
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let s: std::net::UdpSocket = self.sock.into();
        s.set_nonblocking(false)?;
        Ok(s)
    }

    /// Make the socket a ping-pong's (a latency test: one datagram at a time each way).
    /// It receives datagram by datagram (no GRO: the kernel splits a peer's segmented
    /// runs), a receive asked for one datagram is a plain `recvfrom` and a datagram of at
    /// most 512 bytes is copied into one buffer and sent with a plain `sendto`:
    /// no message header for the kernel to read, about half a microsecond less per hop on
    /// loopback. The socket stays unconnected — a connected one would number its IPv4
    /// datagrams, and the Identification is under the ICRC — and open to every sender, the
    /// endpoint checking each as always.
    pub fn set_ping_pong(&self) -> io::Result<()> {
        if self.gro.get() {
            setsockopt_int(&self.sock, libc::SOL_UDP, libc::UDP_GRO, 0)?;
            self.gro.set(false);
        }
        self.ping_pong.set(true);
        Ok(())
    }

    /// Datagrams the local host refused to send (`EPERM`: a netfilter rule dropped them).
    pub fn host_drops(&self) -> u64 {
        self.host_drops.get()
    }

    /// Map the error of a failed send: would-block → 0 sent; EPERM (netfilter drop) →
    /// `dropped` units consumed and counted; anything else is an error.
    fn send_error(&self, dropped: usize) -> io::Result<usize> {
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ if e.raw_os_error() == Some(libc::EPERM) => {
                self.host_drops.set(self.host_drops.get() + 1);
                Ok(dropped)
            }
            _ => Err(e),
        }
    }

    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.sock.as_raw_fd()
    }

    /// The socket's descriptor, for a thread that waits on it (with
    /// [`wait_readable_any`]) while the socket itself is held elsewhere; valid while the
    /// socket lives.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.raw_fd()
    }

    /// Whether GRO is on.
    pub fn gro(&self) -> bool {
        self.gro.get()
    }

    /// Wait until readable or `timeout` passes (`None`: forever). Returns readability.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        poll_fds(&[self.sock.as_raw_fd()], libc::POLLIN, timeout)
    }

    /// Wait until the socket can take more datagrams, or `timeout` passes.
    pub fn wait_writable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        poll_fds(&[self.sock.as_raw_fd()], libc::POLLOUT, timeout)
    }

    /// Receive up to the batch's capacity without blocking. Returns how many.
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.recv_batch_flags(batch, libc::MSG_DONTWAIT)
    }

    /// Receive up to the batch's capacity, sleeping up to about `timeout` for the first
    /// datagram (one call instead of poll + receive). The kernel's timer is re-armed only
    /// when the wanted timeout halves, so this may return empty up to 2× early, never late.
    /// Returns how many.
    pub fn recv_batch_wait(&self, batch: &mut RecvBatch, timeout: Duration) -> io::Result<usize> {
        self.arm_recv_timeout(timeout)?;
        self.recv_batch_flags(batch, libc::MSG_WAITFORONE)
    }

    /// Make a blocking receive give up after about `timeout`: `SO_RCVTIMEO` set to the
    /// largest power of two of microseconds not above it (at most 2¹⁵ µs ≈ 33 ms), so a
    /// deadline that creeps closer call by call re-arms it only when it halves — never late,
    /// at most 2× early.
    pub(crate) fn arm_recv_timeout(&self, timeout: Duration) -> io::Result<()> {
        let us = timeout.as_micros().clamp(1, 1 << 15) as u64;
        let want = Duration::from_micros(1 << (63 - us.leading_zeros()));
        if self.rcv_timeout.get() != Some(want) {
            self.sock.set_read_timeout(Some(want))?;
            self.rcv_timeout.set(Some(want));
        }
        Ok(())
    }

    fn recv_batch_flags(&self, batch: &mut RecvBatch, flags: libc::c_int) -> io::Result<usize> {
        batch.meta.clear();
        if batch.iovs.len() != batch.bufs.len() {
            batch.iovs.clear();
            batch
                .iovs
                .extend(batch.bufs.iter_mut().map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                }));
        }
        let want = batch.want.clamp(1, batch.groups.len().max(1));
        // a ping-pong's ask: a plain `recvfrom`
        if want == 1 && self.ping_pong.get() && !self.gro.get() {
            return self.recv_one(batch, flags);
        }
        let groups = &batch.groups[..want.min(batch.groups.len())];
        // SAFETY: iovec i points at the whole of buffer i (boxed, so it never moves; the
        // kernel does not write iovecs), which `batch` owns and this call borrows mutably
        // (nothing else touches it until the receive returns); group i is iovec i.
        let r = unsafe {
            batch.mmsg.recv(
                self.sock.as_raw_fd(),
                &mut batch.iovs,
                groups,
                self.gro.get(),
                flags,
            )?
        };
        // a call that finds nothing has drained the queue: the next datagram most likely
        // comes alone (a ping-pong's answer), so the next call asks for one. A second
        // entry that comes back empty costs the call a good part of a datagram's work, and
        // a second datagram found with it is handled before the first is answered. A call
        // that fills its ask met a queue that is likely longer: the ask grows eightfold
        // (one, eight, the whole batch), so a stream is back to full batches in two calls.
        batch.want = match r {
            0 => 1,
            r if r >= want => want.saturating_mul(8),
            r => r,
        };
        for i in 0..r {
            let Some(m) = batch.mmsg.received(i) else {
                continue;
            };
            let Some(src) = m.src else { continue };
            batch.meta.push(RecvMeta {
                buf: i,
                src,
                len: m.len,
                segment: m.segment.unwrap_or(m.len),
                ip_header: None,
            });
        }
        Ok(batch.meta.len())
    }

    /// Receive one datagram with a plain `recvfrom` into the first buffer (`flags` as for
    /// `recvmmsg`; MSG_WAITFORONE: block up to the receive timeout).
    fn recv_one(&self, batch: &mut RecvBatch, flags: libc::c_int) -> io::Result<usize> {
        let flags = flags & !libc::MSG_WAITFORONE;
        let Some(buf) = batch.bufs.first_mut() else {
            return Ok(0);
        };
        let mut from = RawAddr::zeroed();
        let mut len = size_of::<RawAddr>() as libc::socklen_t;
        // SAFETY: `buf` is a live buffer the batch owns, borrowed mutably for the call, and
        // `from` live storage of `len` bytes; the kernel writes at most those lengths.
        let r = unsafe {
            libc::recvfrom(
                self.sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags,
                (&mut from as *mut RawAddr).cast(),
                &mut len,
            )
        };
        if r < 0 {
            batch.want = 1;
            return nothing_received();
        }
        // one found: the queue may hold more (a stream), so ask for the batch's next rung
        batch.want = 8;
        let Some(src) = from_raw(&from, len) else {
            return Ok(0);
        };
        let len = r as usize;
        batch.meta.push(RecvMeta {
            buf: 0,
            src,
            len,
            segment: len,
            ip_header: None,
        });
        Ok(1)
    }

    /// Send each `(dst, bytes)` as one datagram with `sendmmsg`. Returns how many went out
    /// (fewer when the socket buffer is full).
    pub fn send_batch(&self, pkts: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        let parts: Vec<[IoSlice<'_>; 1]> = pkts.iter().map(|(_, b)| [IoSlice::new(b)]).collect();
        let refs: Vec<(SocketAddr, &[IoSlice<'_>])> = pkts
            .iter()
            .zip(&parts)
            .map(|((a, _), p)| (*a, &p[..]))
            .collect();
        self.send_batch_parts(&refs)
    }

    /// Send each `(dst, parts)` as one datagram gathered from its parts, with `sendmmsg`.
    /// Returns how many went out (fewer when the socket buffer is full).
    pub fn send_batch_parts(&self, pkts: &[(SocketAddr, &[IoSlice<'_>])]) -> io::Result<usize> {
        let msgs: Vec<Mixed<'_>> = pkts
            .iter()
            .map(|&(dst, parts)| Mixed {
                dst,
                parts,
                segment: None,
                tos: 0,
            })
            .collect();
        self.send_mixed(&msgs)
    }

    /// Send one datagram, the concatenation of `parts`, to `dst` with one `sendmsg` and no
    /// allocation (a latency test's every message). Returns 1 when it went out or a local
    /// firewall rule dropped it (counted in `host_drops`, like a loss), 0 when the socket
    /// buffer is full.
    pub fn send_parts(&self, dst: SocketAddr, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.ping_pong.get() {
            let mut b = [0u8; SHORT_SEND];
            if let Some(len) = gather_into(&mut b, parts) {
                let (addr, alen) = raw_addr(dst);
                // SAFETY: `b[..len]` is initialised stack memory and `addr` a live address
                // of `alen` bytes; the kernel only reads them.
                let r = unsafe {
                    libc::sendto(
                        self.sock.as_raw_fd(),
                        b.as_ptr().cast(),
                        len,
                        libc::MSG_DONTWAIT,
                        (&addr as *const RawAddr).cast(),
                        alen,
                    )
                };
                if r < 0 {
                    return self.send_error(1);
                }
                return Ok(1);
            }
        }
        let (mut addr, alen) = raw_addr(dst);
        // SAFETY: msghdr is plain C data; zero is a valid initial value.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = (&mut addr as *mut RawAddr).cast();
        h.msg_namelen = alen;
        h.msg_iov = parts.as_ptr() as *mut libc::iovec; // IoSlice is ABI-compatible with iovec
        h.msg_iovlen = parts.len();
        // SAFETY: the header points at a live address and at the caller's live iovecs over
        // live slices; the kernel only reads them (the *mut casts are for the C type).
        let r = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &h, libc::MSG_DONTWAIT) };
        if r < 0 {
            return self.send_error(1);
        }
        Ok(1)
    }

    /// Send one GSO super-datagram to `dst`: the concatenation of `parts` cut into
    /// segments of `segment` bytes (the last may be shorter). Parts are gathered by the
    /// kernel — header | payload slice | ICRC need no staging copy.
    pub fn send_gso(
        &self,
        dst: SocketAddr,
        parts: &[IoSlice<'_>],
        segment: u16,
    ) -> io::Result<usize> {
        self.send_gso_tos(dst, parts, segment, 0)
    }

    /// [`UdpSocket::send_gso`] with traffic class byte `tos` (DSCP << 2) in every
    /// segment's IP header (0: the socket's own).
    pub fn send_gso_tos(
        &self,
        dst: SocketAddr,
        parts: &[IoSlice<'_>],
        segment: u16,
        tos: u8,
    ) -> io::Result<usize> {
        let (mut addr, alen) = raw_addr(dst);
        let mut cmsg = SendCmsg::default();
        // SAFETY: msghdr is plain C data.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = (&mut addr as *mut RawAddr).cast();
        h.msg_namelen = alen;
        h.msg_iov = parts.as_ptr() as *mut libc::iovec; // IoSlice is ABI-compatible with iovec
        h.msg_iovlen = parts.len();
        cmsg.attach(&mut h, Some(segment), tos, dst.is_ipv6())?;
        // SAFETY: `h` points at the address, the caller's iovecs and our control buffer,
        // all alive for the call; the kernel only reads them.
        let r = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &h, libc::MSG_DONTWAIT) };
        if r < 0 {
            return self.send_error(parts.iter().map(|p| p.len()).sum());
        }
        Ok(r as usize)
    }

    /// Send each of `msgs` — a datagram, or with a segment size a GSO super-datagram cut
    /// into segments of that size — with one `sendmmsg`: a WRITE's first packet and the
    /// segmented run of the rest, and the next WRITE's, in one system call. Returns how
    /// many of `msgs` went out (fewer when the socket buffer is full; one that a local
    /// firewall rule refused counts as sent and in `host_drops`, like a loss).
    pub fn send_mixed(&self, msgs: &[Mixed<'_>]) -> io::Result<usize> {
        if msgs.is_empty() {
            return Ok(0);
        }
        let mut addrs: Vec<(RawAddr, libc::socklen_t)> =
            msgs.iter().map(|m| raw_addr(m.dst)).collect();
        let mut cmsgs: Vec<SendCmsg> = vec![SendCmsg::default(); msgs.len()];
        // SAFETY: mmsghdr is plain C data; zero is a valid initial value.
        let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { zeroed() }; msgs.len()];
        for (i, h) in hdrs.iter_mut().enumerate() {
            let h = &mut h.msg_hdr;
            h.msg_name = (&mut addrs[i].0 as *mut RawAddr).cast();
            h.msg_namelen = addrs[i].1;
            h.msg_iov = msgs[i].parts.as_ptr() as *mut libc::iovec; // ABI-compatible
            h.msg_iovlen = msgs[i].parts.len();
            if msgs[i].segment.is_some() || msgs[i].tos != 0 {
                cmsgs[i].attach(h, msgs[i].segment, msgs[i].tos, msgs[i].dst.is_ipv6())?;
            }
        }
        // SAFETY: every header points at a live address, the caller's live iovecs over
        // live slices and, for a segmented one, its own control buffer in `cmsgs` (not
        // moved since); the kernel only reads them (the *mut casts are for the C type).
        let r = unsafe {
            libc::sendmmsg(
                self.sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            // EPERM: a local firewall rule dropped the first one; it is gone, like a loss
            return self.send_error(1);
        }
        Ok(r as usize)
    }
}

/// One entry of [`UdpSocket::send_mixed`]: a datagram gathered from `parts`, or with
/// `segment` a GSO super-datagram of segments of that many bytes (the last may be shorter).
#[derive(Debug, Clone, Copy)]
pub struct Mixed<'a> {
    /// Where to.
    pub dst: SocketAddr,
    /// Its bytes, gathered in order.
    pub parts: &'a [IoSlice<'a>],
    /// The segment size of a super-datagram; `None` for one datagram.
    pub segment: Option<u16>,
    /// The IP header's traffic class byte (DSCP << 2); 0 leaves the socket's own.
    pub tos: u8,
}

/// The control buffer of one message: `UDP_SEGMENT` and the traffic class (`IP_TOS`, or
/// `IPV6_TCLASS` to an IPv6 peer), each when asked for (48 bytes ≥ CMSG_SPACE(2) +
/// CMSG_SPACE(4), aligned as `cmsghdr`).
#[derive(Debug, Clone, Copy, Default)]
struct SendCmsg([u64; 6]);

impl SendCmsg {
    /// Point `h`'s control data at this buffer, holding `UDP_SEGMENT = segment` when given
    /// and the traffic class `tos` when not 0. The buffer must stay where it is until `h`
    /// has been used.
    fn attach(
        &mut self,
        h: &mut libc::msghdr,
        segment: Option<u16>,
        tos: u8,
        v6: bool,
    ) -> io::Result<()> {
        let seg_len = segment.map_or(0, |_| cmsg_space(size_of::<u16>()));
        let tos_len = if tos != 0 {
            cmsg_space(size_of::<libc::c_int>())
        } else {
            0
        };
        h.msg_control = self.0.as_mut_ptr().cast();
        h.msg_controllen = seg_len + tos_len;
        if h.msg_controllen == 0 {
            h.msg_control = std::ptr::null_mut();
            return Ok(());
        }
        // SAFETY: `h.msg_control` points at our 48 bytes, at least CMSG_SPACE(2) +
        // CMSG_SPACE(4) and `h.msg_controllen` long; CMSG_FIRSTHDR/CMSG_NXTHDR return
        // pointers into them (or null, checked), and each data area holds what is written.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            if let Some(segment) = segment {
                if c.is_null() {
                    // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
                    return Err(io::Error::other(
                        "no room for the UDP_SEGMENT control message",
                    ));
                }
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), segment);
                c = libc::CMSG_NXTHDR(h, c);
            }
            if tos != 0 {
                if c.is_null() {
                    // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
                    return Err(io::Error::other(
                        "no room for the traffic class control message",
                    ));
                }
                (*c).cmsg_level = if v6 {
                    libc::IPPROTO_IPV6
                } else {
                    libc::IPPROTO_IP
                };
                (*c).cmsg_type = if v6 { libc::IPV6_TCLASS } else { libc::IP_TOS };
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
                std::ptr::write_unaligned(
                    libc::CMSG_DATA(c).cast::<libc::c_int>(),
                    libc::c_int::from(tos),
                );
            }
        }
        Ok(())
    }
}

/// Wait until one of `fds` is readable, or `timeout` passes (`None`: forever). Returns
/// whether any is.
pub fn wait_readable_any(
    fds: &[std::os::fd::RawFd],
    timeout: Option<Duration>,
) -> io::Result<bool> {
    poll_fds(fds, libc::POLLIN, timeout)
}

/// Ask for `want` bytes of buffer; if the kernel caps it (rmem_max/wmem_max), try the
/// privileged FORCE option, and say so if the result is still short.
fn size_buffer(sock: &Socket, want: usize, recv: bool, notes: &mut Vec<String>) {
    let (opt, force, name, sysctl) = if recv {
        (
            libc::SO_RCVBUF,
            libc::SO_RCVBUFFORCE,
            "receive",
            "net.core.rmem_max",
        )
    } else {
        (
            libc::SO_SNDBUF,
            libc::SO_SNDBUFFORCE,
            "send",
            "net.core.wmem_max",
        )
    };
    let want_i = want.min(i32::MAX as usize / 2) as libc::c_int;
    let _ = setsockopt_int(sock, libc::SOL_SOCKET, opt, want_i);
    let got = getsockopt_int(sock, libc::SOL_SOCKET, opt).unwrap_or(0) as usize / 2; // kernel doubles it
    if got < want {
        let _ = setsockopt_int(sock, libc::SOL_SOCKET, force, want_i);
        let got2 = getsockopt_int(sock, libc::SOL_SOCKET, opt).unwrap_or(0) as usize / 2;
        if got2 < want {
            notes.push(format!(
                "{name} buffer capped at {got2} bytes (asked {want}); raise it with: sysctl -w {sysctl}={want}"
            ));
        }
    }
}

/// The longest datagram a ping-pong's socket sends as one copied buffer with a plain
/// `sendto` (a latency test's message): no message header for the kernel to read.
const SHORT_SEND: usize = 512;

/// Copy `parts` one after another into `b`; their total length, or `None` if they do not
/// fit.
fn gather_into(b: &mut [u8], parts: &[IoSlice<'_>]) -> Option<usize> {
    let mut at = 0;
    for p in parts {
        b.get_mut(at..at + p.len())?.copy_from_slice(p);
        at += p.len();
    }
    Some(at)
}

/// The IP address the kernel would use to reach `peer` (no packet is sent).
pub fn local_ip_for(peer: IpAddr) -> io::Result<IpAddr> {
    let s = std::net::UdpSocket::bind(if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    })?;
    s.connect((peer, 9))?;
    Ok(s.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, Outgoing};

    /// Up to `n` datagrams (GRO super-datagrams split) received on `b`, with their
    /// senders, waiting at most about 5 s in all.
    fn recv_n(b: &UdpSocket, n: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        let mut batch = RecvBatch::new(16, 2048);
        let mut got = Vec::new();
        for _ in 0..100 {
            if got.len() >= n {
                break;
            }
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            b.recv_batch(&mut batch).unwrap();
            got.extend(batch.segments().map(|(s, d)| (s, d.to_vec())));
        }
        got
    }

    #[test]
    fn a_busy_port_is_refused_naming_the_address() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let at = a.local_addr();
        let e = UdpSocket::bind(at, &UdpConfig::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(e.to_string().starts_with(&format!("bind {at}: ")), "{e}");
    }

    #[test]
    fn a_ping_pong_socket_receives_datagram_by_datagram_and_sends_short_ones_whole() {
        let cfg = UdpConfig {
            gro: true,
            ..UdpConfig::default()
        };
        let bind = || UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
        let (a, peer, other) = (bind(), bind(), bind());
        peer.set_ping_pong().unwrap();
        a.set_ping_pong().unwrap();
        assert!(
            !a.gro(),
            "a ping-pong's socket receives datagram by datagram"
        );
        // a short datagram gathered from three parts (sent whole), one as long as the
        // copy allows, and a longer one (sent from its parts)
        let (head, tail) = ([1u8; 12], [9u8; 4]);
        let body: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
        let sizes = [3, SHORT_SEND - 16, SHORT_SEND - 15, 1900];
        for n in sizes {
            let parts = [
                IoSlice::new(&head),
                IoSlice::new(&body[..n]),
                IoSlice::new(&tail),
            ];
            assert_eq!(a.send_parts(peer.local_addr(), &parts).unwrap(), 1);
        }
        // then a segmented run of five, which the kernel splits for the peer, and one
        // datagram from another sender: still received, with its sender, for the endpoint
        // to judge
        let seg: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 700]).collect();
        let run: Vec<Outgoing<'_>> = seg
            .iter()
            .map(|d| Outgoing::whole(peer.local_addr(), d))
            .collect();
        assert_eq!(Backend::send_segmented(&a, &run).unwrap(), 3500);
        std::thread::sleep(Duration::from_millis(20));
        other
            .send_parts(peer.local_addr(), &[IoSlice::new(b"stranger")])
            .unwrap();
        // received one call at a time (a ping-pong's ask) and in batches alike
        let mut batch = RecvBatch::new(8, 65_536);
        let mut got = Vec::new();
        for _ in 0..200 {
            if got.len() == sizes.len() + seg.len() + 1 {
                break;
            }
            batch.ask_at_most(1);
            peer.wait_readable(Some(Duration::from_millis(50))).unwrap();
            peer.recv_batch(&mut batch).unwrap();
            assert!(batch.len() <= 1);
            for i in 0..batch.len() {
                let (m, d) = batch.get(i);
                assert_eq!(m.segment, d.len());
                let from_a = m.src == a.local_addr();
                assert!(from_a || m.src == other.local_addr(), "{}", m.src);
                got.push(if from_a {
                    d.to_vec()
                } else {
                    [b"other: ", d].concat()
                });
            }
        }
        let mut want: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&n| [&head[..], &body[..n], &tail[..]].concat())
            .collect();
        want.extend(seg);
        want.push(b"other: stranger".to_vec());
        assert_eq!(got, want);
    }

    /// The IPv4 Identifications of at least `want` UDP datagrams from `from` seen on the
    /// loopback device (each appears there leaving and arriving), calling `send` again every
    /// 50 ms while fewer were seen (a capture of all loopback traffic may drop frames while
    /// other tests stream), for at most 5 s.
    fn ipv4_ids_on_loopback(from: SocketAddr, want: usize, send: impl Fn()) -> Vec<u16> {
        use socket2::{Domain, Protocol, Socket, Type};
        let all = Protocol::from(i32::from((libc::ETH_P_ALL as u16).to_be()));
        let cap = Socket::new(Domain::PACKET, Type::RAW, Some(all)).expect("AF_PACKET (root)");
        cap.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let (mut ids, t0) = (Vec::new(), std::time::Instant::now());
        let mut sent_at = None::<std::time::Instant>;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
        while ids.len() < want && t0.elapsed() < Duration::from_secs(5) {
            if sent_at.is_none_or(|t| t.elapsed() >= Duration::from_millis(50)) {
                send();
                sent_at = Some(std::time::Instant::now());
            }
            let Ok(n) = cap.recv(&mut buf) else { continue };
            // SAFETY: the kernel initialised the first `n` bytes
            let f: Vec<u8> = buf[..n]
                .iter()
                .map(|b| unsafe { b.assume_init() })
                .collect();
            let SocketAddr::V4(v4) = from else { break };
            let ours = f.len() >= 42
                && f[12..14] == [8, 0]
                && f[23] == 17
                && f[26..30] == v4.ip().octets()
                && f[34..36] == v4.port().to_be_bytes();
            if ours {
                ids.push(u16::from_be_bytes([f[18], f[19]]));
            }
        }
        ids
    }

    /// The ICRC covers the IPv4 Identification, and rocelink computes it for the 0 an
    /// unconnected socket sends with DF: a ping-pong's socket keeps it 0 for the short
    /// datagrams it sends with `sendto` and the long ones it sends from their parts (a
    /// connected socket would number them).
    #[test]
    fn a_ping_pong_socket_sends_with_ipv4_identification_zero() {
        if !is_root() {
            return;
        }
        let cfg = UdpConfig::default();
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &cfg).unwrap();
        a.set_ping_pong().unwrap();
        let long = vec![5u8; 1500];
        let ids = ipv4_ids_on_loopback(a.local_addr(), 6, || {
            a.send_parts(b.local_addr(), &[IoSlice::new(b"short")])
                .unwrap();
            a.send_parts(b.local_addr(), &[IoSlice::new(&long)])
                .unwrap();
        });
        assert!(ids.len() >= 6, "saw {} datagrams in 5 s", ids.len());
        assert!(ids.iter().all(|&id| id == 0), "{ids:?}");
    }

    /// Root, which an AF_PACKET socket needs (tests that need it are skipped without).
    fn is_root() -> bool {
        let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
        if !root {
            eprintln!("skipping: capturing on the loopback device needs root");
        }
        root
    }

    #[test]
    fn batch_round_trip_over_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let data: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        let pkts: Vec<(SocketAddr, &[u8])> =
            data.iter().map(|d| (b.local_addr(), &d[..])).collect();
        assert_eq!(a.send_batch(&pkts).unwrap(), 10);
        let got = recv_n(&b, 10);
        assert_eq!(got.len(), 10);
        for (i, (src, d)) in got.iter().enumerate() {
            assert_eq!(*src, a.local_addr());
            assert_eq!(d, &data[i]);
        }
    }

    #[test]
    fn the_receive_count_follows_the_queue_and_loses_nothing() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let to = b.local_addr();
        let mut batch = RecvBatch::new(8, 2048);
        let recv_now = |batch: &mut RecvBatch| -> Vec<u8> {
            b.wait_readable(Some(Duration::from_secs(1))).unwrap();
            b.recv_batch(batch).unwrap();
            batch.segments().map(|(_, d)| d[0]).collect()
        };
        // a polled ping-pong: each answer is found by the call after one that found
        // nothing, and that call asks for one datagram only
        for i in 0..3u8 {
            assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
            assert_eq!(batch.want, 1);
            a.send_batch(&[(to, &[i][..])]).unwrap();
            assert_eq!(recv_now(&mut batch), [i]);
        }
        // then a burst of 20 after an empty call: asked for 1, then eightfold up to the
        // capacity, with every datagram in order
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
        let burst: Vec<[u8; 1]> = (10..30u8).map(|i| [i]).collect();
        let pkts: Vec<(SocketAddr, &[u8])> = burst.iter().map(|d| (to, &d[..])).collect();
        assert_eq!(a.send_batch(&pkts).unwrap(), 20);
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while got.len() < 20 {
            let n = recv_now(&mut batch);
            sizes.push(n.len());
            got.extend(n);
        }
        assert_eq!(got, (10..30u8).collect::<Vec<_>>());
        assert_eq!(sizes, [1, 8, 8, 3], "never more than the capacity");
        assert_eq!(batch.want, 3, "as many as the last receive found");
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
        assert_eq!(batch.want, 1, "the queue is drained");
    }

    #[test]
    fn gso_gather_splits_into_segments() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind(
            "127.0.0.1:0".parse().unwrap(),
            &UdpConfig {
                gro: false,
                ..UdpConfig::default()
            },
        )
        .unwrap();
        // three 300-byte segments gathered from uneven parts
        let p1 = vec![1u8; 250];
        let p2 = vec![2u8; 500];
        let p3 = vec![3u8; 150];
        let parts = [IoSlice::new(&p1), IoSlice::new(&p2), IoSlice::new(&p3)];
        match a.send_gso(b.local_addr(), &parts, 300) {
            Ok(n) => assert_eq!(n, 900),
            Err(e) => panic!("GSO send failed: {e}"),
        }
        let segs: Vec<Vec<u8>> = recv_n(&b, 3).into_iter().map(|(_, d)| d).collect();
        assert_eq!(segs.len(), 3);
        let all: Vec<u8> = segs.concat();
        assert_eq!(all, [p1, p2, p3].concat());
        assert!(segs.iter().all(|s| s.len() == 300));
    }

    #[test]
    fn one_datagram_gathers_its_parts_in_order() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let (head, body, tail) = ([7u8; 12], [8u8; 40], [9u8; 4]);
        let parts = [
            IoSlice::new(&head),
            IoSlice::new(&body),
            IoSlice::new(&tail),
        ];
        assert_eq!(a.send_parts(b.local_addr(), &parts).unwrap(), 1);
        // through the backend: one outgoing datagram takes the same way
        let out = [crate::backend::Outgoing::new(
            b.local_addr(),
            [&tail[..], &[][..], &head[..]],
        )];
        assert_eq!(crate::backend::Backend::send(&a, &out).unwrap(), 1);
        let got = recv_n(&b, 2);
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|(src, _)| *src == a.local_addr()));
        assert_eq!(got[0].1, [&head[..], &body, &tail].concat());
        assert_eq!(got[1].1, [&tail[..], &head].concat());
    }

    #[test]
    fn mixed_datagrams_and_runs_arrive_whole_and_in_order() {
        use crate::backend::{Outgoing, Transmitter};
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let to = b.local_addr();
        // a WRITE's shape twice: a longer first packet alone, then a run of middles and a
        // shorter last; each datagram's bytes say which it is
        let data: Vec<Vec<u8>> = (0..10u8)
            .map(|i| {
                let len = match i % 5 {
                    0 => 316,
                    4 => 120,
                    _ => 300,
                };
                vec![i; len]
            })
            .collect();
        let head = [0xEEu8; 4];
        let out: Vec<Outgoing<'_>> = data
            .iter()
            .map(|d| Outgoing::new(to, [&head[..], &d[4..], &[]]))
            .collect();
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&a, &out).unwrap(), 10);
        assert_eq!(
            (tx.segmented_sends, tx.batched_sends),
            (1, 0),
            "one call for all four groups"
        );
        let got: Vec<Vec<u8>> = recv_n(&b, 10).into_iter().map(|(_, d)| d).collect();
        let want: Vec<Vec<u8>> = data.iter().map(|d| [&head[..], &d[4..]].concat()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn refuses_unspecified_bind() {
        assert!(UdpSocket::bind("0.0.0.0:0".parse().unwrap(), &UdpConfig::default()).is_err());
    }
}
