//! The buffer unit (WCU.BUF): answers the status channel, keeps a ring per data channel,
//! answers every frame with an ACK or a NACK, and hands consecutively delivered frames to a
//! [`Consumer`], whose pace moves the write window.

pub use crate::consumer::Consumer;
use crate::mailbox::Mailbox;
use crate::nack::{NackCounts, events_for};
use crate::ring::{Delivery, RingBook};
use crate::{Error, STATUS_QKEY, STATUS_QPN, VERSION, source::Verify};
use rocelink_io::aligned::AlignedBuf;
use rocelink_transport::{
    Access, CqId, Endpoint, Event, MessageOutcome, MrKeys, Mtu, QpInit, QpType, SendOp, UdDest,
    WriteRules,
};
use rocelink_wire::ims::{AckRepr, AckType, Events, Method, StatusRepr, ack, marks, status};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// How a buffer unit is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// QPN of the status QP (fixed, known to workers).
    pub status_qpn: u32,
    /// Q_Key of the status QP.
    pub status_qkey: u32,
    /// Bytes of each data channel's ring.
    pub ring_bytes: usize,
    /// First VA a worker writes (VA_OFFS of DATA_RES).
    pub va_offset: u64,
    /// Protocol version announced in every status packet.
    pub version: (u8, u8),
    /// Most data channels at once (each has its own ring).
    pub max_channels: usize,
    /// What is checked of each frame before it is consumed.
    pub verify: Verify,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            status_qpn: STATUS_QPN,
            status_qkey: STATUS_QKEY,
            ring_bytes: 1 << 30,
            va_offset: 0,
            version: VERSION,
            max_channels: 4,
            verify: Verify::Header,
        }
    }
}

/// A frame handed to the consumer: delivered whole, in order.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The worker: (LID, status QPN).
    pub worker: (u32, u32),
    /// Its VA.
    pub va: u64,
    /// Its bytes (in the ring; copied out only when it wraps past the ring's end).
    pub bytes: &'a [u8],
    /// It passed [`ServerConfig::verify`].
    pub intact: bool,
}

/// Counters of a buffer unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Frames delivered whole (first time).
    pub frames_delivered: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames handed to the consumer.
    pub frames_consumed: u64,
    /// ACKs sent (duplicates included).
    pub acked: u64,
    /// NACKs sent, per cause.
    pub nacked: NackCounts,
    /// Frames delivered again (their ACK was lost), ACKed again.
    pub duplicates: u64,
    /// Frames refused outside the write window (NACKed).
    pub out_of_window: u64,
    /// Frames that failed [`ServerConfig::verify`].
    pub image_crc_failures: u64,
    /// Status packets received.
    pub status_packets: u64,
    /// Status packets that were not one (too short, unknown method) or came from an
    /// unknown worker.
    pub status_ignored: u64,
    /// DATA_REQs refused: [`ServerConfig::max_channels`] channels were open.
    pub channels_refused: u64,
}

#[derive(Debug)]
struct Channel {
    qpn: u32,
    cq: CqId,
    ring: MrKeys,
    book: RingBook,
    acks: Mailbox,
    remote_qpn: u32,
}

#[derive(Debug)]
struct WorkerEntry {
    addr: SocketAddr,
    qkey: u32,
    channel: Option<Channel>,
}

/// A buffer unit over an endpoint.
#[derive(Debug)]
pub struct Server {
    cfg: ServerConfig,
    status: Mailbox,
    table: HashMap<(u32, u32), WorkerEntry>,
    /// Channels taken down whose delivered frames the consumer has not taken yet: no more
    /// writes, the ring kept until it has.
    draining: Vec<((u32, u32), Channel)>,
    stats: ServerStats,
    scratch: Vec<u8>,
}

impl Server {
    /// Create the status QP (with the fixed QPN and Q_Key) on `ep`.
    pub fn new(ep: &mut Endpoint, cfg: ServerConfig) -> Result<Server, Error> {
        if cfg.ring_bytes < crate::MAX_PACKET
            || !cfg.ring_bytes.is_multiple_of(crate::ALIGN as usize)
        {
            return Err(Error::Config(format!(
                "ring size {} must be a multiple of 64 of at least {} bytes",
                cfg.ring_bytes,
                crate::MAX_PACKET
            )));
        }
        if !cfg.va_offset.is_multiple_of(crate::ALIGN) {
            return Err(Error::Config(format!(
                "VA offset {:#x} is not 64-byte aligned",
                cfg.va_offset
            )));
        }
        let cq = ep.create_cq();
        let init = QpInit {
            send_cq: cq,
            recv_cq: cq,
            ..QpInit::new(QpType::Ud)
        };
        let qpn = ep.create_qp_numbered(cfg.status_qpn, init)?;
        ep.ready_qp(qpn, cfg.status_qkey, None, 0, Mtu::M4096)?;
        let status = Mailbox::new(ep, qpn, cq, 256, 2048 + 256, true)?;
        Ok(Server {
            cfg,
            status,
            table: HashMap::new(),
            draining: Vec::new(),
            stats: ServerStats::default(),
            scratch: Vec::new(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Workers in the table.
    pub fn workers(&self) -> usize {
        self.table.len()
    }

    /// Open data channels.
    pub fn channels(&self) -> usize {
        self.table.values().filter(|w| w.channel.is_some()).count()
    }

    /// When [`Server::poll`] must run again though nothing arrives (a consumer that took
    /// no frame wants to be asked again).
    pub fn poll_timeout(&self, consumer: &dyn Consumer) -> Option<Instant> {
        let waiting = self
            .table
            .values()
            .filter_map(|w| w.channel.as_ref())
            .chain(self.draining.iter().map(|(_, c)| c))
            .any(|c| c.book.next().is_some());
        waiting.then(|| consumer.wake()).flatten()
    }

    /// Answer what arrived: status requests, frames (ACK/NACK), then hand frames to
    /// `consumer` and move the windows.
    pub fn poll(&mut self, ep: &mut Endpoint, now: Instant, consumer: &mut dyn Consumer) {
        while let Some(l) = self.status.poll(ep) {
            self.stats.status_packets += 1;
            match (StatusRepr::parse(l.data()), l.src) {
                (Ok(p), Some(src)) => self.status_request(ep, p, src),
                _ => self.stats.status_ignored += 1,
            }
        }
        let Server {
            table,
            draining,
            stats,
            scratch,
            cfg,
            ..
        } = self;
        for (&key, w) in table.iter_mut() {
            if let Some(ch) = w.channel.as_mut() {
                ch.answer_frames(ep, stats);
                ch.consume(ep, now, key, cfg.verify, consumer, stats, scratch);
            }
        }
        draining.retain_mut(|(key, ch)| {
            ch.consume(ep, now, *key, cfg.verify, consumer, stats, scratch);
            let done = ch.book.pending() == 0;
            if done {
                ep.deregister_mr(ch.ring.lkey);
            }
            !done
        });
    }

    /// Take a channel down: no more writes; its ring goes once its frames are consumed.
    fn retire(&mut self, ep: &mut Endpoint, key: (u32, u32), mut ch: Channel) {
        ch.close_qp(ep);
        if ch.book.pending() == 0 {
            ep.deregister_mr(ch.ring.lkey);
        } else {
            self.draining.push((key, ch));
        }
    }

    fn reply(&mut self, ep: &mut Endpoint, w: (SocketAddr, u32, u32), mut p: StatusRepr) {
        let (addr, qpn, qkey) = w;
        p.major = self.cfg.version.0;
        p.minor = self.cfg.version.1;
        let mut b = [0u8; status::PACKET_LEN];
        p.emit(&mut b);
        let op = SendOp::UdSend {
            dest: UdDest { addr, qpn, qkey },
            imm: None,
        };
        // a full send queue drops the reply: the worker asks again
        let _ = self.status.send(ep, op, &b);
    }

    fn status_request(&mut self, ep: &mut Endpoint, p: StatusRepr, src: SocketAddr) {
        let key = (p.lid, p.qpn);
        let answer = |method| StatusRepr {
            method,
            va: 0,
            rkey: 0,
            qkey_or_qpnd: 0,
            ..p
        };
        match p.method {
            Method::StatReq => {
                let w = self.table.entry(key).or_insert(WorkerEntry {
                    addr: src,
                    qkey: p.qkey_or_qpnd,
                    channel: None,
                });
                (w.addr, w.qkey) = (src, p.qkey_or_qpnd);
                self.reply(ep, (src, p.qpn, p.qkey_or_qpnd), answer(Method::StatRes));
            }
            Method::DataReq => {
                let Some(to) = self.table.get(&key).map(|w| (w.addr, p.qpn, w.qkey)) else {
                    self.stats.status_ignored += 1;
                    return;
                };
                match self.open_channel(ep, key, p.qkey_or_qpnd) {
                    Some(res) => self.reply(ep, to, StatusRepr { ..res }),
                    None => self.stats.channels_refused += 1,
                }
            }
            Method::DataTerm => {
                let Some(w) = self.table.get_mut(&key) else {
                    self.stats.status_ignored += 1;
                    return;
                };
                let to = (w.addr, p.qpn, w.qkey);
                if let Some(ch) = w.channel.take() {
                    self.retire(ep, key, ch);
                }
                self.reply(ep, to, answer(Method::DataDown));
            }
            Method::StatTerm => {
                let Some(w) = self.table.remove(&key) else {
                    // already gone (its STAT_DOWN was lost): say so again
                    self.reply(ep, (src, p.qpn, p.qkey_or_qpnd), answer(Method::StatDown));
                    return;
                };
                let to = (w.addr, p.qpn, w.qkey);
                if let Some(ch) = w.channel {
                    self.retire(ep, key, ch);
                }
                self.reply(ep, to, answer(Method::StatDown));
            }
            // answers are not requests
            _ => self.stats.status_ignored += 1,
        }
    }

    /// Open (or, for a repeated request, find) the data channel of worker `key` to its
    /// data QP `qpnd`; the DATA_RES to send.
    fn open_channel(
        &mut self,
        ep: &mut Endpoint,
        key: (u32, u32),
        qpnd: u32,
    ) -> Option<StatusRepr> {
        let open = self.channels();
        let cfg = self.cfg;
        let w = self.table.get_mut(&key)?;
        let res = |ch: &Channel| StatusRepr {
            major: 0,
            minor: 0,
            method: Method::DataRes,
            lid: key.0,
            qpn: key.1,
            qkey_or_qpnd: ch.qpn,
            va: cfg.va_offset,
            rkey: ch.ring.rkey,
        };
        if let Some(ch) = &w.channel
            && ch.remote_qpn == qpnd
        {
            // its DATA_RES was lost: the same answer
            return Some(res(ch));
        }
        if open >= cfg.max_channels && w.channel.is_none() {
            return None;
        }
        let addr = w.addr;
        if let Some(old) = w.channel.take() {
            self.retire(ep, key, old);
        }
        let ch = Channel::open(ep, addr, qpnd, &cfg).ok()?;
        let r = res(&ch);
        self.table.get_mut(&key)?.channel = Some(ch);
        Some(r)
    }
}

impl Channel {
    fn open(
        ep: &mut Endpoint,
        remote: SocketAddr,
        remote_qpn: u32,
        cfg: &ServerConfig,
    ) -> Result<Channel, Error> {
        let ring = ep
            .register_ring_mr(
                AlignedBuf::lazy_zeroed(cfg.ring_bytes),
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                cfg.va_offset,
                cfg.ring_bytes as u64,
            )
            .ok_or_else(|| Error::Config("ring window".into()))?;
        let cq = ep.create_cq();
        let init = QpInit {
            report_messages: true,
            write_rules: WriteRules {
                min_packet: crate::ALIGN as u32,
                va_align: crate::ALIGN,
                variable_packets: true,
                packet_step: crate::ALIGN as u32,
                marks: marks::ALL,
            },
            send_cq: cq,
            recv_cq: cq,
            ..QpInit::new(QpType::Uc)
        };
        let qpn = ep.create_qp(init)?;
        ep.ready_qp(qpn, 0, Some(remote), remote_qpn, Mtu::M4096)?;
        // answers only: no receive slots
        let acks = Mailbox::new(ep, qpn, cq, 0, 2048 + 256, false)?;
        Ok(Channel {
            qpn,
            cq,
            ring,
            book: RingBook::new(cfg.va_offset, cfg.ring_bytes as u64),
            acks,
            remote_qpn,
        })
    }

    /// Destroy the QP and its answer slots (the ring stays).
    fn close_qp(&mut self, ep: &mut Endpoint) {
        let _ = ep.destroy_qp(self.qpn);
        while ep.poll_cq(self.cq).is_some() {}
        while ep.poll_qp_event(self.qpn).is_some() {}
        self.acks.close(ep);
    }

    /// ACK or NACK every WRITE message that ended since the last call.
    fn answer_frames(&mut self, ep: &mut Endpoint, stats: &mut ServerStats) {
        while let Some(e) = ep.poll_qp_event(self.qpn) {
            let Event::WriteMessage {
                va, len, outcome, ..
            } = e
            else {
                continue;
            };
            let mut events = events_for(outcome);
            match outcome {
                MessageOutcome::Delivered => match self.book.delivered(va, len) {
                    Delivery::New => {
                        stats.frames_delivered += 1;
                        stats.bytes += u64::from(len);
                    }
                    Delivery::Duplicate => stats.duplicates += 1,
                },
                // sent again after it was consumed (its ACK was lost): it was delivered
                MessageOutcome::OutsideWindow if self.book.behind(va) => {
                    stats.duplicates += 1;
                    events = 0;
                }
                MessageOutcome::OutsideWindow => stats.out_of_window += 1,
                _ => {}
            }
            let va = if outcome == MessageOutcome::NoStart {
                0
            } else {
                va
            };
            let a = AckRepr {
                kind: if events == 0 {
                    AckType::Ack
                } else {
                    AckType::Nack
                },
                events: Events(events),
                va,
            };
            let mut b = [0u8; ack::PACKET_LEN];
            a.emit(&mut b);
            if events == 0 {
                stats.acked += 1;
            } else {
                stats.nacked.add(a.events);
            }
            // a full send queue drops the answer: the worker's timeout sends the frame again
            let _ = self.acks.send(ep, SendOp::Send, &b);
        }
    }

    /// Hand frames at the read pointer to the consumer; move the window past those taken.
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        worker: (u32, u32),
        verify: Verify,
        consumer: &mut dyn Consumer,
        stats: &mut ServerStats,
        scratch: &mut Vec<u8>,
    ) {
        let mut moved = false;
        while let Some((va, len)) = self.book.next() {
            if !consumer.ready(now) {
                break;
            }
            let Ok(mr) = ep.mr(self.ring.lkey) else {
                return;
            };
            let Ok([a, b]) = mr.pieces(va, u64::from(len)) else {
                return;
            };
            let bytes = if b.is_empty() {
                a
            } else {
                scratch.clear();
                scratch.extend_from_slice(a);
                scratch.extend_from_slice(b);
                &scratch[..]
            };
            let f = Frame {
                worker,
                va,
                bytes,
                intact: verify.check(bytes, va),
            };
            consumer.consume(now, &f);
            if !f.intact {
                stats.image_crc_failures += 1;
            }
            stats.frames_consumed += 1;
            self.book.consume();
            moved = true;
        }
        if moved {
            let (start, len) = self.book.window();
            let _ = ep.set_ring_window(self.ring.lkey, start, len);
        }
    }
}
