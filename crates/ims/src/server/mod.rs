//! The buffer unit (WCU.BUF): answers the status channel, keeps a ring per data channel,
//! answers every frame with an ACK or a NACK, and hands consecutively delivered frames to a
//! [`Consumer`], whose pace moves the write window.

pub use crate::consumer::{Consumer, Frame};
use crate::mailbox::Mailbox;
use crate::nack::NackCounts;
use crate::{Error, STATUS_QKEY, STATUS_QPN, VERSION, source::Verify};
use channel::Channel;
use rocelink_transport::{Endpoint, Mtu, QpInit, QpType};
use rocelink_wire::ims::StatusRepr;
use status::Limiter;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What a channel's consumer does at a frame that has not come (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gaps {
    /// Wait for it: the worker sends it (again).
    Wait,
    /// Pass over it: the channel takes no more writes.
    Pass,
}

mod channel;
mod status;

/// How a buffer unit is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Most workers registered at once (a STAT_REQ beyond is answered STAT_DOWN).
    pub max_workers: usize,
    /// A worker with no status packet and no data for this long is forgotten (its channel
    /// closed, its delivered frames still consumed).
    pub idle_timeout: Duration,
    /// Status answers sent per second at most (bursts of a tenth of that, at least 16).
    pub answers_per_sec: u32,
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
            max_workers: 64,
            idle_timeout: status::IDLE,
            answers_per_sec: 1000,
            verify: Verify::Header,
        }
    }
}

impl ServerConfig {
    /// Why this configuration cannot serve, if so (checked by [`Server::new`]; call it
    /// before binding anything to report a bad value first).
    pub fn check(&self) -> Result<(), Error> {
        if self.ring_bytes < crate::MAX_PACKET
            || !self.ring_bytes.is_multiple_of(crate::ALIGN as usize)
        {
            return Err(Error::RingSize(self.ring_bytes));
        }
        if self.max_workers == 0 || self.max_channels == 0 || self.idle_timeout.is_zero() {
            return Err(Error::Capacity);
        }
        if !self.va_offset.is_multiple_of(crate::ALIGN) {
            return Err(Error::VaOffset(self.va_offset));
        }
        Ok(())
    }
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
    /// NACK packets sent.
    pub nacks: u64,
    /// NACK causes sent (a NACK with two causes counts under each).
    pub nacked: NackCounts,
    /// Frames delivered again (their ACK was lost), ACKed again.
    pub duplicates: u64,
    /// Frames that came again: sent again after a NACK, a lost ACK or a timeout.
    pub seen_again: u64,
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
    /// DATA_REQs refused: the ring's memory could not be had.
    pub rings_refused: u64,
    /// STAT_REQs refused: [`ServerConfig::max_workers`] workers were registered.
    pub workers_refused: u64,
    /// Status requests refused: a LID other than the sender's address, or a request for a
    /// worker from another address or port than the one that registered it.
    pub status_foreign: u64,
    /// Status answers not sent ([`ServerConfig::answers_per_sec`]).
    pub answers_dropped: u64,
    /// Workers forgotten after [`ServerConfig::idle_timeout`].
    pub workers_expired: u64,
}

#[derive(Debug)]
struct WorkerEntry {
    /// Where its STAT_REQ came from: the only address and port that speaks for it.
    addr: SocketAddr,
    qkey: u32,
    channel: Option<Channel>,
    /// When it was last heard (status packet or data).
    last: Instant,
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
    limiter: Limiter,
}

impl Server {
    /// Create the status QP (with the fixed QPN and Q_Key) on `ep`.
    pub fn new(ep: &mut Endpoint, cfg: ServerConfig) -> Result<Server, Error> {
        cfg.check()?;
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
            limiter: Limiter::new(cfg.answers_per_sec),
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

    /// The data channel QPs whose WRITE under way may land straight in their ring (see
    /// [`rocelink_runtime::Plan::expect_write`]): those whose message's remaining range
    /// holds no frame delivered and not yet consumed. A worker that did not hear an ACK
    /// sends a delivered frame again, and while that copy is under way a lost packet lets
    /// the next land in its place: in a delivered frame that would be corruption, where
    /// the copying receive writes nothing that is refused.
    pub fn landing_qpns<'a>(&'a self, ep: &'a Endpoint) -> impl Iterator<Item = u32> + 'a {
        self.table
            .values()
            .filter_map(|w| w.channel.as_ref())
            .filter(|c| {
                ep.write_under_way(c.qpn)
                    .is_some_and(|u| !c.book.overlaps_delivered(u.va, u.len as u64))
            })
            .map(|c| c.qpn)
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
        let consume = waiting.then(|| consumer.wake()).flatten();
        [consume, self.next_expiry()].into_iter().flatten().min()
    }

    /// Answer what arrived: status requests, frames (ACK/NACK), then hand frames to
    /// `consumer` and move the windows.
    pub fn poll(&mut self, ep: &mut Endpoint, now: Instant, consumer: &mut dyn Consumer) {
        while let Some(l) = self.status.poll(ep) {
            self.stats.status_packets += 1;
            match (StatusRepr::parse(l.data()), l.src) {
                (Ok(p), Some(src)) => self.status_request(ep, now, p, src),
                _ => self.stats.status_ignored += 1,
            }
        }
        self.expire(ep, now);
        for w in self.table.values_mut() {
            if let Some(ch) = w.channel.as_mut() {
                ch.answer_frames(ep, &mut self.stats);
            }
        }
        self.consume(ep, now, consumer, false);
    }

    /// Frames delivered — and so ACKed — that the consumer has not taken yet.
    pub fn pending(&self) -> usize {
        let open = self.table.values().filter_map(|w| w.channel.as_ref());
        open.chain(self.draining.iter().map(|(_, c)| c))
            .map(|c| c.book.pending())
            .sum()
    }

    /// Hand the consumer what it takes now of the frames delivered and not consumed,
    /// answering nothing new; the number still waiting. A buffer unit that stops calls this
    /// until it is 0, so every frame a worker saw ACKed reaches the consumer: nothing more
    /// arrives once it stops, so a frame never delivered (NACKed, or lost with its worker)
    /// no longer holds back the ACKed frames after it.
    pub fn drain(&mut self, ep: &mut Endpoint, now: Instant, consumer: &mut dyn Consumer) -> usize {
        self.consume(ep, now, consumer, true)
    }

    /// Hand the consumer the frames at each ring's read pointer; the number still waiting.
    /// A channel that is closed (or every channel, when `stopping`) passes over the gaps
    /// no frame will fill any more.
    fn consume(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        consumer: &mut dyn Consumer,
        stopping: bool,
    ) -> usize {
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
                let gaps = if stopping { Gaps::Pass } else { Gaps::Wait };
                ch.consume(ep, now, key, cfg.verify, gaps, consumer, stats, scratch);
            }
        }
        draining.retain_mut(|(key, ch)| {
            ch.consume(
                ep,
                now,
                *key,
                cfg.verify,
                Gaps::Pass,
                consumer,
                stats,
                scratch,
            );
            let done = ch.book.pending() == 0;
            if done {
                ep.deregister_mr(ch.ring.lkey);
            }
            !done
        });
        self.pending()
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
}
