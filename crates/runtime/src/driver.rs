//! Drives a sans-IO [`Endpoint`] over a [`UdpSocket`]: sends what it polls out in
//! `sendmmsg` batches, receives in `recvmmsg` batches (GRO super-datagrams split in place),
//! runs its timers, and optionally records every datagram to a pcap.

use rocelink_io::tap::Tap;
use rocelink_io::udp::{RecvBatch, UdpSocket};
use rocelink_transport::{Datagram, Endpoint, Gather, IcrcStatus};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Datagrams sent per `sendmmsg`.
const TX_BATCH: usize = 64;

/// Datagrams at the head of `p` that can go as one GSO super-datagram: same peer, same
/// size (the last may be shorter), at most 64 segments and 64 000 bytes.
fn gso_run(p: &[Pending]) -> usize {
    let Some(first) = p.first() else {
        return 0;
    };
    let seg = first.wire_len();
    let (mut n, mut total) = (1, seg);
    for q in &p[1..] {
        let l = q.wire_len();
        if n == 64 || q.dst != first.dst || l > seg || total + l > 64_000 || l == 0 {
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

/// A datagram waiting to be sent: headers (or all of it) in `buf`, the rest in a region.
#[derive(Debug)]
struct Pending {
    dst: SocketAddr,
    buf: Vec<u8>,
    gather: Option<Gather>,
}

impl Pending {
    fn wire_len(&self) -> usize {
        self.buf.len() + self.gather.map_or(0, |g| g.wire_len())
    }

    /// The datagram's pieces: `buf`, then the region slice and the tail.
    fn parts<'a>(&'a self, ep: &'a Endpoint) -> ([IoSlice<'a>; 3], usize) {
        let empty = IoSlice::new(&[]);
        match &self.gather {
            None => ([IoSlice::new(&self.buf), empty, empty], 1),
            Some(g) => {
                // the region was there when the packet was built and nothing ran since
                let body = ep
                    .mr(g.lkey)
                    .ok()
                    .and_then(|m| m.bytes().get(g.offset..g.offset + g.len))
                    .unwrap_or(&[]);
                (
                    [
                        IoSlice::new(&self.buf),
                        IoSlice::new(body),
                        IoSlice::new(&g.tail[..g.tail_len]),
                    ],
                    3,
                )
            }
        }
    }
}

/// Counters of the driver itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DriverStats {
    /// `recvmmsg` calls that returned data.
    pub rx_batches: u64,
    /// Segments handed to the endpoint.
    pub rx_segments: u64,
    /// `sendmmsg` / GSO `sendmsg` calls.
    pub tx_batches: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Times the socket buffer was full.
    pub tx_stalls: u64,
}

/// Runs an endpoint over a socket.
#[derive(Debug)]
pub struct Driver {
    sock: UdpSocket,
    batch: RecvBatch,
    pending: Vec<Pending>,
    spare: Vec<Vec<u8>>,
    tap: Option<Tap>,
    /// Segments of the current batch already handled (the rest wait for the next run).
    resume: usize,
    /// Send runs of equal-sized datagrams with UDP GSO.
    gso: bool,
    /// Counters.
    pub stats: DriverStats,
}

impl Driver {
    /// Wrap a bound socket (64 receive buffers; 64 KiB each with GRO).
    pub fn new(sock: UdpSocket) -> Driver {
        let size = if sock.gro() { 65_536 } else { 9_216 };
        Driver {
            sock,
            batch: RecvBatch::new(64, size),
            pending: Vec::new(),
            spare: Vec::new(),
            tap: None,
            resume: 0,
            gso: true,
            stats: DriverStats::default(),
        }
    }

    /// Record every datagram to `tap`.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// The socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Move the endpoint's pending datagrams to the socket. True when all went out.
    fn flush(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<bool> {
        let local_ip = self.sock.local_addr().ip();
        loop {
            while self.pending.len() < TX_BATCH {
                let mut buf = self.spare.pop().unwrap_or_default();
                match ep.poll_transmit_gather(now, &mut buf) {
                    Some(t) => {
                        buf.truncate(t.len);
                        let p = Pending {
                            dst: t.dst,
                            buf,
                            gather: t.gather,
                        };
                        if let Some(tap) = self.tap.as_mut() {
                            let (parts, n) = p.parts(ep);
                            let whole: Vec<u8> =
                                parts[..n].iter().flat_map(|s| s.iter()).copied().collect();
                            tap.record(SocketAddr::new(local_ip, t.src_port), t.dst, &whole, 0)?;
                        }
                        self.pending.push(p);
                    }
                    None => {
                        self.spare.push(buf);
                        break;
                    }
                }
            }
            if self.pending.is_empty() {
                return Ok(true);
            }
            let sent = self.send_pending(ep)?;
            self.stats.tx_datagrams += sent as u64;
            for p in self.pending.drain(..sent) {
                self.spare.push(p.buf);
            }
            if !self.pending.is_empty() {
                self.stats.tx_stalls += 1;
                return Ok(false);
            }
        }
    }

    /// Send `pending` in order: a run of datagrams to one peer of equal size (the last may
    /// be shorter) as one GSO super-datagram, the others with `sendmmsg`. Returns how many
    /// went out (fewer when the socket buffer is full).
    fn send_pending(&mut self, ep: &Endpoint) -> io::Result<usize> {
        let p = &self.pending;
        let mut done = 0;
        while done < p.len() {
            let run = if self.gso { gso_run(&p[done..]) } else { 1 };
            if run >= 2 {
                let mut parts: Vec<IoSlice<'_>> = Vec::with_capacity(3 * run);
                for q in &p[done..done + run] {
                    let (s, n) = q.parts(ep);
                    parts.extend_from_slice(&s[..n]);
                }
                match self
                    .sock
                    .send_gso(p[done].dst, &parts, p[done].wire_len() as u16)
                {
                    Ok(0) => return Ok(done),
                    Ok(_) => {
                        self.stats.tx_batches += 1;
                        done += run;
                    }
                    // the kernel or the device refuses segmentation: one datagram each
                    Err(_) => self.gso = false,
                }
                continue;
            }
            let mut end = done + 1;
            while end < p.len() && (!self.gso || gso_run(&p[end..]) < 2) {
                end += 1;
            }
            let pieces: Vec<([IoSlice<'_>; 3], usize)> =
                p[done..end].iter().map(|q| q.parts(ep)).collect();
            let refs: Vec<(SocketAddr, &[IoSlice<'_>])> = p[done..end]
                .iter()
                .zip(&pieces)
                .map(|(q, (s, n))| (q.dst, &s[..*n]))
                .collect();
            let sent = self.sock.send_batch_parts(&refs)?;
            self.stats.tx_batches += 1;
            done += sent;
            if sent < refs.len() {
                return Ok(done);
            }
        }
        Ok(done)
    }

    /// Send runs of equal-sized datagrams as GSO super-datagrams (on by default).
    pub fn set_gso(&mut self, on: bool) {
        self.gso = on;
    }

    /// Handle received datagrams, stopping right after one for which `done` holds (the
    /// rest of the batch is handled by the next call, before anything new is received).
    /// Returns (datagrams handled, whether `done` stopped it).
    fn receive(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        done: &mut dyn FnMut(&mut Endpoint) -> bool,
        wait: Option<Duration>,
    ) -> io::Result<(usize, bool)> {
        if self.resume == 0 {
            let n = match wait {
                Some(w) => self.sock.recv_batch_wait(&mut self.batch, w)?,
                None => self.sock.recv_batch(&mut self.batch)?,
            };
            if n == 0 {
                return Ok((0, false));
            }
            self.stats.rx_batches += 1;
        }
        let local = self.sock.local_addr();
        let mut handled = 0;
        let skip = self.resume;
        for (i, (src, seg)) in self.batch.segments().enumerate().skip(skip) {
            self.stats.rx_segments += 1;
            handled += 1;
            ep.handle_datagram(
                now,
                Datagram {
                    src,
                    dst: local,
                    ip_header: None,
                    payload: seg,
                },
            );
            each(ep);
            if let Some(tap) = self.tap.as_mut() {
                let id = match ep.last_icrc() {
                    Some(IcrcStatus::IdRecovered(id)) => id,
                    _ => 0,
                };
                tap.record(src, local, seg, id)?;
            }
            if done(ep) {
                self.resume = i + 1;
                return Ok((handled, true));
            }
        }
        self.resume = 0;
        Ok((handled, false))
    }

    /// Run until `done(ep)` holds or `deadline` passes. Returns whether `done` held.
    pub fn run(
        &mut self,
        ep: &mut Endpoint,
        deadline: Instant,
        done: impl FnMut(&mut Endpoint) -> bool,
    ) -> io::Result<bool> {
        self.run_each(ep, deadline, &mut |_| {}, done)
    }

    /// As [`Driver::run`], calling `each` right after every received datagram is handled
    /// (so events and completions can be taken in exact arrival order). `done` is also
    /// checked after each datagram: it returns right away, and the rest of the received
    /// batch is handled on the next run, before anything new is received.
    pub fn run_each(
        &mut self,
        ep: &mut Endpoint,
        deadline: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        mut done: impl FnMut(&mut Endpoint) -> bool,
    ) -> io::Result<bool> {
        loop {
            let now = Instant::now();
            ep.handle_timeout(now);
            let all_sent = self.flush(ep, now)?;
            if done(ep) {
                return Ok(true);
            }
            if now >= deadline {
                return Ok(false);
            }
            // with everything sent, sleep in the receive call itself until a datagram, the
            // next timer or the deadline (one system call); otherwise look without sleeping
            // and then wait briefly for room or data
            let wait = all_sent.then(|| {
                let mut wake = deadline;
                if let Some(t) = ep.poll_timeout() {
                    wake = wake.min(t);
                }
                wake.saturating_duration_since(now)
            });
            match self.receive(ep, now, each, &mut done, wait)? {
                (_, true) => return Ok(true),
                (n, false) if n > 0 => continue,
                _ => {}
            }
            if !all_sent {
                self.sock.wait_readable(Some(Duration::from_micros(200)))?;
            }
        }
    }
}
