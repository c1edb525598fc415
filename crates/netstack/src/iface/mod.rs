//! One Ethernet port owned by the program (an AF_XDP socket, a tap, an emulated device's
//! MAC): frames in, frames out, as blue-ethernet's `UdpIpArpEthRxTx` and HSB's Host RX
//! parser handle them.
//!
//! Receive ([`Interface::handle_frame`]): the FCS checked when frames carry one, the
//! destination MAC ours or broadcast, an 802.1Q tag accepted when it is the configured
//! VLAN, ARP answered and learned, ICMP echo answered, the IPv4 header checksum checked,
//! and UDP handed up with the headers a RoCE receiver hashes into the ICRC. PFC frames and
//! any other EtherType (CoE: 0x22F0) are handed up too.
//!
//! Transmit: [`Interface::send_udp`] resolves the next hop through the ARP cache and
//! queues the frame (held while ARP answers, in order; dropped with the miss when nobody
//! does); [`Interface::poll_transmit`] gives every frame to send, its own replies included.

use crate::arp_cache::{ArpCache, ArpConfig, BadGeometry, Lookup, Ticket};
use rocelink_wire::bytes::Mac;
use rocelink_wire::ethernet::{self, Frame, VlanTag, ethertype};
use rocelink_wire::{arp, icmpv4, ipv4, pfc, udp};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

mod tx;

/// The port's addresses and behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IfaceConfig {
    /// Our MAC.
    pub mac: Mac,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of our subnet.
    pub prefix_len: u8,
    /// Where packets off the subnet go.
    pub gateway: Option<Ipv4Addr>,
    /// Tag sent frames with this VLAN (its PCP replaced per packet by the class) and
    /// accept only this VLAN or untagged frames.
    pub vlan: Option<u16>,
    /// Frames carry the Ethernet FCS (checked on receive, appended on send).
    pub fcs: bool,
    /// ARP cache.
    pub arp: ArpConfig,
    /// Frames held while ARP answers (all next hops together).
    pub held_max: usize,
    /// Learn a neighbour's MAC from the IPv4 packets it sends us (on our subnet), for a
    /// port that shares its interface with the kernel, which keeps ARP to itself.
    pub learn_from_ip: bool,
}

impl IfaceConfig {
    /// A port at `mac`/`ip` on a /24, no gateway, untagged, without FCS.
    pub fn new(mac: Mac, ip: Ipv4Addr) -> IfaceConfig {
        IfaceConfig {
            mac,
            ip,
            prefix_len: 24,
            gateway: None,
            vlan: None,
            fcs: false,
            arp: ArpConfig::default(),
            held_max: 64,
            learn_from_ip: false,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfaceStats {
    /// Frames handed in.
    pub rx_frames: u64,
    /// Dropped: bad FCS.
    pub bad_fcs: u64,
    /// Dropped: too short, malformed, unsupported (IPv4 options, fragments).
    pub malformed: u64,
    /// Dropped: IPv4 header checksum wrong.
    pub bad_ip_checksum: u64,
    /// Dropped: not for us (MAC, IP or VLAN).
    pub not_ours: u64,
    /// ARP requests answered.
    pub arp_replies: u64,
    /// ICMP echo requests answered.
    pub echo_replies: u64,
    /// UDP datagrams handed up.
    pub udp_rx: u64,
    /// Frames queued for sending.
    pub tx_frames: u64,
    /// UDP frames dropped because the next hop never answered ARP, or too many waited.
    pub unresolved_drops: u64,
}

/// A UDP datagram for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRx<'a> {
    /// Sender.
    pub src: SocketAddrV4,
    /// Our port it was sent to.
    pub dst_port: u16,
    /// DSCP of its IPv4 header.
    pub dscp: u8,
    /// 802.1Q tag, if tagged.
    pub vlan: Option<VlanTag>,
    /// The IPv4 header as received (20 bytes; the ICRC covers it, IPv4 ID included).
    pub ip_header: &'a [u8],
    /// The UDP header as received.
    pub udp_header: &'a [u8],
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// What a frame carried up to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rx<'a> {
    /// UDP to our address.
    Udp(UdpRx<'a>),
    /// A PFC (MAC control) frame: for the transmit scheduler.
    Pause(pfc::Repr),
    /// Another EtherType addressed to us (CoE 0x22F0, …).
    Other {
        /// Its EtherType.
        ethertype: u16,
        /// Its payload.
        payload: &'a [u8],
    },
}

/// Where a UDP datagram goes and how it is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpTx {
    /// Destination.
    pub dst: SocketAddrV4,
    /// Our source port.
    pub src_port: u16,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// 802.1Q priority when the port is tagged.
    pub pcp: u8,
}

/// What became of a datagram handed to [`Interface::send_udp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Its frame is queued.
    Queued,
    /// It waits for ARP.
    Held,
    /// Dropped: too many frames already wait for this next hop.
    Dropped,
}

/// A datagram too large for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("UDP payload of {0} bytes does not fit an IPv4 datagram")]
pub struct TooLarge(pub usize);

/// The port.
#[derive(Debug)]
pub struct Interface {
    cfg: IfaceConfig,
    arp: ArpCache,
    tx: VecDeque<Vec<u8>>,
    /// Frames waiting for ARP, by ticket: (ticket, frame with a zero destination MAC).
    held: VecDeque<(Ticket, Vec<u8>)>,
    /// Counters.
    pub stats: IfaceStats,
}

/// IEEE 802.3 FCS of `frame` (CRC-32, sent least significant byte first).
pub fn fcs(frame: &[u8]) -> [u8; 4] {
    crc32fast::hash(frame).to_le_bytes()
}

impl Interface {
    /// A port with an empty ARP cache.
    pub fn new(cfg: IfaceConfig) -> Result<Interface, BadGeometry> {
        Ok(Interface {
            arp: ArpCache::new(cfg.arp)?,
            cfg,
            tx: VecDeque::new(),
            held: VecDeque::new(),
            stats: IfaceStats::default(),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &IfaceConfig {
        &self.cfg
    }

    /// The ARP cache.
    pub fn arp(&self) -> &ArpCache {
        &self.arp
    }

    /// Learn that neighbour `ip` is at `mac` from elsewhere (a host sharing its port with a
    /// kernel that keeps the ARP replies: the kernel's neighbour table); frames waiting on
    /// it are released.
    pub fn learn(&mut self, ip: Ipv4Addr, mac: Mac, now: Instant) {
        self.arp.insert(ip, mac, now);
    }

    /// The neighbour a datagram to `dst` goes to: `dst` on the subnet, else the gateway.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        if self.on_subnet(dst) || dst == Ipv4Addr::BROADCAST {
            dst
        } else {
            self.cfg.gateway.unwrap_or(dst)
        }
    }

    fn on_subnet(&self, ip: Ipv4Addr) -> bool {
        let bits = u32::from(self.cfg.prefix_len.min(32));
        let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
        u32::from(ip) & mask == u32::from(self.cfg.ip) & mask
    }

    fn header(&self, dst: Mac, ethertype: u16, pcp: u8) -> ethernet::Repr {
        ethernet::Repr {
            dst,
            src: self.cfg.mac,
            vlan: self.cfg.vlan.map(|vid| VlanTag {
                pcp: pcp & 7,
                dei: false,
                vid,
            }),
            ethertype,
        }
    }

    /// Queue a frame: Ethernet header, then `body` written by `fill`.
    fn queue(&mut self, eth: ethernet::Repr, len: usize, fill: impl FnOnce(&mut [u8])) {
        let h = eth.buffer_len();
        let mut f = vec![0u8; h + len];
        eth.emit(&mut f);
        fill(&mut f[h..]);
        self.finish(f);
    }

    fn finish(&mut self, mut f: Vec<u8>) {
        // the minimum frame is 60 bytes before the FCS
        if f.len() < 60 {
            f.resize(60, 0);
        }
        if self.cfg.fcs {
            let c = fcs(&f);
            f.extend_from_slice(&c);
        }
        self.stats.tx_frames += 1;
        self.tx.push_back(f);
    }

    /// Handle one received frame at `now`. Returns what is for the caller; ARP and ICMP
    /// are answered here (see [`Interface::poll_transmit`]).
    pub fn handle_frame<'a>(&mut self, now: Instant, frame: &'a [u8]) -> Option<Rx<'a>> {
        self.stats.rx_frames += 1;
        let frame = if self.cfg.fcs {
            let Some(body_len) = frame.len().checked_sub(4) else {
                self.stats.malformed += 1;
                return None;
            };
            if frame[body_len..] != fcs(&frame[..body_len]) {
                self.stats.bad_fcs += 1;
                return None;
            }
            &frame[..body_len]
        } else {
            frame
        };
        let Ok(f) = Frame::new_checked(frame) else {
            self.stats.malformed += 1;
            return None;
        };
        let eth = ethernet::Repr::parse(&f);
        let vlan_ok = match (eth.vlan, self.cfg.vlan) {
            (Some(tag), Some(vid)) => tag.vid == vid,
            (Some(tag), None) => tag.vid == 0, // priority-tagged
            (None, _) => true,
        };
        let for_us =
            eth.dst == self.cfg.mac || eth.dst == Mac::BROADCAST || eth.dst == pfc::DST_MAC;
        if !vlan_ok || !for_us {
            self.stats.not_ours += 1;
            return None;
        }
        let payload = f.payload();
        match eth.ethertype {
            ethertype::ARP => {
                self.handle_arp(now, payload, eth.vlan);
                None
            }
            ethertype::IPV4 => self.handle_ipv4(now, payload, eth.vlan, eth.src),
            ethertype::MAC_CONTROL => {
                match pfc::Packet::new_checked(payload).and_then(|p| pfc::Repr::parse(&p)) {
                    Ok(r) => Some(Rx::Pause(r)),
                    Err(_) => {
                        self.stats.malformed += 1;
                        None
                    }
                }
            }
            _ if eth.dst == self.cfg.mac => Some(Rx::Other {
                ethertype: eth.ethertype,
                payload,
            }),
            _ => {
                self.stats.not_ours += 1;
                None
            }
        }
    }

    fn handle_arp(&mut self, now: Instant, payload: &[u8], tag: Option<VlanTag>) {
        let Ok(r) = arp::Packet::new_checked(payload).and_then(|p| arp::Repr::parse(&p)) else {
            self.stats.malformed += 1;
            return;
        };
        if r.tpa == self.cfg.ip {
            // RFC 826: the sender is worth keeping when the packet is for us
            self.arp.insert(r.spa, r.sha, now);
            if r.operation == arp::Operation::Request {
                let reply = arp::Repr {
                    operation: arp::Operation::Reply,
                    sha: self.cfg.mac,
                    spa: self.cfg.ip,
                    tha: r.sha,
                    tpa: r.spa,
                };
                let eth = self.header(r.sha, ethertype::ARP, tag.map_or(0, |t| t.pcp));
                self.queue(eth, arp::PACKET_LEN, |b| reply.emit(b));
                self.stats.arp_replies += 1;
            }
        } else {
            // a gratuitous announcement or a request between others: refresh only
            self.arp.update(r.spa, r.sha, now);
        }
        self.release_resolved();
    }

    fn handle_ipv4<'a>(
        &mut self,
        now: Instant,
        payload: &'a [u8],
        tag: Option<VlanTag>,
        src_mac: Mac,
    ) -> Option<Rx<'a>> {
        let Ok(p) = ipv4::Packet::new_checked(payload) else {
            self.stats.malformed += 1;
            return None;
        };
        let ip = match ipv4::Repr::parse(&p) {
            Ok(r) => r,
            Err(rocelink_wire::Error::Malformed) => {
                self.stats.bad_ip_checksum += 1;
                return None;
            }
            Err(_) => {
                self.stats.malformed += 1;
                return None;
            }
        };
        if ip.dst != self.cfg.ip && ip.dst != Ipv4Addr::BROADCAST {
            self.stats.not_ours += 1;
            return None;
        }
        if self.cfg.learn_from_ip
            && self.on_subnet(ip.src)
            && self.arp.peek(ip.src, now) != Some(src_mac)
        {
            self.arp.insert(ip.src, src_mac, now);
            self.release_resolved();
        }
        let body = p.payload();
        match ip.protocol {
            ipv4::protocol::ICMP => {
                self.handle_icmp(now, &ip, body, tag);
                None
            }
            ipv4::protocol::UDP => {
                let Ok(u) = udp::Packet::new_checked(body) else {
                    self.stats.malformed += 1;
                    return None;
                };
                let ur = udp::Repr::parse(&u);
                self.stats.udp_rx += 1;
                Some(Rx::Udp(UdpRx {
                    src: SocketAddrV4::new(ip.src, ur.src_port),
                    dst_port: ur.dst_port,
                    dscp: ip.dscp,
                    vlan: tag,
                    ip_header: p.header(),
                    udp_header: &body[..udp::HEADER_LEN],
                    payload: u.payload(),
                }))
            }
            _ => None,
        }
    }

    fn handle_icmp(&mut self, now: Instant, ip: &ipv4::Repr, body: &[u8], tag: Option<VlanTag>) {
        let Ok(pkt) = icmpv4::Packet::new_checked(body) else {
            self.stats.malformed += 1;
            return;
        };
        let Ok(echo) = icmpv4::EchoRepr::parse(&pkt) else {
            return;
        };
        if !echo.request || ip.dst != self.cfg.ip {
            return;
        }
        // the reply goes back the way the request came: to the MAC we know, or after ARP
        let reply = icmpv4::EchoRepr {
            request: false,
            ..echo
        };
        let mut ih = ipv4::Repr::new(
            self.cfg.ip,
            ip.src,
            ipv4::protocol::ICMP,
            reply.buffer_len(),
        );
        ih.dscp = ip.dscp;
        let data = pkt.data();
        self.stats.echo_replies += 1;
        let len = ipv4::HEADER_LEN + reply.buffer_len();
        self.send_ip(now, ip.src, tag.map_or(0, |t| t.pcp), len, |d| {
            ih.emit(d);
            reply.emit(&mut d[ipv4::HEADER_LEN..], data);
        });
        self.release_resolved();
    }

    /// Move frames whose next hop was answered (or given up on) out of the hold, in the
    /// order they were sent.
    fn release_resolved(&mut self) {
        while let Some(r) = self.arp.poll_resolved() {
            let Some(i) = self.held.iter().position(|(t, _)| *t == r.ticket) else {
                continue;
            };
            let Some((_, mut f)) = self.held.remove(i) else {
                continue;
            };
            if f.is_empty() {
                continue;
            }
            match r.mac {
                Some(mac) => {
                    f[..6].copy_from_slice(&mac.0);
                    self.finish(f);
                }
                None => self.stats.unresolved_drops += 1,
            }
        }
    }

    /// Run timers: ARP requests and retries are queued, misses that ran out fail.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(ip) = self.arp.poll_request(now) {
            let r = arp::Repr {
                operation: arp::Operation::Request,
                sha: self.cfg.mac,
                spa: self.cfg.ip,
                tha: Mac([0; 6]),
                tpa: ip,
            };
            let eth = self.header(Mac::BROADCAST, ethertype::ARP, 0);
            self.queue(eth, arp::PACKET_LEN, |b| r.emit(b));
        }
        self.release_resolved();
    }

    /// When [`Interface::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.arp.poll_timeout()
    }

    /// The next frame to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.tx.is_empty() {
            self.handle_timeout(now);
        }
        self.tx.pop_front()
    }
}
