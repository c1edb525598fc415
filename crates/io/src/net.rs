//! Interface facts: the MAC address and the MTU of the interface that owns a local IP, a
//! neighbour's MAC, every interface's addresses.

use rocelink_wire::bytes::Mac;
use std::ffi::CStr;
use std::net::IpAddr;

/// The MTU of the interface that has `ip` (`SIOCGIFMTU`), if any has it.
pub fn mtu_for_ip(ip: IpAddr) -> Option<usize> {
    let (name, _) = interface_of(ip)?;
    let mut req: libc::ifreq = zeroed_ifreq();
    if name.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(&name) {
        *d = *s as libc::c_char;
    }
    let sock = std::net::UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name in `req` (zeroed past it) and
    // writes the MTU into its union; `req` lives across the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if rc != 0 {
        return None;
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds `ifru_mtu`.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).ok()
}

fn zeroed_ifreq() -> libc::ifreq {
    // SAFETY: `ifreq` is plain C data (a name array and a union of integers and
    // sockaddrs) for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

/// The MAC of the interface that has `ip`, if any (loopback: all zeros).
pub fn mac_for_ip(ip: IpAddr) -> Option<Mac> {
    interface_of(ip).map(|(_, mac)| mac)
}

/// The MAC of neighbour `ip` in the kernel's ARP table (`/proc/net/arp`, this thread's
/// network namespace), if resolved.
pub fn neighbour_mac(ip: std::net::Ipv4Addr) -> Option<[u8; 6]> {
    let table = std::fs::read_to_string("/proc/net/arp").ok()?;
    let want = ip.to_string();
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // IP address, HW type, Flags (0x2: complete), HW address, Mask, Device
        let flags = u32::from_str_radix(f.get(2)?.trim_start_matches("0x"), 16).ok()?;
        if f[0] != want || flags & 0x2 == 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        let mut parts = f.get(3)?.split(':');
        for b in &mut mac {
            *b = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        Some(mac)
    })
}

/// One address of a network interface (`getifaddrs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// The interface's name.
    pub name: String,
    /// The address.
    pub addr: IpAddr,
    /// Its netmask's length.
    pub prefix_len: u8,
    /// Whether the interface is up (`IFF_UP`).
    pub up: bool,
    /// Whether it is a loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
}

/// Every IPv4 and IPv6 address of every interface, in the kernel's order.
pub fn interface_addrs() -> Vec<InterfaceAddr> {
    let mut out = Vec::new();
    walk_ifaddrs(|name, flags, addr, mask| {
        if let (Some(SockAddr::Ip(addr)), Some(SockAddr::Ip(mask))) = (addr, mask) {
            let prefix_len = match mask {
                IpAddr::V4(m) => u32::from(m).count_ones(),
                IpAddr::V6(m) => u128::from(m).count_ones(),
            } as u8;
            out.push(InterfaceAddr {
                name: String::from_utf8_lossy(name).into_owned(),
                addr,
                prefix_len,
                up: flags & libc::IFF_UP as u32 != 0,
                loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
            });
        }
    });
    out
}

/// An interface address as `getifaddrs` gives it.
enum SockAddr {
    Ip(IpAddr),
    Mac(Mac),
}

/// Call `each(name, flags, address, netmask)` for every entry `getifaddrs` lists.
fn walk_ifaddrs(mut each: impl FnMut(&[u8], u32, Option<SockAddr>, Option<SockAddr>)) {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned; its name is a C string
        // and its address and netmask (when non-null) are sockaddrs of the family they
        // name, as the kernel wrote them.
        unsafe {
            let ifa = &*cur;
            let name = CStr::from_ptr(ifa.ifa_name).to_bytes();
            each(
                name,
                ifa.ifa_flags,
                sock_addr(ifa.ifa_addr),
                sock_addr(ifa.ifa_netmask),
            );
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
}

/// The address a `getifaddrs` sockaddr holds.
///
/// # Safety
/// `sa` is null or points at a sockaddr of the family it names (in, in6 or ll).
unsafe fn sock_addr(sa: *const libc::sockaddr) -> Option<SockAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-null, and of the family it names (the caller's promise).
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let a = &*(sa as *const libc::sockaddr_in);
                Some(SockAddr::Ip(IpAddr::from(a.sin_addr.s_addr.to_ne_bytes())))
            }
            libc::AF_INET6 => {
                let a = &*(sa as *const libc::sockaddr_in6);
                Some(SockAddr::Ip(IpAddr::from(a.sin6_addr.s6_addr)))
            }
            libc::AF_PACKET => {
                let a = &*(sa as *const libc::sockaddr_ll);
                (a.sll_halen == 6).then(|| SockAddr::Mac(Mac::from_bytes(&a.sll_addr[..6])))
            }
            _ => None,
        }
    }
}

/// The name of the interface that has `ip` and its MAC (loopback: all zeros).
fn interface_of(ip: IpAddr) -> Option<(Vec<u8>, Mac)> {
    let mut name_of_ip: Option<Vec<u8>> = None;
    let mut macs: Vec<(Vec<u8>, Mac)> = Vec::new();
    walk_ifaddrs(|name, _, addr, _| match addr {
        Some(SockAddr::Ip(a)) if a == ip => name_of_ip = Some(name.to_vec()),
        Some(SockAddr::Mac(m)) => macs.push((name.to_vec(), m)),
        _ => {}
    });
    // every address of 127.0.0.0/8 is local, on the loopback device, though only
    // 127.0.0.1 is listed
    let name = match (name_of_ip, ip) {
        (Some(n), _) => n,
        (None, IpAddr::V4(v4)) if v4.is_loopback() => b"lo".to_vec(),
        (None, _) => return None,
    };
    let mac = macs
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(Mac([0; 6]), |(_, m)| m);
    Some((name, mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_a_zero_mac_and_unknown_ips_none() {
        assert_eq!(mac_for_ip("127.0.0.1".parse().unwrap()), Some(Mac([0; 6])));
        assert_eq!(mac_for_ip("192.0.2.77".parse().unwrap()), None);
    }

    #[test]
    fn loopback_mtu_is_the_kernels() {
        // the kernel's own figure for lo, read the other way
        let sys: usize = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .map(|s| s.trim().parse().unwrap_or(0))
            .unwrap_or(0);
        let got = mtu_for_ip("127.0.0.1".parse().unwrap_or(IpAddr::from([127, 0, 0, 1])));
        if sys > 0 {
            assert_eq!(got, Some(sys));
        } else {
            assert!(got.is_some_and(|m| m >= 1280));
        }
        // every 127/8 address is lo's, though only 127.0.0.1 is listed
        assert_eq!(mtu_for_ip(IpAddr::from([127, 0, 0, 93])), got);
        // an address no interface has
        assert_eq!(mtu_for_ip(IpAddr::from([192, 0, 2, 77])), None);
    }
}
