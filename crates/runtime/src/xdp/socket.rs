//! [`XdpSocket`]: one UDP port of an [`XdpPort`], as a [`Backend`].

use super::*;

/// The largest UDP payload an IPv4 datagram carries.
const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;

/// A UDP port of an [`XdpPort`]: a [`Backend`].
#[derive(Debug, Clone)]
pub struct XdpSocket {
    pub(super) port: XdpPort,
    pub(super) local: SocketAddr,
}

impl XdpSocket {
    /// Put datagram `o` (to `to`) in the transmit ring, or through the stack when the
    /// frame cannot be written now (ARP, frames ahead of it), in order. False, nothing
    /// sent, when the ring is full.
    fn push(&self, g: &mut Inner, to: UdpTx, o: &Outgoing<'_>, now: Instant) -> io::Result<bool> {
        let Inner { xsk, iface, .. } = g;
        let hop = iface.next_hop(*to.dst.ip());
        if self.port.cfg.role == XdpRole::Host
            && iface.arp().peek(hop, now).is_none()
            && let Some(mac) = rocelink_io::net::neighbour_mac(hop)
        {
            // a host's kernel keeps the ARP replies: take what it resolved
            iface.learn(hop, Mac(mac), now);
        }
        if !xsk.can_push() {
            g.stats.tx_full += 1;
            return Ok(false);
        }
        let size = xsk.frame_size();
        let mut result = Ok(None);
        let written = xsk.push(size, |buf| {
            result = iface.emit_udp(now, to, &o.parts, buf);
            match result {
                Ok(Some(n)) => n,
                _ => 0,
            }
        });
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        result.map_err(|e| invalid(e.to_string()))?;
        if !written {
            let whole = o.parts.concat();
            iface
                .send_udp(now, to, &whole)
                .map_err(|e| invalid(e.to_string()))?;
        }
        Ok(true)
    }

    /// The port it belongs to.
    pub fn port(&self) -> &XdpPort {
        &self.port
    }

    /// Receive one datagram without waiting: (sender, bytes).
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        let mut g = self.port.lock();
        let p = self.local.port();
        if g.ports.get(&p).is_none_or(|q| q.is_empty()) {
            g.receive(p, None)?;
        }
        let Some((src, _, bytes)) = g.ports.get_mut(&p).and_then(|q| q.pop_front()) else {
            return Ok(None);
        };
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(Some((n, src)))
    }

    /// Send one datagram.
    pub fn send_to(&self, bytes: &[u8], dst: SocketAddr) -> io::Result<bool> {
        Ok(self.send(&[Outgoing::whole(dst, bytes)])? == 1)
    }
}

impl Backend for XdpSocket {
    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn recv(&self, batch: &mut RecvBatch, wait: Option<Duration>) -> io::Result<usize> {
        batch.clear();
        let p = self.local.port();
        let fill = |batch: &mut RecvBatch| -> io::Result<usize> {
            let mut g = self.port.lock();
            if let Some(q) = g.ports.get_mut(&p) {
                while let Some((src, ip, bytes)) = q.front() {
                    if !batch.push(*src, *ip, bytes) {
                        break;
                    }
                    q.pop_front();
                }
            }
            if batch.len() < batch.capacity() {
                g.receive(p, Some(batch))?;
            }
            Ok(batch.len())
        };
        let n = fill(batch)?;
        if n > 0 {
            return Ok(n);
        }
        let Some(w) = wait else { return Ok(0) };
        if self.port.wait_readable(Some(w))? {
            return fill(batch);
        }
        Ok(0)
    }

    fn recv_lent(
        &self,
        max: usize,
        wait: Option<Duration>,
        each: &mut LendFn<'_>,
    ) -> io::Result<usize> {
        let p = self.local.port();
        let take = |each: &mut LendFn<'_>| -> io::Result<usize> {
            let mut g = self.port.lock();
            let mut n = 0;
            // what another reader queued came first
            if let Some(q) = g.ports.get_mut(&p) {
                while n < max
                    && let Some((src, ip, bytes)) = q.pop_front()
                {
                    n += 1;
                    if !each(src, ip.as_ref().map(|h| &h[..]), &bytes) {
                        return Ok(n);
                    }
                }
            }
            if n < max {
                n += g.receive_lent(p, max - n, Some(each), None)?;
            }
            Ok(n)
        };
        let n = take(each)?;
        if n > 0 {
            return Ok(n);
        }
        let Some(w) = wait else { return Ok(0) };
        if self.port.wait_readable(Some(w))? {
            return take(each);
        }
        Ok(0)
    }

    fn send(&self, out: &[Outgoing<'_>]) -> io::Result<usize> {
        let mut g = self.port.lock();
        let now = Instant::now();
        if g.held.is_some() {
            // a pause must stop what follows it: look for one first (and let go what
            // a pause that ran out held)
            g.receive(0, None)?;
            g.send_held(now);
        }
        if g.unsent.is_some() && !g.transmit_stack()? {
            return Ok(0);
        }
        // with PFC, what may still be committed to the wire this call (counted once)
        let mut room = g
            .held
            .is_some()
            .then(|| super::pfc::TX_DEPTH.saturating_sub(g.xsk.in_flight()));
        let mut sent = 0;
        for o in out {
            let SocketAddr::V4(dst) = o.dst else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("AF_XDP port: IPv4 only, not {}", o.dst),
                ));
            };
            // a service level travels as the DSCP and, on a tagged port, as the 802.1Q
            // priority: the class selector (DSCP / 8) is the PCP
            let dscp = o.tos >> 2;
            let to = UdpTx {
                dst,
                src_port: self.local.port(),
                dscp,
                pcp: dscp >> 3,
            };
            if let Some(h) = g.held.as_mut() {
                let class = super::pfc::Held::class(&to);
                if h.must_hold(class, now) {
                    if o.len() > MAX_UDP_PAYLOAD {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("a {}-byte datagram does not fit IPv4", o.len()),
                        ));
                    }
                    h.hold(class, to, o.parts.concat());
                    sent += 1;
                    continue;
                }
            }
            if room == Some(0) {
                // a pause must find little already committed to the wire
                break;
            }
            if !self.push(&mut g, to, o, now)? {
                break;
            }
            room = room.map(|r| r - 1);
            sent += 1;
        }
        g.transmit_stack()?;
        Ok(sent)
    }

    fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        {
            let g = self.port.lock();
            if g.ports
                .get(&self.local.port())
                .is_some_and(|q| !q.is_empty())
            {
                return Ok(true);
            }
        }
        self.port.wait_readable(timeout)
    }

    fn wait_writable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut g = self.port.lock();
        g.send_held(Instant::now());
        if g.unsent.is_some() {
            g.transmit_stack()?;
        }
        g.xsk.wait_writable(timeout)
    }
}
