//! The state an [`XdpPort`](super::XdpPort) shares between its sockets: the AF_XDP socket,
//! the device stack and the datagrams queued per UDP port.

use super::*;

pub(super) struct Inner {
    pub(super) xsk: Xsk,
    pub(super) iface: Interface,
    /// Datagrams waiting for the socket of their port (opened ports only).
    pub(super) ports: HashMap<u16, VecDeque<Queued>>,
    /// Frames of other EtherTypes (CoE), when someone asked for them.
    pub(super) other: Option<VecDeque<(u16, Vec<u8>)>>,
    /// PFC frames received, for the transmit scheduler (the latest 64).
    pub(super) pauses: VecDeque<rocelink_wire::pfc::Repr>,
    /// PFC, transmit side: datagrams held while their class is paused.
    pub(super) held: Option<super::pfc::Held>,
    /// PFC, receive side: the thread pausing the peer while the ring is full.
    pub(super) watch: Option<super::pfc::Watch>,
    /// A frame the stack gave that the socket had no room for.
    pub(super) unsent: Option<Vec<u8>>,
    /// The last look at the ring found frames (receive coalescing).
    pub(super) flowing: bool,
    pub(super) stats: XdpPortStats,
}

/// Datagrams a port's queue holds before dropping.
pub(super) const PORT_QUEUE: usize = 4096;

/// Queue a datagram (sender, IPv4 header, payload) for the socket of `port`, or count why
/// not: nobody opened the port, or its queue is full.
fn queue_for_port(
    ports: &mut HashMap<u16, VecDeque<Queued>>,
    stats: &mut XdpPortStats,
    port: u16,
    (src, ip, payload): (SocketAddr, Option<&[u8]>, &[u8]),
) {
    match ports.get_mut(&port) {
        Some(q) if q.len() < PORT_QUEUE => q.push_back((
            src,
            ip.and_then(|h| <[u8; 20]>::try_from(h).ok()),
            payload.to_vec(),
        )),
        Some(_) => stats.queue_full += 1,
        None => stats.no_port += 1,
    }
}

/// Held datagrams handed to the stack per look.
const HELD_BATCH: usize = 256;

impl Inner {
    /// Take frames from the socket: those for `port` appended to `batch` (while it has
    /// room), the others queued for their ports; replies the stack makes (ARP, ICMP) sent.
    pub(super) fn receive(
        &mut self,
        port: u16,
        batch: Option<&mut RecvBatch>,
    ) -> io::Result<usize> {
        match batch {
            Some(b) => {
                let room = b.capacity().saturating_sub(b.len()).max(1);
                self.receive_lent(
                    port,
                    room,
                    Some(&mut |src, ip, payload| {
                        let ip = ip.and_then(|h| <[u8; 20]>::try_from(h).ok());
                        // the room was counted: a frame (≤ 4 KiB) always fits a slot
                        b.push(src, ip, payload);
                        true
                    }),
                    None,
                )
            }
            None => self.receive_lent(port, 256, None, None),
        }
    }

    /// Take up to `max` frames from the socket: those for `port` lent to `each` in place
    /// (until it returns false; the rest stay in the ring), the others queued for their
    /// ports — and `port`'s own too when there is no `each`; replies the stack makes (ARP,
    /// ICMP) sent. Returns how many `each` took.
    pub(super) fn receive_lent(
        &mut self,
        port: u16,
        max: usize,
        mut each: Option<&mut LendFn<'_>>,
        mut each_other: Option<&mut OtherLendFn<'_>>,
    ) -> io::Result<usize> {
        let Inner {
            xsk,
            iface,
            ports,
            other,
            pauses,
            held,
            watch,
            stats,
            ..
        } = self;
        let now = Instant::now();
        let mut mine = 0;
        let mut classes = 0u8;
        let watching = watch.is_some();
        let n = xsk.recv_while(max, |f| {
            stats.rx_frames += 1;
            match iface.handle_frame(now, f) {
                Some(Rx::Udp(u)) => {
                    if watching && let Some(&tos) = u.ip_header.get(1) {
                        classes |= 1 << (tos >> 5);
                    }
                    let ip = (u.ip_header.len() == 20).then_some(u.ip_header);
                    let src = SocketAddr::V4(u.src);
                    if u.dst_port == port
                        && let Some(take) = each.as_deref_mut()
                    {
                        mine += 1;
                        return take(src, ip, u.payload);
                    }
                    queue_for_port(ports, stats, u.dst_port, (src, ip, u.payload));
                }
                Some(Rx::Pause(f)) => {
                    if let Some(h) = held.as_mut() {
                        h.handle_pause(now, &f);
                    }
                    if pauses.len() == 64 {
                        pauses.pop_front();
                    }
                    pauses.push_back(f);
                }
                Some(Rx::Other { ethertype, payload }) if each_other.is_some() => {
                    if let Some(take) = each_other.as_deref_mut() {
                        mine += 1;
                        take(ethertype, payload);
                    }
                }
                Some(Rx::Other { ethertype, payload }) => match other.as_mut() {
                    Some(q) if q.len() < PORT_QUEUE => q.push_back((ethertype, payload.to_vec())),
                    _ => stats.other_dropped += 1,
                },
                Some(_) | None => {}
            }
            true
        })?;
        if let Some(w) = watch.as_ref()
            && n > 0
        {
            w.after_batch(classes);
        }
        if n > 0 {
            self.flowing = true;
            self.send_held(now);
            self.transmit_stack()?;
        }
        Ok(mine)
    }

    /// Hand the stack the held datagrams whose class may send again (as many as the
    /// socket has room for); [`Inner::transmit_stack`] sends them.
    pub(super) fn send_held(&mut self, now: Instant) {
        let Some(h) = self.held.as_mut() else { return };
        let room = super::pfc::TX_DEPTH.saturating_sub(self.xsk.in_flight());
        for _ in 0..HELD_BATCH.min(room as usize) {
            if !self.xsk.can_push() {
                break;
            }
            let Some((to, bytes)) = h.next(now) else {
                break;
            };
            // its size was checked when it was held
            let _ = self.iface.send_udp(now, to, &bytes);
        }
    }

    /// When a held datagram may go next.
    pub(super) fn held_timeout(&self, now: Instant) -> Option<Instant> {
        self.held.as_ref().and_then(|h| h.poll_timeout(now))
    }

    /// Send what the stack queued (its replies, frames released by ARP).
    pub(super) fn transmit_stack(&mut self) -> io::Result<bool> {
        let now = Instant::now();
        loop {
            let f = match self.unsent.take() {
                Some(f) => f,
                None => match self.iface.poll_transmit(now) {
                    Some(f) => f,
                    None => break,
                },
            };
            if !self.xsk.send(&f) {
                self.stats.tx_full += 1;
                self.unsent = Some(f);
                self.xsk.flush()?;
                return Ok(false);
            }
        }
        self.xsk.flush()?;
        Ok(true)
    }
}
