//! Drives a sans-IO [`Endpoint`] over a [`Backend`] (a [`UdpSocket`] unless told
//! otherwise): sends what it polls out through the backend's [`Transmitter`] (segmented
//! runs, batches), receives in batches (GRO super-datagrams split in place), runs its
//! timers, and optionally records every datagram to a pcap.
//!
//! # Transmit and wait
//!
//! - Runs of datagrams to one peer of equal size (the last may be shorter) leave as GSO
//!   entries of one `sendmmsg` with the datagrams between them; a refused GSO send switches
//!   the driver to plain `sendmmsg` (the `Transmitter`).
//! - Payloads of 512 bytes and more — a request's, a READ response's — are sent from where
//!   they lie in their region (header | region slice | pad+ICRC I/O vectors), not copied into
//!   a packet buffer first.
//! - The ICRC's IP and UDP part (what the kernel will build) is hashed once per flow and
//!   datagram length and kept (`transport::prefix`), on the send side as on the receive side;
//!   the requester finds the next packet to send without walking past the messages already
//!   sent (`requester::queue`).
//! - With nothing left to send, the driver (and the HSB fast path) sleeps inside
//!   `recvmmsg(MSG_WAITFORONE)` with `SO_RCVTIMEO` (re-armed only when the wanted timeout
//!   changes by more than 4×) instead of `ppoll` + `recvmmsg`; the socket is blocking and every
//!   other call passes `MSG_DONTWAIT`.
//! - Every role's RoCE socket (`bind_roce`) asks for `UDP_GRO`: a peer's segmented run arrives
//!   as one message, split in place by the driver, instead of being segmented again on
//!   delivery and woken for packet by packet. A kernel peer's packets (rxe) coalesce too; their
//!   IPv4 IDs were never visible to a socket, and the ICRC policy recovers them as before.
//! - `Driver::set_spin(d)` keeps the driver polling for `d` after the last datagram before it
//!   sleeps. `rocelink perf` sets 1 ms, as perftest polls its completion queue: a sender then
//!   does not pay a wake-up (an inter-processor interrupt on a VM) per message. Other roles
//!   sleep at once; a camera or an IMS unit must not keep a core busy between frames. Every
//!   datagram opens the window, also the one that ends a run (a ping-pong's answer); while
//!   nothing can change but an arrival (all sent, no completion from sending) the driver polls
//!   the socket alone until a datagram, the next timer, the deadline or the window's end.
//! - `recvmmsg` asks for one datagram after a call that found the queue empty, for as many as
//!   the last call found otherwise, and for eight times as many (up to the batch) after a call
//!   that filled its ask: a polled ping-pong's answer is taken alone (the kernel does not look
//!   for a second message, and the peer's acknowledgement is not handled before the answer),
//!   and a stream is back to full batches after two calls.
//! - A latency test's socket is a ping-pong's (`UdpSocket::set_ping_pong`): GRO off, a
//!   one-datagram ask is a plain `recvfrom`, a datagram of at most 512 bytes is copied into
//!   one buffer and sent with a plain `sendto` (no message header for the kernel to read),
//!   about half a microsecond less per hop on loopback. It stays unconnected: a connected
//!   socket would skip the route lookup (about 0.6 µs more), but Linux numbers a connected
//!   socket's IPv4 datagrams, and the ICRC covers the Identification that rocelink computes
//!   as 0; it also stays open to every sender, the endpoint checking each.
//! - Within a QP a ready request goes ahead of a ready response, unless a response was passed
//!   over once already (then it goes next): a reply the application posted leaves ahead of the
//!   ACK of what it answers — as two datagrams of one `sendmmsg`, never one segmented run
//!   (the ACK is short enough to end one), so the peer receives the reply alone and answers
//!   before it handles the ACK — and under a stream of requests the two alternate, so neither
//!   starves.
//! - Transmit without staging: `Endpoint::poll_transmit_gather` leaves a request's payload (512
//!   bytes or more; smaller ones are cheaper copied) in its region and returns where it is; the
//!   driver sends header | region slice | pad+ICRC as iovecs. The emulator does the same with
//!   frame-buffer slices (`Packetizer::push_from`). Both are tested byte-for-byte against the
//!   staged packets.
//! - `Mtu::Jumbo(n)` is outside InfiniBand: HSB devices on jumbo-frame links send up to
//!   `(MTU − 74) / 128` pages per packet, so the HSB receiver's UC QP accepts any size the
//!   region bounds allow.

use crate::counters::{Board, Link};
use crate::landing::{LandingRx, LandingStats, Plan};
use rocelink_io::backend::{Backend, Outgoing, Transmitter};
use rocelink_io::tap::Tap;
use rocelink_io::udp::{RecvBatch, UdpSocket};
use rocelink_transport::{Datagram, Endpoint, Gather, IcrcStatus};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Datagrams taken from the endpoint per send.
const TX_BATCH: usize = 64;

/// A datagram waiting to be sent: headers (or all of it) in `buf`, the rest in a region.
#[derive(Debug)]
struct Pending {
    dst: SocketAddr,
    /// An acknowledgement or READ response (see [`Driver::send_pending`]).
    response: bool,
    /// Its QP's traffic class: the IP header's TOS byte.
    tos: u8,
    buf: Vec<u8>,
    gather: Option<Gather>,
}

impl Pending {
    /// The datagram: `buf`, then the region slice and the tail.
    fn outgoing<'a>(&'a self, ep: &'a Endpoint) -> Outgoing<'a> {
        let o = match &self.gather {
            None => Outgoing::whole(self.dst, &self.buf),
            Some(g) => {
                // the region was there when the packet was built and nothing ran since
                let body = ep
                    .mr(g.lkey)
                    .ok()
                    .and_then(|m| m.bytes().get(g.offset..g.offset + g.len))
                    .unwrap_or(&[]);
                Outgoing::new(self.dst, [&self.buf, body, &g.tail[..g.tail_len]])
            }
        };
        o.with_tos(self.tos)
    }
}

impl Pending {
    /// Copy a gathered payload into the buffer, so the datagram no longer refers to region
    /// memory the application may change before it goes out.
    fn own(&mut self, ep: &Endpoint) {
        if let Some(g) = self.gather.take() {
            let body = ep
                .mr(g.lkey)
                .ok()
                .and_then(|m| m.bytes().get(g.offset..g.offset + g.len))
                .unwrap_or(&[]);
            self.buf.extend_from_slice(body);
            self.buf.extend_from_slice(&g.tail[..g.tail_len]);
        }
    }
}

/// Hand one received datagram to the endpoint, then to `each`, and record it to `tap`
/// (with the IPv4 identification it came with, or the one its ICRC gave back).
fn deliver(
    ep: &mut Endpoint,
    now: Instant,
    d: Datagram<'_>,
    stats: &mut DriverStats,
    tap: Option<&mut Tap>,
    each: &mut dyn FnMut(&mut Endpoint),
) -> io::Result<()> {
    stats.rx_segments += 1;
    ep.handle_datagram(now, d);
    each(ep);
    if let Some(tap) = tap {
        let id = match (d.ip_header, ep.last_icrc()) {
            (Some(h), _) if h.len() >= 6 => u16::from_be_bytes([h[4], h[5]]),
            (None, Some(IcrcStatus::IdRecovered(id))) => id,
            _ => 0,
        };
        tap.record(d.src, d.dst, d.payload, id)?;
    }
    Ok(())
}

/// A role's prediction of where its next payloads go: fills the plan, or returns false.
pub type Predictor<'a> = dyn FnMut(&Endpoint, &mut Plan) -> bool + 'a;

/// Counters of the driver itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DriverStats {
    /// Receive calls that returned data.
    pub rx_batches: u64,
    /// Segments handed to the endpoint.
    pub rx_segments: u64,
    /// Batched and segmented sends.
    pub tx_batches: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Times the backend was full.
    pub tx_stalls: u64,
}

/// Runs an endpoint over a backend.
#[derive(Debug)]
pub struct Driver<B: Backend = UdpSocket> {
    sock: B,
    batch: RecvBatch,
    pending: Vec<Pending>,
    spare: Vec<Vec<u8>>,
    tap: Option<Tap>,
    /// Segments of the current batch already handled (the rest wait for the next run).
    resume: usize,
    /// Whether the backend lends its buffers ([`Backend::recv_lent`]); false once it said not.
    lend: bool,
    /// The send loop (segmented runs on by default).
    tx: Transmitter,
    /// Counters.
    pub stats: DriverStats,
    /// Where the counters go, under which link name, and when next.
    publish: Option<(Board, String, Instant)>,
    /// How long to keep looking without sleeping after the last datagram (see
    /// [`Driver::set_spin`]).
    spin: Duration,
    /// When the last datagram arrived.
    last_rx: Option<Instant>,
    /// The scatter receive of [`Driver::run_landing`], made on first use.
    landing: Option<LandingRx>,
    /// Send a request and the acknowledgement behind it as two datagrams (see
    /// [`Driver::set_split_answers`]).
    split_answers: bool,
}

/// How often a driver publishes its counters while it runs.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

impl Driver<UdpSocket> {
    /// Wrap a bound socket (64 receive buffers; 64 KiB each with GRO).
    pub fn new(sock: UdpSocket) -> Driver<UdpSocket> {
        let size = if sock.gro() { 65_536 } else { 9_216 };
        Driver::with_backend(sock, RecvBatch::new(64, size))
    }
}

impl<B: Backend> Driver<B> {
    /// Run over any backend, receiving into `batch`.
    pub fn with_backend(backend: B, batch: RecvBatch) -> Driver<B> {
        Driver {
            sock: backend,
            batch,
            pending: Vec::new(),
            spare: Vec::new(),
            tap: None,
            resume: 0,
            lend: true,
            tx: Transmitter::new(true),
            stats: DriverStats::default(),
            publish: None,
            spin: Duration::ZERO,
            last_rx: None,
            landing: None,
            split_answers: true,
        }
    }

    /// Whether a request and the acknowledgement that follows it (a latency test's answer,
    /// and the ACK of what it answers) leave as two datagrams — the peer receives the
    /// request alone and can answer it before it handles the ACK, which suits a peer that
    /// acts on the request (`rocelink perf`) — or, with `false`, as one segmented run the
    /// peer receives whole — which suits a peer that waits for the ACK's completion before
    /// it looks at what arrived (perftest over verbs). On by default.
    pub fn set_split_answers(&mut self, on: bool) {
        self.split_answers = on;
    }

    /// What the landing receive ([`Driver::run_landing`]) did so far.
    pub fn landing_stats(&self) -> LandingStats {
        self.landing.as_ref().map(|l| l.stats).unwrap_or_default()
    }

    /// Keep receiving without sleeping for `spin` after each datagram (zero, the default:
    /// sleep in the receive call as soon as nothing is there). A stream's next datagram
    /// then finds the receiver awake: the sender's kernel does not wake it for every
    /// message (on a VM an inter-processor interrupt each), at the price of a core kept
    /// busy while the stream flows. perftest's bandwidth tests poll the same way.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Publish the counters of the endpoint it runs (and its own) to `board` as link
    /// `name`, about every [`PUBLISH_EVERY`] while it runs and on [`Driver::publish`].
    pub fn publish_to(&mut self, board: Board, name: &str) {
        self.publish = Some((board, name.to_owned(), Instant::now()));
    }

    /// The counters of `ep` over this driver, as link `name`.
    pub fn link(&self, name: &str, ep: &Endpoint) -> Link {
        let mut l = Link::of(name, ep, self.stats.rx_segments, self.stats.tx_datagrams);
        l.set("tx_stalls", self.stats.tx_stalls);
        if let Some(lr) = &self.landing {
            l.set("landed", lr.stats.in_place);
            l.set("landed_elsewhere", lr.stats.moved + lr.stats.gathered);
        }
        l
    }

    /// Publish now (to the board of [`Driver::publish_to`], if any).
    pub fn publish(&mut self, ep: &Endpoint) {
        if let Some((board, name, _)) = self.publish.take() {
            board.set_link(self.link(&name, ep));
            self.publish = Some((board, name, Instant::now() + PUBLISH_EVERY));
        }
    }

    fn publish_due(&mut self, ep: &Endpoint, now: Instant) {
        if matches!(&self.publish, Some((_, _, next)) if now >= *next) {
            self.publish(ep);
        }
    }

    /// Record every datagram to `tap`.
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// The backend (the socket).
    pub fn socket(&self) -> &B {
        &self.sock
    }

    /// Move the endpoint's pending datagrams to the socket. True when all went out.
    fn flush(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<bool> {
        // the tap's source address, read once (only when recording)
        let local_ip = self
            .tap
            .as_ref()
            .map(|_| Backend::local_addr(&self.sock).ip());
        loop {
            while self.pending.len() < TX_BATCH {
                let mut buf = self.spare.pop().unwrap_or_default();
                match ep.poll_transmit_gather(now, &mut buf) {
                    Some(t) => {
                        buf.truncate(t.len);
                        let p = Pending {
                            dst: t.dst,
                            response: t.response,
                            tos: t.traffic_class,
                            buf,
                            gather: t.gather,
                        };
                        if let (Some(tap), Some(ip)) = (self.tap.as_mut(), local_ip) {
                            let whole = p.outgoing(ep).parts.concat();
                            let from = SocketAddr::new(ip, t.src_port);
                            tap.record_with_tos(from, t.dst, &whole, 0, t.traffic_class)?;
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
                // the application runs before these go out: they must not read its
                // regions then (a sender may refill a buffer whose send completed)
                for p in &mut self.pending {
                    p.own(ep);
                }
                return Ok(false);
            }
        }
    }

    /// Send `pending` in order through the transmitter. Returns how many went out (fewer
    /// when the backend is full).
    fn send_pending(&mut self, ep: &Endpoint) -> io::Result<usize> {
        let before = self.tx.segmented_sends + self.tx.batched_sends;
        // one or two datagrams (an answer, and the acknowledgement of what it answers)
        // are a request-response exchange's every send: nothing to allocate
        let sent = match &self.pending[..] {
            [one] => self.tx.send(&self.sock, &[one.outgoing(ep)])?,
            // never one segmented run (where the acknowledgement is short enough to end
            // it): the peer then receives the request alone, and answers it before it
            // handles the acknowledgement; the kernel delivers the request first
            [request, ack] if self.split_answers && !request.response && ack.response => {
                Backend::send(&self.sock, &[request.outgoing(ep), ack.outgoing(ep)])?
            }
            [a, b] => self
                .tx
                .send(&self.sock, &[a.outgoing(ep), b.outgoing(ep)])?,
            many => {
                let out: Vec<Outgoing<'_>> = many.iter().map(|p| p.outgoing(ep)).collect();
                self.tx.send(&self.sock, &out)?
            }
        };
        self.stats.tx_batches += self.tx.segmented_sends + self.tx.batched_sends - before;
        Ok(sent)
    }

    /// Run the endpoint's timers and send what it has, without receiving or waiting. True
    /// when everything went out (false: the backend is full, the rest waits).
    pub fn transmit(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<bool> {
        ep.handle_timeout(now);
        self.flush(ep, now)
    }

    /// One round without waiting, for a caller that drives the endpoint from its own calls
    /// (a verbs application polling its completion queue): run the timers that are due,
    /// send what is ready, handle one batch of what has arrived, and send what that
    /// produced. Returns the datagrams handled and whether everything went out (false: the
    /// backend is full, the rest waits for the next round).
    pub fn progress(&mut self, ep: &mut Endpoint, now: Instant) -> io::Result<(usize, bool)> {
        ep.handle_timeout(now);
        let flushed = self.flush(ep, now)?;
        let (n, _) = self.receive(ep, now, &mut |_| {}, &mut |_| false, None, None)?;
        if n == 0 {
            // nothing came: nothing new to send since the flush above (a polling program's
            // usual round)
            return Ok((0, flushed));
        }
        let sent = self.flush(ep, now)?;
        self.publish_due(ep, now);
        Ok((n, sent))
    }

    /// Send runs of equal-sized datagrams segmented (UDP GSO; on by default).
    pub fn set_gso(&mut self, on: bool) {
        self.tx.set_segmenting(on);
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
        predict: Option<&mut Predictor<'_>>,
    ) -> io::Result<(usize, bool)> {
        let landing = self.landing.as_ref().is_some_and(LandingRx::pending);
        if (predict.is_some() || landing)
            && self.resume == 0
            && let Some(r) = self.receive_landing(ep, now, each, done, wait, predict)?
        {
            return Ok(r);
        }
        // a plan that asked for the next datagram alone: one, then the role plans again
        let alone = self.resume == 0 && self.landing.as_mut().is_some_and(LandingRx::take_alone);
        if self.resume == 0 && self.lend {
            match self.receive_lent(ep, now, each, done, wait, alone) {
                Err(e) if e.kind() == io::ErrorKind::Unsupported => self.lend = false,
                r => return r,
            }
        }
        if self.resume == 0 {
            if alone {
                self.batch.ask_at_most(1);
            }
            let n = self.sock.recv(&mut self.batch, wait)?;
            if n == 0 {
                return Ok((0, false));
            }
            self.stats.rx_batches += 1;
        }
        let local = Backend::local_addr(&self.sock);
        let mut handled = 0;
        let skip = self.resume;
        for (i, (src, ip, seg)) in self.batch.segments_with_ip().enumerate().skip(skip) {
            handled += 1;
            let d = Datagram {
                src,
                dst: local,
                ip_header: ip.map(|h| &h[..]),
                payload: seg,
            };
            deliver(ep, now, d, &mut self.stats, self.tap.as_mut(), each)?;
            if done(ep) {
                self.resume = i + 1;
                return Ok((handled, true));
            }
        }
        self.resume = 0;
        Ok((handled, false))
    }

    /// [`Driver::receive`] without sleeping, again and again until something arrives or
    /// `until` passes.
    fn spin_receive(
        &mut self,
        ep: &mut Endpoint,
        until: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        done: &mut dyn FnMut(&mut Endpoint) -> bool,
        mut predict: Option<&mut Predictor<'_>>,
    ) -> io::Result<(usize, bool)> {
        loop {
            let now = Instant::now();
            let r = self.receive(ep, now, each, done, None, predict.as_deref_mut())?;
            if r.0 > 0 || r.1 || now >= until {
                return Ok(r);
            }
            std::hint::spin_loop();
        }
    }

    /// As [`Driver::receive`], into the places `predict` names (see [`crate::landing`]):
    /// `None` when it names none (or the backend is no UDP socket), to receive the copying
    /// way.
    fn receive_landing(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        done: &mut dyn FnMut(&mut Endpoint) -> bool,
        wait: Option<Duration>,
        predict: Option<&mut Predictor<'_>>,
    ) -> io::Result<Option<(usize, bool)>> {
        let Some(sock) = self.sock.as_udp() else {
            return Ok(None);
        };
        let local = sock.local_addr();
        let lr = self
            .landing
            .get_or_insert_with(|| LandingRx::new(sock.gro(), rocelink_io::scatter::MAX_MSGS));
        let mut handled = 0;
        if !lr.pending() {
            let Some(predict) = predict else {
                return Ok(None);
            };
            if !predict(ep, lr.plan_mut()) {
                return Ok(None);
            }
            match lr.recv(sock, ep, wait)? {
                None => return Ok(None),
                Some(0) => return Ok(Some((0, false))),
                Some(_) => self.stats.rx_batches += 1,
            }
        }
        // the role does not run while payloads of the batch wait in its buffers (it may
        // write there): it is asked whether it is done only once none does; what was
        // copied out (a segment that did not fit, and all after it) is handled as the
        // copying receive handles it, the role polled after each
        while lr.handle_next(ep, now, local).is_some() {
            handled += 1;
            self.stats.rx_segments += 1;
            each(ep);
            if !lr.landed_waiting() && done(ep) {
                return Ok(Some((handled, true)));
            }
        }
        Ok(Some((handled, false)))
    }

    /// As [`Driver::receive`], from the backend's own buffers (no copy into the batch): the
    /// datagrams after the one `done` stopped at stay in the backend.
    fn receive_lent(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        done: &mut dyn FnMut(&mut Endpoint) -> bool,
        wait: Option<Duration>,
        alone: bool,
    ) -> io::Result<(usize, bool)> {
        let local = Backend::local_addr(&self.sock);
        let max = if alone { 1 } else { self.batch.capacity() };
        let Driver {
            sock, stats, tap, ..
        } = self;
        let (mut handled, mut stopped, mut failed) = (0, false, None);
        let n = sock.recv_lent(max, wait, &mut |src, ip, seg| {
            handled += 1;
            let d = Datagram {
                src,
                dst: local,
                ip_header: ip,
                payload: seg,
            };
            if let Err(e) = deliver(ep, now, d, stats, tap.as_mut(), each) {
                failed = Some(e);
                return false;
            }
            stopped = done(ep);
            !stopped
        })?;
        if n > 0 {
            self.stats.rx_batches += 1;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok((handled, stopped)),
        }
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
        done: impl FnMut(&mut Endpoint) -> bool,
    ) -> io::Result<bool> {
        self.run_inner(ep, deadline, each, done, None)
    }

    /// As [`Driver::run`], receiving payloads straight to where `predict` says they go
    /// (see [`crate::landing`]; not while a tap records, which needs whole datagrams).
    /// `done` is checked after each received batch, not each datagram: the whole batch is
    /// handled before the role runs.
    /// `predict` fills the plan and returns true, or returns false to receive the copying
    /// way this time.
    pub fn run_landing(
        &mut self,
        ep: &mut Endpoint,
        deadline: Instant,
        predict: &mut Predictor<'_>,
        done: impl FnMut(&mut Endpoint) -> bool,
    ) -> io::Result<bool> {
        let predict = if self.tap.is_none() {
            Some(predict)
        } else {
            None
        };
        self.run_inner(ep, deadline, &mut |_| {}, done, predict)
    }

    fn run_inner(
        &mut self,
        ep: &mut Endpoint,
        deadline: Instant,
        each: &mut dyn FnMut(&mut Endpoint),
        mut done: impl FnMut(&mut Endpoint) -> bool,
        mut predict: Option<&mut Predictor<'_>>,
    ) -> io::Result<bool> {
        loop {
            let now = Instant::now();
            ep.handle_timeout(now);
            self.flush(ep, now)?;
            self.publish_due(ep, now);
            if done(ep) {
                return Ok(true);
            }
            if now >= deadline {
                return Ok(false);
            }
            // what `done` posted goes out before any sleep
            let queued = ep.completions_queued();
            let all_sent = self.flush(ep, now)?;
            // sending completed work (UD/UC sends complete as they leave): the application
            // polls before anything sleeps, but what arrived is still taken first
            let completed = ep.completions_queued() != queued;
            // with everything sent, sleep in the receive call itself until a datagram, the
            // next timer or the deadline (one system call); otherwise look without sleeping
            // and then wait briefly for room or data
            let spinning = self.last_rx.is_some_and(|t| now < t + self.spin);
            let wait = (all_sent && !completed && !spinning).then(|| {
                let mut wake = deadline;
                if let Some(t) = ep.poll_timeout() {
                    wake = wake.min(t);
                }
                wake.saturating_duration_since(now)
            });
            let (n, finished) = if spinning && all_sent && !completed {
                // nothing to send and nothing new to complete: only a datagram, a timer or
                // the deadline changes that, so look again at once without the round above
                let mut until = deadline.min(self.last_rx.map_or(now, |t| t + self.spin));
                if let Some(t) = ep.poll_timeout() {
                    until = until.min(t);
                }
                self.spin_receive(ep, until, each, &mut done, predict.as_deref_mut())?
            } else {
                self.receive(ep, now, each, &mut done, wait, predict.as_deref_mut())?
            };
            // a datagram starts (or extends) the spin, also when it finished the run: a
            // latency test's next message is posted by the caller and answered within it
            if n > 0 && !self.spin.is_zero() {
                self.last_rx = Some(Instant::now());
            }
            match (n, finished) {
                (_, true) => return Ok(true),
                (n, false) if n > 0 => continue,
                _ if spinning => {
                    std::hint::spin_loop();
                    continue;
                }
                _ => {}
            }
            if !all_sent {
                Backend::wait_readable(&self.sock, Some(Duration::from_micros(200)))?;
            }
        }
    }
}
