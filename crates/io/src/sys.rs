//! The libc plumbing of the socket code in one place: socket addresses to and from their C
//! form, integer socket options, `ppoll`, the `UDP_GRO` control message, and the one
//! `recvmmsg` call that both the batch receive ([`crate::udp::RecvBatch`]) and the scatter
//! receive ([`crate::scatter::ScatterRx`]) go through. Each `unsafe` block says why it is
//! sound.

use socket2::Socket;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Storage for one socket address in `msghdr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    storage: libc::sockaddr_storage,
}

impl RawAddr {
    /// All zero (no address).
    pub(crate) fn zeroed() -> RawAddr {
        // SAFETY: every field of these C structs is an integer or an array of integers, for
        // which all-zero bytes are a valid value.
        unsafe { zeroed() }
    }
}

/// `a` in its C form, and that form's length.
pub(crate) fn raw_addr(a: SocketAddr) -> (RawAddr, libc::socklen_t) {
    let mut r = RawAddr::zeroed();
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

/// A kernel-written address of `len` bytes as a std address.
pub(crate) fn from_raw(r: &RawAddr, len: libc::socklen_t) -> Option<SocketAddr> {
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

/// Set an integer socket option.
pub(crate) fn setsockopt_int(
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

/// Read an integer socket option.
pub(crate) fn getsockopt_int(
    sock: &Socket,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
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

/// Wait until one of `fds` has one of `events`, or `timeout` passes (`None`: forever).
/// Returns whether any has; an interrupted wait counts as none.
pub(crate) fn poll_fds(
    fds: &[RawFd],
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

/// Bytes of control buffer for one control message of `n` data bytes.
pub(crate) fn cmsg_space(n: usize) -> usize {
    // SAFETY: CMSG_SPACE is a pure size computation.
    unsafe { libc::CMSG_SPACE(n as u32) as usize }
}

/// The `UDP_GRO` segment size from a received message's control data.
fn gro_segment(h: &libc::msghdr) -> Option<usize> {
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

/// One message of the last [`MmsgRecv::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// Sender (`None` if the kernel gave an address family we do not read).
    pub(crate) src: Option<SocketAddr>,
    /// Bytes received.
    pub(crate) len: usize,
    /// The `UDP_GRO` segment size, if the kernel coalesced segments.
    pub(crate) segment: Option<usize>,
    /// The datagram was longer than the message's iovecs; the rest was discarded.
    pub(crate) truncated: bool,
}

/// The C side of `recvmmsg` for up to `cap` messages — headers, sender address storage,
/// control buffers — kept between calls so a receive allocates and clears nothing.
pub(crate) struct MmsgRecv {
    msgs: Vec<libc::mmsghdr>,
    addrs: Vec<RawAddr>,
    cmsgs: Vec<[u64; 8]>,
    got: usize,
}

// SAFETY: the raw pointers in `msgs` are written at the start of each receive and used only
// inside it, while what they point at is borrowed; between calls they are never
// dereferenced, so moving the value to another thread cannot make anything unsound.
unsafe impl Send for MmsgRecv {}

impl std::fmt::Debug for MmsgRecv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmsgRecv")
            .field("cap", &self.msgs.len())
            .field("got", &self.got)
            .finish()
    }
}

impl MmsgRecv {
    /// State for up to `cap` messages per call.
    pub(crate) fn new(cap: usize) -> MmsgRecv {
        MmsgRecv {
            // SAFETY: mmsghdr is integers and pointers; all-zero is a valid value.
            msgs: vec![unsafe { zeroed() }; cap],
            addrs: vec![RawAddr::zeroed(); cap],
            cmsgs: vec![[0; 8]; cap],
            got: 0,
        }
    }

    /// One `recvmmsg` on `fd`: message `m` is received into `iovs[groups[m]]` (at most
    /// as many messages as it was made for), with `UDP_GRO` control data when `gro`. `flags`:
    /// `MSG_DONTWAIT`, or `MSG_WAITFORONE` to sleep until the first datagram or the
    /// socket's receive timeout. Returns how many messages arrived (an empty, interrupted or
    /// timed-out receive is 0); [`MmsgRecv::received`] describes each.
    ///
    /// # Safety
    /// Every iovec in `iovs[groups[m]]` must point at memory valid for writes of its length
    /// that nothing else reads or writes until this returns, and the groups must lie within
    /// `iovs`.
    pub(crate) unsafe fn recv(
        &mut self,
        fd: RawFd,
        iovs: &mut [libc::iovec],
        groups: &[Range<usize>],
        gro: bool,
        flags: libc::c_int,
    ) -> io::Result<usize> {
        self.got = 0;
        let n = groups.len().min(self.msgs.len());
        for (m, g) in groups.iter().take(n).enumerate() {
            if g.start > g.end || g.end > iovs.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "recvmmsg: a message's iovecs lie outside the list",
                ));
            }
            let h = &mut self.msgs[m].msg_hdr;
            h.msg_name = (&mut self.addrs[m] as *mut RawAddr).cast();
            h.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
            // SAFETY: g.start ≤ iovs.len() (checked above): in bounds or one past the end.
            h.msg_iov = unsafe { iovs.as_mut_ptr().add(g.start) };
            h.msg_iovlen = g.end - g.start;
            h.msg_flags = 0;
            if gro {
                h.msg_control = self.cmsgs[m].as_mut_ptr().cast();
                h.msg_controllen = size_of::<[u64; 8]>();
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
        }
        if n == 1 {
            return self.recv_one(fd, flags);
        }
        // SAFETY: headers 0..n point at live address storage and control buffers owned by
        // `self` and at iovecs in `iovs`, whose targets the caller guarantees writable and
        // unaliased for the call; the lengths are the true ones. MSG_DONTWAIT does not
        // block; MSG_WAITFORONE blocks until the first datagram or the receive timeout.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                n as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return nothing_received();
        }
        self.got = r as usize;
        Ok(self.got)
    }

    /// One message, header 0 set up by [`MmsgRecv::recv`]: a plain `recvmsg`, which the
    /// kernel enters with less work than `recvmmsg` (a polling ping-pong asks for one
    /// datagram at a time, most often finding none). Blocking (without `MSG_DONTWAIT`) it
    /// waits for the datagram or the receive timeout, as `MSG_WAITFORONE` does.
    fn recv_one(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<usize> {
        let h = &mut self.msgs[0];
        // SAFETY: header 0 points at live address storage and a control buffer owned by
        // `self` and at iovecs the caller of `recv` guarantees writable and unaliased for
        // the call (set up just before); the lengths are the true ones.
        let r = unsafe { libc::recvmsg(fd, &mut h.msg_hdr, flags & !libc::MSG_WAITFORONE) };
        if r < 0 {
            return nothing_received();
        }
        h.msg_len = r as libc::c_uint;
        self.got = 1;
        Ok(1)
    }

    /// Message `m` (< what the last receive returned).
    pub(crate) fn received(&self, m: usize) -> Option<Received> {
        if m >= self.got {
            return None;
        }
        let h = &self.msgs[m].msg_hdr;
        Some(Received {
            src: from_raw(&self.addrs[m], h.msg_namelen),
            len: self.msgs[m].msg_len as usize,
            segment: if h.msg_controllen > 0 && !h.msg_control.is_null() {
                gro_segment(h)
            } else {
                None
            },
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
        })
    }
}

/// The `bpf(2)` system call with a `union bpf_attr` laid out in `attr` (zero where unused;
/// 128 bytes cover every command used here). Returns the call's non-negative result.
pub(crate) fn bpf(cmd: u32, attr: &mut [u8; 128]) -> io::Result<i32> {
    // SAFETY: `attr` is a live, writable 128-byte buffer for the whole call, and the size
    // passed is its length, so the kernel reads and writes only inside it; pointers inside
    // the attribute (instructions, license, log buffer) are the caller's, which keeps them
    // alive across this call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr.as_mut_ptr(),
            attr.len() as libc::c_long,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as i32)
}

/// The index of interface `name`, if it exists.
pub(crate) fn if_index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string alive for the call; the function only reads it.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// [`bpf`] for a command that returns a new file descriptor (a map, a program, a link),
/// owned from here on.
pub(crate) fn bpf_fd(cmd: u32, attr: &mut [u8; 128]) -> io::Result<std::os::fd::OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: these commands return a new descriptor that nothing else owns.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &v, sizeof v)` for a plain C value `v`.
pub(crate) fn setsockopt_raw<T>(fd: RawFd, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of exactly the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt(fd, level, name, &v, sizeof v)` into a plain C value `v` (an integer or a
/// `repr(C)` struct of integers, for which any bytes the kernel writes are valid).
pub(crate) fn getsockopt_raw<T>(fd: RawFd, level: i32, name: i32, v: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`, which is that large, and every
    // bit pattern is a valid value of the integer types these structs hold.
    let r = unsafe { libc::getsockopt(fd, level, name, (v as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `bind(fd, &addr, sizeof addr)` for a socket address of another family (AF_XDP).
pub(crate) fn bind_raw<T>(fd: RawFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` is a live `repr(C)` sockaddr of exactly the size passed; the kernel
    // only reads it.
    let r = unsafe {
        libc::bind(
            fd,
            (addr as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`: the AF_XDP transmit kick.
pub(crate) fn send_empty(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send from a null buffer to no address; the kernel reads nothing.
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The hardware address of interface `name` (`SIOCGIFHWADDR`), in the calling thread's
/// network namespace.
pub(crate) fn if_hwaddr(name: &str) -> io::Result<[u8; 6]> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is too long"),
        ));
    }
    let sock = Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // SAFETY: ifreq is plain data, for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the NUL-terminated name (shorter than IFNAMSIZ, the rest
    // zero) and writes a sockaddr into the union of `req`, which is live and large enough.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call succeeded, so the union holds the hardware address.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(mac)
}

/// The channels of interface `name` as `ethtool -l` shows them (`SIOCETHTOOL`,
/// `ETHTOOL_GCHANNELS`): (receive, transmit, combined), in this thread's namespace.
pub(crate) fn if_channels(name: &str) -> io::Result<(u32, u32, u32)> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let sock = Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // struct ethtool_channels: cmd, four maxima, then rx, tx, other, combined counts
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    // SAFETY: ifreq is plain data, for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = ch.as_mut_ptr().cast();
    // SAFETY: SIOCETHTOOL reads the NUL-terminated name and, for ETHTOOL_GCHANNELS, writes
    // a struct ethtool_channels (nine u32) through ifru_data, which points at `ch`, live
    // and that large, for the duration of the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ch[5], ch[6], ch[8]))
}

/// Move the calling thread into the network namespace open at `fd` (`setns`).
pub(crate) fn setns_net(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns with a descriptor the caller keeps open for the call; it changes only
    // this thread's network namespace.
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A non-blocking AF_PACKET raw socket for `ethertype`, bound to interface `ifindex`.
pub(crate) fn packet_socket(ethertype: u16, ifindex: u32) -> io::Result<Socket> {
    // SAFETY: socket(2) with constant arguments; the result is checked and owned below.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            i32::from(ethertype.to_be()),
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor nothing else owns.
    let sock =
        Socket::from(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ethertype.to_be();
    sll.sll_ifindex = ifindex as i32;
    bind_raw(std::os::fd::AsRawFd::as_raw_fd(&sock), &sll)?;
    Ok(sock)
}

/// `recvfrom(fd, buf, MSG_DONTWAIT | MSG_TRUNC)` on an AF_PACKET socket: the frame's
/// whole length (even when `buf` held only its start) and its packet type
/// (`PACKET_HOST`, `PACKET_OUTGOING`, …).
pub(crate) fn recv_packet(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, u8)> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `buf` is a live, writable buffer of the length passed; `sll` and `len` are
    // live and `len` holds the size of `sll`.
    let r = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            (&mut sll as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r as usize, sll.sll_pkttype))
}

/// The outcome of a receive call that failed (`errno` set): `Ok(0)` when nothing was
/// there or the call was interrupted or timed out; else the error.
pub(crate) fn nothing_received() -> io::Result<usize> {
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut => Ok(0),
        _ => Err(e),
    }
}
