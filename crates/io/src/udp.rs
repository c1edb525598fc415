//! UDP sockets for RoCE v2: batched receive (`recvmmsg`, optional `UDP_GRO`), batched send
//! (`sendmmsg`), gather send with `UDP_SEGMENT` (GSO), and the socket options that make the
//! kernel's IPv4 header predictable for the ICRC (unconnected, explicit source,
//! `IP_PMTUDISC_DO` → DF and Identification 0; see `shared/reference/udp-socket-icrc.md`).
//!
//! This module and `sys` are the only places with `unsafe`; each block says why it is sound.

use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSlice};
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
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
    gro: bool,
    host_drops: std::cell::Cell<u64>,
    /// The receive timeout last set (`SO_RCVTIMEO`).
    rcv_timeout: std::cell::Cell<Option<Duration>>,
    /// Things the operator should know (capped buffers, GRO unavailable).
    pub notes: Vec<String>,
}

/// Storage for one socket address in `msghdr`.
#[repr(C)]
#[derive(Clone, Copy)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    storage: libc::sockaddr_storage,
}

fn raw_addr(a: SocketAddr) -> (RawAddr, libc::socklen_t) {
    // SAFETY: every field of these C structs is an integer or an array of integers, for
    // which all-zero bytes are a valid value.
    let mut r: RawAddr = unsafe { zeroed() };
    match a {
        SocketAddr::V4(a) => {
            r.v4 = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            (r, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            r.v6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            (r, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// A kernel-written `sockaddr_storage` of `len` bytes as a std address.
pub(crate) fn sockaddr_to_std(
    s: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    from_raw(&RawAddr { storage: *s }, len)
}

fn from_raw(r: &RawAddr, len: libc::socklen_t) -> Option<SocketAddr> {
    // SAFETY: the kernel wrote a sockaddr of `len` bytes; the family field is at the same
    // offset in every member, and we read the member the family names only if `len` covers it.
    unsafe {
        match i32::from(r.storage.ss_family) {
            libc::AF_INET if len as usize >= size_of::<libc::sockaddr_in>() => {
                let a = r.v4;
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len as usize >= size_of::<libc::sockaddr_in6>() => {
                let a = r.v6;
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn setsockopt_int(
    sock: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its exact size; the fd is owned by `sock`.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(sock: &Socket, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, which is that large.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
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
}

/// Buffers for `recv_batch`.
#[derive(Debug)]
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    meta: Vec<RecvMeta>,
    sys: BatchSys,
}

/// The C structures of a `recvmmsg` call, kept between calls so a receive allocates and
/// clears nothing.
struct BatchSys {
    iovs: Vec<libc::iovec>,
    addrs: Vec<RawAddr>,
    cmsgs: Vec<[u64; 8]>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `iovs` and `msgs` are set at the start of each receive, used
// only during it, and never dereferenced in between; moving the value between threads
// cannot make anything unsound.
unsafe impl Send for BatchSys {}

impl std::fmt::Debug for BatchSys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchSys")
    }
}

impl RecvBatch {
    /// `count` buffers of `size` bytes (use 65 536 with GRO).
    pub fn new(count: usize, size: usize) -> RecvBatch {
        RecvBatch {
            bufs: (0..count)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect(),
            meta: Vec::with_capacity(count),
            sys: BatchSys {
                // SAFETY: iovec, sockaddr storage and mmsghdr are plain C data (integers,
                // arrays, pointers) for which all-zero is a valid value.
                iovs: vec![unsafe { zeroed() }; count],
                // SAFETY: as above.
                addrs: vec![unsafe { zeroed() }; count],
                cmsgs: vec![[0; 8]; count],
                // SAFETY: as above.
                msgs: vec![unsafe { zeroed() }; count],
            },
        }
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
        sock.bind(&local.into())?;
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
            gro,
            host_drops: std::cell::Cell::new(0),
            rcv_timeout: std::cell::Cell::new(None),
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

    /// Whether GRO is on.
    pub fn gro(&self) -> bool {
        self.gro
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
        let n = batch.bufs.len();
        batch.meta.clear();
        let sys = &mut batch.sys;
        for (iov, b) in sys.iovs.iter_mut().zip(batch.bufs.iter_mut()) {
            *iov = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
        }
        for (i, m) in sys.msgs.iter_mut().enumerate() {
            let h = &mut m.msg_hdr;
            h.msg_name = (&mut sys.addrs[i] as *mut RawAddr).cast();
            h.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
            h.msg_iov = &mut sys.iovs[i];
            h.msg_iovlen = 1;
            h.msg_flags = 0;
            if self.gro {
                h.msg_control = sys.cmsgs[i].as_mut_ptr().cast();
                h.msg_controllen = size_of::<[u64; 8]>();
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
        }
        let (msgs, addrs) = (&mut sys.msgs, &sys.addrs);
        // SAFETY: `msgs` holds `n` headers whose name, iovec and control pointers point into
        // `addrs`, `iovs`/`batch.bufs` and `cmsgs`, all alive and unmoved for this call, with
        // their true lengths; with MSG_DONTWAIT it does not block, with MSG_WAITFORONE it
        // blocks only until the first datagram or the socket's receive timeout.
        let r = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::Interrupted
                | io::ErrorKind::TimedOut => Ok(0),
                _ => Err(e),
            };
        }
        for (i, m) in msgs.iter().take(r as usize).enumerate() {
            let len = m.msg_len as usize;
            let Some(src) = from_raw(&addrs[i], m.msg_hdr.msg_namelen) else {
                continue;
            };
            let segment = if self.gro {
                gro_segment(&m.msg_hdr).unwrap_or(len)
            } else {
                len
            };
            batch.meta.push(RecvMeta {
                buf: i,
                src,
                len,
                segment,
            });
        }
        Ok(batch.meta.len())
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
        if pkts.is_empty() {
            return Ok(0);
        }
        let mut addrs: Vec<(RawAddr, libc::socklen_t)> =
            pkts.iter().map(|(a, _)| raw_addr(*a)).collect();
        // SAFETY: mmsghdr is plain C data; zero is a valid initial value.
        let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { zeroed() }; pkts.len()];
        for (i, m) in msgs.iter_mut().enumerate() {
            m.msg_hdr.msg_name = (&mut addrs[i].0 as *mut RawAddr).cast();
            m.msg_hdr.msg_namelen = addrs[i].1;
            // IoSlice is ABI-compatible with iovec; the kernel only reads the iovecs
            m.msg_hdr.msg_iov = pkts[i].1.as_ptr() as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = pkts[i].1.len();
        }
        // SAFETY: every header points at a live address and at the caller's live iovecs
        // over live slices; the kernel only reads them (the *mut casts are for the C type).
        let r = unsafe {
            libc::sendmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            // EPERM: a local firewall rule dropped the first datagram; it is gone, like a loss
            return self.send_error(1);
        }
        Ok(r as usize)
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
        let (mut addr, alen) = raw_addr(dst);
        let mut cmsg = [0u64; 4];
        // SAFETY: msghdr is plain C data.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = (&mut addr as *mut RawAddr).cast();
        h.msg_namelen = alen;
        h.msg_iov = parts.as_ptr() as *mut libc::iovec; // IoSlice is ABI-compatible with iovec
        h.msg_iovlen = parts.len();
        let space = unsafe_cmsg_space(size_of::<u16>());
        h.msg_control = cmsg.as_mut_ptr().cast();
        h.msg_controllen = space;
        // SAFETY: `h.msg_control` points at `cmsg` (32 bytes ≥ CMSG_SPACE(2)); CMSG_FIRSTHDR
        // returns a pointer into it, and we write a u16 into its data area, which fits.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            if c.is_null() {
                return Err(io::Error::other(
                    "no room for the UDP_SEGMENT control message",
                ));
            }
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), segment);
        }
        // SAFETY: `h` points at the address, the caller's iovecs and our control buffer,
        // all alive for the call; the kernel only reads them.
        let r = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &h, libc::MSG_DONTWAIT) };
        if r < 0 {
            return self.send_error(parts.iter().map(|p| p.len()).sum());
        }
        Ok(r as usize)
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

fn poll_fds(
    fds: &[std::os::fd::RawFd],
    events: libc::c_short,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds; `tsp` is null or points at `ts`,
    // alive for the call; a null signal mask leaves the mask unchanged.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

fn unsafe_cmsg_space(n: usize) -> usize {
    // SAFETY: CMSG_SPACE is a pure size computation.
    unsafe { libc::CMSG_SPACE(n as u32) as usize }
}

/// The `UDP_GRO` segment size from a received message's control data.
pub(crate) fn gro_segment(h: &libc::msghdr) -> Option<usize> {
    // SAFETY: `h` was filled by recvmmsg; CMSG_FIRSTHDR/NXTHDR walk only within
    // msg_control[..msg_controllen], and the data is read unaligned as the int GRO writes.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(v).ok().filter(|&v| v > 0);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
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

    #[test]
    fn batch_round_trip_over_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let data: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        let pkts: Vec<(SocketAddr, &[u8])> =
            data.iter().map(|d| (b.local_addr(), &d[..])).collect();
        assert_eq!(a.send_batch(&pkts).unwrap(), 10);
        let mut batch = RecvBatch::new(16, 2048);
        let mut got = Vec::new();
        for _ in 0..100 {
            if got.len() == 10 {
                break;
            }
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            b.recv_batch(&mut batch).unwrap();
            got.extend(batch.segments().map(|(s, d)| (s, d.to_vec())));
        }
        assert_eq!(got.len(), 10);
        for (i, (src, d)) in got.iter().enumerate() {
            assert_eq!(*src, a.local_addr());
            assert_eq!(d, &data[i]);
        }
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
        let mut batch = RecvBatch::new(8, 2048);
        let mut segs = Vec::new();
        for _ in 0..100 {
            if segs.len() == 3 {
                break;
            }
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            b.recv_batch(&mut batch).unwrap();
            segs.extend(batch.segments().map(|(_, d)| d.to_vec()));
        }
        assert_eq!(segs.len(), 3);
        let all: Vec<u8> = segs.concat();
        assert_eq!(all, [p1, p2, p3].concat());
        assert!(segs.iter().all(|s| s.len() == 300));
    }

    #[test]
    fn refuses_unspecified_bind() {
        assert!(UdpSocket::bind("0.0.0.0:0".parse().unwrap(), &UdpConfig::default()).is_err());
    }
}
