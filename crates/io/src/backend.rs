//! The datagram backend every role runs over: batched receive into a [`RecvBatch`] and
//! batched gather send, with segmentation offload (UDP GSO) where the backend has it.
//! [`UdpSocket`] implements it; a raw-Ethernet/AF_XDP backend implements the same trait, so
//! the driver, the emulator and the benchmarks run over it unchanged.
//!
//! [`Transmitter`] is the one send loop: it sends datagrams in order, runs of equal-sized
//! ones to one peer as one segmented send, the rest batched — mixed in one call where the
//! backend can (a WRITE's first packet, the segmented rest, the next WRITE's…) — and falls
//! back for good to one datagram each if the backend refuses segmentation.
//!
//! ```no_run
//! use rocelink_io::backend::{Outgoing, Transmitter};
//! use rocelink_io::udp::{UdpConfig, UdpSocket};
//! # fn main() -> std::io::Result<()> {
//! let sock = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default())?;
//! let dst = "127.0.0.1:4791".parse().unwrap();
//! let (head, body) = ([0u8; 40], vec![7u8; 4096]);
//! let out: Vec<Outgoing<'_>> = (0..8).map(|_| Outgoing::new(dst, [&head, &body, &[]])).collect();
//! let mut tx = Transmitter::new(true);
//! let mut sent = 0;
//! while sent < out.len() {
//!     sent += tx.send(&sock, &out[sent..])?; // fewer when the socket buffer is full
//! }
//! # Ok(()) }
//! ```
//!
//! # The send loop and who uses it
//!
//! `rocelink_io::backend::Backend` is what every role's I/O goes through: `recv` into a
//! `RecvBatch` (optionally sleeping for the first datagram), `send` of `Outgoing` datagrams (up
//! to three pieces each: headers, a payload where it lies, pad+ICRC), `send_segmented` for a
//! run of equal-sized datagrams to one peer (UDP GSO; `Unsupported` where a backend has no
//! offload), `send_runs` for a mix of both in one call (a UDP socket: one `sendmmsg` whose
//! segmented entries carry their own `UDP_SEGMENT`), `wait_readable`/`wait_writable`.
//! `Transmitter` is the one send loop over it: runs in order, segmented where they qualify (at
//! most 64 datagrams / 64 000 bytes, or a smaller run limit for pacing), up to 64 groups — runs
//! and the datagrams between them — in one call where the backend takes them (a 64 KiB WRITE is
//! a first packet alone, with its RETH, and a run of the rest: several WRITEs now leave in one
//! system call instead of two each), segmentation switched off for good the first time the
//! backend refuses it. The runtime's `Driver<B: Backend>`, the emulator's data path and the
//! bench sender use it; the baselines (`sink`, `recv1`, the UDP ceiling) keep their raw socket
//! loops on purpose — they measure the kernel, not rocelink. `sink-ring` is the sink through
//! `io::scatter` with one slot per message at the next bytes of a ring as large as rocelink's:
//! the cost of landing in memory that is not in the cache, held apart from everything rocelink
//! checks.

use crate::udp::{Mixed, RecvBatch, UdpSocket};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::time::Duration;

/// One datagram to send: up to three pieces sent back to back (say headers, a payload left
/// where it is, pad and ICRC); empty pieces are skipped.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// Where to.
    pub dst: SocketAddr,
    /// Its bytes, in order.
    pub parts: [&'a [u8]; 3],
    /// The IP header's traffic class byte (DSCP << 2; RoCE v2 carries a service level
    /// there); 0 leaves the socket's own.
    pub tos: u8,
}

impl<'a> Outgoing<'a> {
    /// A datagram of `parts` to `dst`.
    pub fn new(dst: SocketAddr, parts: [&'a [u8]; 3]) -> Outgoing<'a> {
        Outgoing { dst, parts, tos: 0 }
    }

    /// The same, with traffic class byte `tos` in its IP header.
    pub fn with_tos(self, tos: u8) -> Outgoing<'a> {
        Outgoing { tos, ..self }
    }

    /// A datagram of one buffer.
    pub fn whole(dst: SocketAddr, bytes: &'a [u8]) -> Outgoing<'a> {
        Outgoing::new(dst, [bytes, &[], &[]])
    }

    /// Its length on the wire (the UDP payload).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slices(&self) -> impl Iterator<Item = IoSlice<'a>> + '_ {
        self.parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| IoSlice::new(p))
    }

    /// Its non-empty parts as I/O vectors, in place (no allocation): the array and how
    /// many of it are used.
    fn iovecs(&self) -> ([IoSlice<'a>; 3], usize) {
        let mut a = [IoSlice::new(&[]); 3];
        let mut n = 0;
        for s in self.slices() {
            a[n] = s;
            n += 1;
        }
        (a, n)
    }
}

/// What [`Backend::recv_lent`] calls on each datagram: (sender, IPv4 header as received if
/// the backend sees it, payload) → take more.
pub type LendFn<'a> = dyn FnMut(SocketAddr, Option<&[u8]>, &[u8]) -> bool + 'a;

/// A datagram I/O backend (see the module documentation).
pub trait Backend: std::fmt::Debug {
    /// The address datagrams are received at (and sent from).
    fn local_addr(&self) -> SocketAddr;

    /// Receive up to the batch's capacity; with `wait`, sleep up to about that long for
    /// the first datagram. Returns how many were received (0 when none came).
    fn recv(&self, batch: &mut RecvBatch, wait: Option<Duration>) -> io::Result<usize>;

    /// Receive without copying out: call `each(sender, IPv4 header as received, payload)`
    /// on up to `max` datagrams where they lie in the backend's own buffers, in arrival
    /// order, until it returns false (the datagram it was given counts as taken; the rest
    /// stay for the next call); with `wait`, sleep up to about that long for the first.
    /// Returns how many were taken. Backends that must copy datagrams out (a socket) return
    /// `Unsupported`, the default: use [`Backend::recv`].
    fn recv_lent(
        &self,
        max: usize,
        wait: Option<Duration>,
        each: &mut LendFn<'_>,
    ) -> io::Result<usize> {
        let _ = (max, wait, each);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Send each datagram of `out`, in order. Returns how many went out (fewer when the
    /// backend is full).
    fn send(&self, out: &[Outgoing<'_>]) -> io::Result<usize>;

    /// Send `out` — all to one peer, of equal length but the last, which may be shorter —
    /// as one segmented super-datagram. Returns how many bytes went out (0 when the backend
    /// is full). Backends without segmentation offload return `Unsupported`.
    fn send_segmented(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        let _ = out;
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Send `out` in order, grouped as `runs` says (counts of datagrams adding up to
    /// `out.len()`): a group of one is one datagram, a longer one a segmented
    /// super-datagram (one peer, equal lengths but the last, which may be shorter) — all in
    /// one call. Returns how many datagrams went out: whole groups, fewer when the backend
    /// is full. Backends that cannot return `Unsupported`, the default.
    fn send_runs(&self, out: &[Outgoing<'_>], runs: &[usize]) -> io::Result<usize> {
        let _ = (out, runs);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Wait until something can be received, or `timeout` passes. Returns whether it can.
    fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool>;

    /// Wait until there is room to send, or `timeout` passes. Returns whether there is.
    fn wait_writable(&self, timeout: Option<Duration>) -> io::Result<bool>;

    /// Datagrams the local host refused to send (a firewall rule), so far.
    fn host_drops(&self) -> u64 {
        0
    }

    /// The UDP socket underneath, for paths only a socket has (the scatter receive).
    fn as_udp(&self) -> Option<&UdpSocket> {
        None
    }

    /// Make the backend a ping-pong's where it can ([`UdpSocket::set_ping_pong`]: one
    /// datagram at a time each way, received and sent the cheapest way). Returns whether
    /// it did.
    fn set_ping_pong(&self) -> io::Result<bool> {
        Ok(false)
    }
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    fn local_addr(&self) -> SocketAddr {
        (**self).local_addr()
    }
    fn recv(&self, batch: &mut RecvBatch, wait: Option<Duration>) -> io::Result<usize> {
        (**self).recv(batch, wait)
    }
    fn recv_lent(
        &self,
        max: usize,
        wait: Option<Duration>,
        each: &mut LendFn<'_>,
    ) -> io::Result<usize> {
        (**self).recv_lent(max, wait, each)
    }
    fn send(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        (**self).send(out)
    }
    fn send_segmented(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        (**self).send_segmented(out)
    }
    fn send_runs(&self, out: &[Outgoing<'_>], runs: &[usize]) -> io::Result<usize> {
        (**self).send_runs(out, runs)
    }
    fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        (**self).wait_readable(timeout)
    }
    fn wait_writable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        (**self).wait_writable(timeout)
    }
    fn host_drops(&self) -> u64 {
        (**self).host_drops()
    }
    fn as_udp(&self) -> Option<&UdpSocket> {
        (**self).as_udp()
    }
    fn set_ping_pong(&self) -> io::Result<bool> {
        (**self).set_ping_pong()
    }
}

impl Backend for UdpSocket {
    fn local_addr(&self) -> SocketAddr {
        UdpSocket::local_addr(self)
    }

    fn recv(&self, batch: &mut RecvBatch, wait: Option<Duration>) -> io::Result<usize> {
        match wait {
            Some(w) => self.recv_batch_wait(batch, w),
            None => self.recv_batch(batch),
        }
    }

    fn send(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        if let [one] = out
            && one.tos == 0
        {
            // the common case of a request-response exchange: no allocation at all
            let (a, n) = one.iovecs();
            return self.send_parts(one.dst, &a[..n]);
        }
        // up to three slices each, in place: no allocation per datagram
        let parts: Vec<([IoSlice<'_>; 3], usize)> = out.iter().map(Outgoing::iovecs).collect();
        let msgs: Vec<Mixed<'_>> = out
            .iter()
            .zip(&parts)
            .map(|(o, (p, n))| Mixed {
                dst: o.dst,
                parts: &p[..*n],
                segment: None,
                tos: o.tos,
            })
            .collect();
        self.send_mixed(&msgs)
    }

    fn send_segmented(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        let Some(first) = out.first() else {
            return Ok(0);
        };
        let seg = u16::try_from(first.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        // a short run (an answer and an acknowledgement) gathers from the stack
        const SHORT: usize = 4;
        if out.len() <= SHORT {
            let mut a = [IoSlice::new(&[]); 3 * SHORT];
            let mut n = 0;
            for s in out.iter().flat_map(|o| o.slices()) {
                a[n] = s;
                n += 1;
            }
            return self.send_gso_tos(first.dst, &a[..n], seg, first.tos);
        }
        let parts: Vec<IoSlice<'_>> = out.iter().flat_map(|o| o.slices()).collect();
        self.send_gso_tos(first.dst, &parts, seg, first.tos)
    }

    fn send_runs(&self, out: &[Outgoing<'_>], runs: &[usize]) -> io::Result<usize> {
        let slices: Vec<IoSlice<'_>> = out.iter().flat_map(|o| o.slices()).collect();
        let mut msgs = Vec::with_capacity(runs.len());
        let (mut d, mut s) = (0, 0);
        for &n in runs {
            let group = out
                .get(d..d + n)
                .filter(|g| !g.is_empty())
                .ok_or(io::ErrorKind::InvalidInput)?;
            let k: usize = group.iter().map(|o| o.slices().count()).sum();
            let segment = if n >= 2 {
                Some(u16::try_from(group[0].len()).map_err(|_| io::ErrorKind::InvalidInput)?)
            } else {
                None
            };
            msgs.push(Mixed {
                dst: group[0].dst,
                parts: &slices[s..s + k],
                segment,
                tos: group[0].tos,
            });
            (d, s) = (d + n, s + k);
        }
        let sent = self.send_mixed(&msgs)?;
        Ok(runs[..sent].iter().sum())
    }

    fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        UdpSocket::wait_readable(self, timeout)
    }

    fn wait_writable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        UdpSocket::wait_writable(self, timeout)
    }

    fn host_drops(&self) -> u64 {
        UdpSocket::host_drops(self)
    }

    fn as_udp(&self) -> Option<&UdpSocket> {
        Some(self)
    }

    fn set_ping_pong(&self) -> io::Result<bool> {
        UdpSocket::set_ping_pong(self).map(|()| true)
    }
}

/// The most groups (segmented runs, datagrams alone) [`Transmitter`] sends in one call.
pub const MAX_GROUPS: usize = 64;

/// Sends datagrams over a [`Backend`] in order (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct Transmitter {
    segment: bool,
    /// Whether the backend sends mixed groups in one call (until it says it cannot).
    grouped: bool,
    /// Segment only towards this host's own addresses (see [`Transmitter::set_any_path`]).
    local_only: bool,
    /// The last destination looked at, and whether a run to it may be segmented.
    path: Option<(std::net::IpAddr, bool)>,
    max_run: usize,
    max_bytes: usize,
    /// Segmented sends made.
    pub segmented_sends: u64,
    /// Batched sends made.
    pub batched_sends: u64,
}

impl Transmitter {
    /// Segmented runs on (`segment`) or off; runs of at most 64 datagrams and 64 000 bytes.
    pub fn new(segment: bool) -> Transmitter {
        Transmitter {
            segment,
            grouped: true,
            local_only: true,
            path: None,
            max_run: 64,
            max_bytes: 64_000,
            segmented_sends: 0,
            batched_sends: 0,
        }
    }

    /// At most `n` datagrams per segmented run (at least 1).
    pub fn with_max_run(mut self, n: usize) -> Transmitter {
        self.max_run = n.max(1);
        self
    }

    /// Whether runs are still sent segmented (false once the backend refused).
    pub fn segmenting(&self) -> bool {
        self.segment
    }

    /// Turn segmented runs on or off.
    pub fn set_segmenting(&mut self, on: bool) {
        self.segment = on;
    }

    /// Segment runs to any destination (`true`), not only to this host's own addresses.
    ///
    /// The RoCE ICRC covers the IPv4 Identification. A super-datagram sent over loopback
    /// reaches the receiving socket whole, and every segment keeps ID 0; one that leaves
    /// through a device is split in software or by the NIC, which numbers the segments'
    /// IDs 0, 1, 2… — and every segment after the first then fails the peer's ICRC check
    /// (Linux rxe drops them silently). So by default only runs to a local address are
    /// segmented; turn this on only where the path is known to deliver super-datagrams
    /// unsegmented (a veth pair straight into the peer's socket).
    pub fn set_any_path(&mut self, on: bool) {
        self.local_only = !on;
        self.path = None;
    }

    /// Whether a run to `ip` may be segmented.
    fn path_allows(&mut self, ip: std::net::IpAddr) -> bool {
        if !self.local_only {
            return true;
        }
        match self.path {
            Some((p, ok)) if p == ip => ok,
            _ => {
                let ok = ip.is_loopback() || crate::net::mac_for_ip(ip).is_some();
                self.path = Some((ip, ok));
                ok
            }
        }
    }

    /// How many datagrams at the head of `out` go as one segmented send: same peer, same
    /// traffic class, same length (the last may be shorter), within the run limits.
    pub fn run_len(&self, out: &[Outgoing<'_>]) -> usize {
        let Some(first) = out.first() else {
            return 0;
        };
        let seg = first.len();
        let (mut n, mut total) = (1, seg);
        for o in &out[1..] {
            let l = o.len();
            if n == self.max_run
                || o.dst != first.dst
                || o.tos != first.tos
                || l > seg
                || l == 0
                || total + l > self.max_bytes
            {
                break;
            }
            n += 1;
            total += l;
            if l < seg {
                break;
            }
        }
        n
    }

    /// Send `out` in order. Returns how many went out: all, or fewer when the backend is
    /// full (send the rest later).
    pub fn send<B: Backend + ?Sized>(&mut self, b: &B, out: &[Outgoing<'_>]) -> io::Result<usize> {
        // one or two datagrams (a request-response exchange) take one call either way
        if self.segment && self.grouped && out.len() > 2 {
            match self.send_grouped(b, out) {
                Err(e) if e.kind() == io::ErrorKind::Unsupported => self.grouped = false,
                Err(_) if !self.segment => {} // the backend refused segmentation: go on without
                r => return r,
            }
        }
        self.send_each(b, out)
    }

    /// Send `out` as groups — each segmented run, each datagram between runs — up to
    /// [`MAX_GROUPS`] in one call of [`Backend::send_runs`].
    fn send_grouped<B: Backend + ?Sized>(
        &mut self,
        b: &B,
        out: &[Outgoing<'_>],
    ) -> io::Result<usize> {
        let mut runs = Vec::new();
        let mut done = 0;
        while done < out.len() {
            runs.clear();
            let mut end = done;
            while end < out.len() && runs.len() < MAX_GROUPS {
                let run = self.next_run(&out[end..]);
                runs.push(run);
                end += run;
            }
            let sent = match b.send_runs(&out[done..end], &runs) {
                Ok(n) => n,
                Err(e) => {
                    // an error comes only from the first group: if it was a segmented run,
                    // the backend refused segmentation; one datagram each from now on
                    if runs[0] >= 2 && e.kind() != io::ErrorKind::Unsupported {
                        self.segment = false;
                    }
                    return if done > 0 { Ok(done) } else { Err(e) };
                }
            };
            if runs.iter().any(|&n| n >= 2) {
                self.segmented_sends += 1;
            } else {
                self.batched_sends += 1;
            }
            done += sent;
            // fewer than asked: a full backend (the next call says 0), or a datagram a
            // local firewall refused after the first (the kernel stops there without a
            // word; the next call meets the refusal first and counts it): go on until a
            // call sends nothing
            if sent == 0 {
                return Ok(done);
            }
        }
        Ok(done)
    }

    /// How many datagrams at the head of `out` go as one send: a segmented run where
    /// segmenting is on and the path allows it, else one.
    fn next_run(&mut self, out: &[Outgoing<'_>]) -> usize {
        match out.first() {
            Some(o) if self.segment && self.path_allows(o.dst.ip()) => self.run_len(out),
            _ => 1,
        }
    }

    /// Send `out` a call per segmented run and a call per stretch of datagrams between.
    fn send_each<B: Backend + ?Sized>(&mut self, b: &B, out: &[Outgoing<'_>]) -> io::Result<usize> {
        let mut done = 0;
        while done < out.len() {
            let run = self.next_run(&out[done..]);
            if run >= 2 {
                match b.send_segmented(&out[done..done + run]) {
                    Ok(0) => return Ok(done),
                    Ok(_) => {
                        self.segmented_sends += 1;
                        done += run;
                    }
                    // no segmentation here: one datagram each from now on
                    Err(_) => self.segment = false,
                }
                continue;
            }
            // the datagrams up to the next segmentable run, batched
            let mut end = done + 1;
            while end < out.len() && self.next_run(&out[end..]) < 2 {
                end += 1;
            }
            let want = end - done;
            let sent = b.send(&out[done..end])?;
            self.batched_sends += 1;
            done += sent;
            if sent < want {
                return Ok(done);
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Records what it is asked to send; refuses segmentation or fills up on demand.
    #[derive(Default, Debug)]
    struct Fake {
        segments: bool,
        /// Sends mixed groups in one call.
        grouped: bool,
        /// The group (counted over all calls) a local firewall refuses, as the kernel
        /// does: a call stops before it, and the next, meeting it first, drops it.
        refuse: RefCell<Option<usize>>,
        /// Groups sent or dropped so far.
        groups_seen: RefCell<usize>,
        room: RefCell<usize>,
        log: RefCell<Vec<String>>,
    }

    impl Backend for Fake {
        fn local_addr(&self) -> SocketAddr {
            "127.0.0.1:1".parse().unwrap_or_else(|_| unreachable!())
        }
        fn recv(&self, _: &mut RecvBatch, _: Option<Duration>) -> io::Result<usize> {
            Ok(0)
        }
        fn send(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
            let mut room = self.room.borrow_mut();
            let n = out.len().min(*room);
            *room -= n;
            for o in &out[..n] {
                self.log.borrow_mut().push(format!("one {}", o.len()));
            }
            Ok(n)
        }
        fn send_segmented(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
            if !self.segments {
                return Err(io::ErrorKind::Unsupported.into());
            }
            let mut room = self.room.borrow_mut();
            if *room < out.len() {
                return Ok(0);
            }
            *room -= out.len();
            let lens: Vec<String> = out.iter().map(|o| o.len().to_string()).collect();
            self.log
                .borrow_mut()
                .push(format!("run {}", lens.join(",")));
            Ok(out.iter().map(Outgoing::len).sum())
        }
        fn send_runs(&self, out: &[Outgoing<'_>], runs: &[usize]) -> io::Result<usize> {
            if !self.grouped {
                return Err(io::ErrorKind::Unsupported.into());
            }
            if !self.segments && runs[0] >= 2 {
                // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
                return Err(io::Error::other("segmentation refused"));
            }
            let mut room = self.room.borrow_mut();
            let (mut d, mut groups) = (0, Vec::new());
            for (j, &n) in runs.iter().enumerate() {
                let mut refuse = self.refuse.borrow_mut();
                if *refuse == Some(*self.groups_seen.borrow()) {
                    if j > 0 {
                        break;
                    }
                    // refused first: gone, like a loss, and counted as sent
                    *refuse = None;
                    *self.groups_seen.borrow_mut() += 1;
                    self.log.borrow_mut().push(format!("drop {}", out[0].len()));
                    return Ok(n);
                }
                if *room < n {
                    break;
                }
                *room -= n;
                *self.groups_seen.borrow_mut() += 1;
                let lens: Vec<String> = out[d..d + n].iter().map(|o| o.len().to_string()).collect();
                groups.push(lens.join(","));
                d += n;
            }
            if !groups.is_empty() {
                let line = format!("call {}", groups.join(" | "));
                self.log.borrow_mut().push(line);
            }
            Ok(d)
        }
        fn wait_readable(&self, _: Option<Duration>) -> io::Result<bool> {
            Ok(false)
        }
        fn wait_writable(&self, _: Option<Duration>) -> io::Result<bool> {
            Ok(true)
        }
    }

    fn addr(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    #[test]
    fn runs_leaving_the_host_are_not_segmented_unless_asked() {
        let big = [1u8; 1000];
        // TEST-NET-1: no interface of this host has it
        let far = SocketAddr::from(([192, 0, 2, 9], 4791));
        let out: Vec<Outgoing<'_>> = (0..3).map(|_| Outgoing::whole(far, &big)).collect();
        let fake = Fake {
            segments: true,
            room: RefCell::new(100),
            ..Fake::default()
        };
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 3);
        assert_eq!(*fake.log.borrow(), ["one 1000", "one 1000", "one 1000"]);
        fake.log.borrow_mut().clear();
        tx.set_any_path(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 3);
        assert_eq!(*fake.log.borrow(), ["run 1000,1000,1000"]);
    }

    /// A datagram alone, a run of three (one gathered from two parts, a shorter last), one
    /// more to the same peer, one to another.
    fn mixed<'a>(big: &'a [u8; 1000], small: &'a [u8; 10]) -> [Outgoing<'a>; 6] {
        [
            Outgoing::whole(addr(1), small),
            Outgoing::new(addr(2), [&big[..100], &big[..900], &[]]),
            Outgoing::whole(addr(2), big),
            Outgoing::whole(addr(2), &big[..400]), // shorter: ends the run
            Outgoing::whole(addr(2), big),
            Outgoing::whole(addr(3), big),
        ]
    }

    #[test]
    fn runs_go_segmented_in_order_and_the_rest_batched() {
        let (big, small) = ([1u8; 1000], [2u8; 10]);
        let out = mixed(&big, &small);
        let fake = Fake {
            segments: true,
            room: RefCell::new(100),
            ..Fake::default()
        };
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 6);
        assert_eq!(
            *fake.log.borrow(),
            ["one 10", "run 1000,1000,400", "one 1000", "one 1000"]
        );
    }

    #[test]
    fn groups_go_in_one_call_where_the_backend_can_and_a_full_one_stops_at_a_group() {
        let (big, small) = ([1u8; 1000], [2u8; 10]);
        let out = mixed(&big, &small);
        let fake = Fake {
            segments: true,
            grouped: true,
            room: RefCell::new(100),
            ..Fake::default()
        };
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 6);
        assert_eq!(
            *fake.log.borrow(),
            ["call 10 | 1000,1000,400 | 1000 | 1000"]
        );
        // room for three datagrams: the first group and not the run, which goes whole later
        fake.log.borrow_mut().clear();
        *fake.room.borrow_mut() = 3;
        assert_eq!(tx.send(&fake, &out).unwrap(), 1);
        *fake.room.borrow_mut() = 100;
        assert_eq!(tx.send(&fake, &out[1..]).unwrap(), 5);
        assert_eq!(
            *fake.log.borrow(),
            ["call 10", "call 1000,1000,400 | 1000 | 1000"]
        );
    }

    #[test]
    fn a_datagram_a_firewall_refuses_is_dropped_without_stalling_the_rest() {
        let (big, small) = ([1u8; 1000], [2u8; 10]);
        let out = mixed(&big, &small);
        let fake = Fake {
            segments: true,
            grouped: true,
            room: RefCell::new(100),
            refuse: RefCell::new(Some(2)),
            ..Fake::default()
        };
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 6, "all of it, in one send");
        assert_eq!(
            *fake.log.borrow(),
            ["call 10 | 1000,1000,400", "drop 1000", "call 1000"]
        );
    }

    #[test]
    fn a_refused_segmentation_falls_back_for_good_and_a_full_backend_stops_early() {
        let b = [0u8; 500];
        let out: Vec<Outgoing<'_>> = (0..5).map(|_| Outgoing::whole(addr(9), &b)).collect();
        let fake = Fake {
            segments: false,
            grouped: true,
            room: RefCell::new(3),
            ..Fake::default()
        };
        let mut tx = Transmitter::new(true);
        assert_eq!(tx.send(&fake, &out).unwrap(), 3, "room for three");
        assert!(!tx.segmenting());
        *fake.room.borrow_mut() = 10;
        assert_eq!(tx.send(&fake, &out[3..]).unwrap(), 2);
        assert_eq!(fake.log.borrow().len(), 5);
        assert!(fake.log.borrow().iter().all(|l| l == "one 500"));
    }

    #[test]
    fn run_limits() {
        let b = [0u8; 30_000];
        let out: Vec<Outgoing<'_>> = (0..5).map(|_| Outgoing::whole(addr(9), &b)).collect();
        let tx = Transmitter::new(true);
        assert_eq!(tx.run_len(&out), 2, "64 000 bytes at most");
        let small = [0u8; 10];
        let out: Vec<Outgoing<'_>> = (0..9).map(|_| Outgoing::whole(addr(9), &small)).collect();
        assert_eq!(tx.with_max_run(4).run_len(&out), 4);
        assert_eq!(tx.run_len(&[]), 0);
    }
}
