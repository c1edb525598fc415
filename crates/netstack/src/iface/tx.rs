//! The sending side of an [`Interface`]: IPv4 and UDP out (resolving the next hop, queueing
//! behind an ARP miss), PFC pauses, raw frames and the gratuitous ARP announcement.

use super::*;

impl Interface {
    /// Send an IPv4 datagram of `len` bytes (header included, written by `fill` straight
    /// into the frame) to `dst` through ARP.
    pub(super) fn send_ip(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        pcp: u8,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Sent {
        let hop = self.next_hop(dst);
        let eth = self.header(Mac::BROADCAST, ethertype::IPV4, pcp);
        let h = eth.buffer_len();
        let mut f = vec![0u8; h + len];
        eth.emit(&mut f);
        fill(&mut f[h..]);
        if hop == Ipv4Addr::BROADCAST {
            self.finish(f);
            return Sent::Queued;
        }
        match self.arp.lookup(hop, now) {
            Lookup::Hit(mac) => {
                f[..6].copy_from_slice(&mac.0);
                self.finish(f);
                Sent::Queued
            }
            Lookup::Miss(t) => {
                let waiting = self.held.len();
                if waiting >= self.cfg.held_max {
                    self.stats.unresolved_drops += 1;
                    // the ticket still comes back: hold an empty marker for it
                    self.held.push_back((t, Vec::new()));
                    return Sent::Dropped;
                }
                self.held.push_back((t, f));
                Sent::Held
            }
        }
    }

    /// The IPv4 and UDP headers of a datagram of `payload_len` bytes to `to`.
    fn udp_headers(
        &self,
        to: UdpTx,
        payload_len: usize,
    ) -> Result<(ipv4::Repr, udp::Repr), TooLarge> {
        let len = ipv4::HEADER_LEN + udp::HEADER_LEN + payload_len;
        if len > usize::from(u16::MAX) {
            return Err(TooLarge(payload_len));
        }
        let mut ih = ipv4::Repr::new(
            self.cfg.ip,
            *to.dst.ip(),
            ipv4::protocol::UDP,
            len - ipv4::HEADER_LEN,
        );
        ih.dscp = to.dscp & 0x3F;
        let uh = udp::Repr {
            src_port: to.src_port,
            dst_port: to.dst.port(),
            payload_len,
            checksum: 0,
        };
        Ok((ih, uh))
    }

    /// Queue `payload` as a UDP datagram (UDP checksum 0, as RoCE sends it).
    pub fn send_udp(&mut self, now: Instant, to: UdpTx, payload: &[u8]) -> Result<Sent, TooLarge> {
        let (ih, uh) = self.udp_headers(to, payload.len())?;
        let len = ipv4::HEADER_LEN + udp::HEADER_LEN + payload.len();
        let sent = self.send_ip(now, *to.dst.ip(), to.pcp, len, |d| {
            ih.emit(d);
            uh.emit(&mut d[ipv4::HEADER_LEN..]);
            d[ipv4::HEADER_LEN + udp::HEADER_LEN..].copy_from_slice(payload);
        });
        self.release_resolved();
        Ok(sent)
    }

    /// Write the frame of a UDP datagram whose payload is `parts` (in order) straight into
    /// `buf` — the transmit buffer of the device (an AF_XDP frame) — when it may go now.
    /// Returns the frame's length; `None` when it must take [`Interface::send_udp`]
    /// instead: the next hop is not known yet, other frames wait ahead of it, the port
    /// appends an FCS, or `buf` is too small.
    pub fn emit_udp(
        &mut self,
        now: Instant,
        to: UdpTx,
        parts: &[&[u8]],
        buf: &mut [u8],
    ) -> Result<Option<usize>, TooLarge> {
        let payload_len: usize = parts.iter().map(|p| p.len()).sum();
        let (ih, uh) = self.udp_headers(to, payload_len)?;
        if self.cfg.fcs || !self.tx.is_empty() || !self.held.is_empty() {
            return Ok(None);
        }
        let dst = *to.dst.ip();
        let hop = self.next_hop(dst);
        if self.arp.peek(hop, now).is_none() {
            return Ok(None);
        }
        let Lookup::Hit(mac) = self.arp.lookup(hop, now) else {
            return Ok(None);
        };
        let eth = self.header(mac, ethertype::IPV4, to.pcp);
        let h = eth.buffer_len();
        let total = h + ipv4::HEADER_LEN + udp::HEADER_LEN + payload_len;
        let framed = total.max(60);
        let Some(f) = buf.get_mut(..framed) else {
            return Ok(None);
        };
        eth.emit(f);
        ih.emit(&mut f[h..]);
        uh.emit(&mut f[h + ipv4::HEADER_LEN..]);
        let mut at = h + ipv4::HEADER_LEN + udp::HEADER_LEN;
        for p in parts {
            f[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        f[total..].fill(0);
        self.stats.tx_frames += 1;
        Ok(Some(framed))
    }

    /// Queue a PFC frame (pause or resume).
    pub fn send_pause(&mut self, frame: &pfc::Repr) {
        let eth = ethernet::Repr {
            dst: pfc::DST_MAC,
            src: self.cfg.mac,
            vlan: None,
            ethertype: ethertype::MAC_CONTROL,
        };
        self.queue(eth, pfc::PAYLOAD_LEN, |b| frame.emit(b));
    }

    /// Queue a frame of another EtherType (CoE) to `dst`, tagged with `pcp` where the
    /// port has a VLAN; its payload gathered from `parts`.
    pub fn send_raw(&mut self, dst: Mac, ethertype: u16, pcp: u8, parts: &[&[u8]]) {
        let eth = self.header(dst, ethertype, pcp);
        let len = parts.iter().map(|p| p.len()).sum();
        self.queue(eth, len, |b| {
            let mut at = 0;
            for p in parts {
                b[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
        });
    }

    /// Announce our address (gratuitous ARP).
    pub fn announce(&mut self) {
        let r = arp::Repr {
            operation: arp::Operation::Request,
            sha: self.cfg.mac,
            spa: self.cfg.ip,
            tha: Mac([0; 6]),
            tpa: self.cfg.ip,
        };
        let eth = self.header(Mac::BROADCAST, ethertype::ARP, 0);
        self.queue(eth, arp::PACKET_LEN, |b| r.emit(b));
    }
}
