//! Interface facts: the MAC address and the MTU of the interface that owns a local IP.

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

/// An address prefix: `ADDR` (a single host) or `ADDR/LEN` (as text in a configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// Every address (`any`).
    pub const ANY_V4: Prefix = Prefix {
        addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        len: 0,
    };

    /// Loopback: 127.0.0.0/8 and ::1.
    pub fn loopback() -> [Prefix; 2] {
        [
            Prefix {
                addr: IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
                len: 8,
            },
            Prefix {
                addr: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                len: 128,
            },
        ]
    }

    /// `addr/len`, if `len` fits the family (masked to the prefix).
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Prefix { addr, len })
    }

    /// Just `ip`.
    pub fn host(ip: IpAddr) -> Prefix {
        Prefix {
            addr: ip,
            len: if ip.is_ipv4() { 32 } else { 128 },
        }
    }

    /// Whether `ip` is in it (an IPv4 prefix holds no IPv6 address and the other way).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        if s == "any" {
            return Ok(Prefix::ANY_V4);
        }
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{s:?}: an address is IP, IP/PREFIX or any"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("{s:?}: a prefix length is 0 to {max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Prefix, String> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len == 0 {
            return write!(f, "any");
        }
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The subnet of the interface address `ip` (its netmask as a prefix), if a local
/// interface has it (loopback: 127.0.0.0/8).
pub fn subnet_of(ip: IpAddr) -> Option<Prefix> {
    if ip.is_loopback() {
        return Prefix::loopback().into_iter().find(|p| p.contains(ip));
    }
    interface_addrs()
        .into_iter()
        .find(|a| a.addr == ip)
        .and_then(|a| Prefix::new(ip, a.prefix_len))
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

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it; the call
    // passes its exact size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Pin every thread of process `pid` that exists now (and those it starts later) to `cpu`.
pub fn pin_process(pid: u32, cpu: usize) -> std::io::Result<()> {
    // the main thread first: a thread it makes from now on inherits the pin; then every
    // thread it already made
    pin_task(pid, cpu)?;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                // a thread that ended meanwhile is not an error
                let _ = pin_task(tid, cpu);
            }
        }
    }
    Ok(())
}

/// Pin one thread (a task id) to `cpu`.
fn pin_task(tid: u32, cpu: usize) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(tid)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: as in pin_current_thread; sched_setaffinity only reads the set, and an
    // unknown pid is an error (ESRCH), not undefined behaviour.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPU time the calling thread has used, split as the kernel accounts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// In user space.
    pub user: std::time::Duration,
    /// In the kernel on the thread's behalf (system calls, the copies they make).
    pub system: std::time::Duration,
}

impl CpuTime {
    /// User plus system.
    pub fn total(self) -> std::time::Duration {
        self.user + self.system
    }
}

impl std::ops::Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, o: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(o.user),
            system: self.system.saturating_sub(o.system),
        }
    }
}

/// CPU time (user and system) the calling thread has used.
pub fn thread_cpu() -> CpuTime {
    // SAFETY: getrusage writes one rusage struct, which `ru` is.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    CpuTime {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    }
}

/// CPU time (user + system) the calling thread has used.
pub fn thread_cpu_time() -> std::time::Duration {
    thread_cpu().total()
}

/// Move the calling thread into network namespace `name` (as `ip netns exec` would, for
/// one thread: `/var/run/netns/NAME`). Needs CAP_SYS_ADMIN.
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    let path = format!("/var/run/netns/{name}");
    let f = std::fs::File::open(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
    crate::sys::setns_net(std::os::fd::AsRawFd::as_raw_fd(&f))
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot enter namespace {name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_a_process_pins_the_threads_it_already_has() {
        // a process whose second thread exists before the pin
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import threading,time; threading.Thread(target=time.sleep,args=(5,)).start(); time.sleep(5)",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        let tasks = || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
        let t0 = std::time::Instant::now();
        while tasks() < 2 && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(tasks() >= 2, "the child has two threads");
        pin_process(pid, 0).unwrap();
        let allowed: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .map(|t| {
                let s = std::fs::read_to_string(t.path().join("status")).unwrap();
                let l = s
                    .lines()
                    .find(|l| l.starts_with("Cpus_allowed_list:"))
                    .unwrap();
                l.split_whitespace().nth(1).unwrap().to_string()
            })
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            allowed.len() >= 2 && allowed.iter().all(|a| a == "0"),
            "{allowed:?}"
        );
    }

    #[test]
    fn a_busy_thread_accounts_user_time() {
        let t0 = thread_cpu();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        // bounded: at most 2 s of spinning, stopped as soon as the kernel has accounted a tick
        while start.elapsed() < std::time::Duration::from_secs(2) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            if (thread_cpu() - t0).user > std::time::Duration::ZERO {
                break;
            }
        }
        std::hint::black_box(x);
        let d = thread_cpu() - t0;
        assert!(d.user > std::time::Duration::ZERO, "{d:?}");
        assert_eq!(d.total(), d.user + d.system);
    }

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
