//! The buffer unit (WCU.BUF): answers the status channel, keeps a ring per data channel,
//! answers every frame with an ACK or a NACK, and hands consecutively delivered frames to a
//! [`Consumer`], whose pace moves the write window. A frame is ACKed once the consumer has
//! taken it: every ACK a worker sees names a frame recorded or counted as dropped.

pub use crate::consumer::{Consumer, Frame};
use crate::mailbox::Mailbox;
use crate::nack::NackCounts;
use crate::{Error, STATUS_QKEY, STATUS_QPN, VERSION, source::Verify};
use channel::{Channel, Take};
use rocelink_transport::{Endpoint, Mtu, QpInit, QpType};
use rocelink_wire::ims::StatusRepr;
use status::Limiter;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod channel;
mod status;

/// How a buffer unit is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnitConfig {
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
    /// The DSCP of status answers and of ACKs/NACKs (SL0 and SL1 by default).
    #[serde(default)]
    pub levels: crate::ServiceLevels,
}

impl Default for UnitConfig {
    fn default() -> Self {
        UnitConfig {
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
            levels: crate::ServiceLevels::default(),
        }
    }
}

impl UnitConfig {
    /// Why this configuration cannot serve, if so (checked by [`Unit::new`]; call it
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
        self.levels.check()
    }
}

/// Counters of a buffer unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnitStats {
    /// Frames delivered whole (first time).
    pub frames_delivered: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames handed to the consumer (each then ACKed).
    pub frames_consumed: u64,
    /// Frames delivered that the consumer never took, so never ACKed: their worker left
    /// first (a fatal NACK, DATA_TERM, silence), or the unit stopped while they waited
    /// behind a frame count the consumer had reached.
    pub frames_discarded: u64,
    /// ACKs sent (duplicates included).
    pub acked: u64,
    /// NACK packets sent.
    pub nacks: u64,
    /// NACK causes sent (a NACK with two causes counts under each).
    pub nacked: NackCounts,
    /// Frames delivered again: their ACK was lost (ACKed again), or they came again while
    /// waiting for the consumer (ACKed once taken).
    pub duplicates: u64,
    /// Frames that came again: sent again after a NACK, a lost ACK or a timeout.
    pub seen_again: u64,
    /// Frames refused outside the write window (NACKed).
    pub out_of_window: u64,
    /// Frames that failed [`UnitConfig::verify`].
    pub image_crc_failures: u64,
    /// Status packets received.
    pub status_packets: u64,
    /// Status packets that were not one (too short, unknown method) or came from an
    /// unknown worker.
    pub status_ignored: u64,
    /// DATA_REQs refused: [`UnitConfig::max_channels`] channels were open.
    pub channels_refused: u64,
    /// DATA_REQs refused: the ring's memory could not be had.
    pub rings_refused: u64,
    /// STAT_REQs refused: [`UnitConfig::max_workers`] workers were registered.
    pub workers_refused: u64,
    /// Status requests refused: a LID other than the sender's address, or a request for a
    /// worker from another address or port than the one that registered it.
    pub status_foreign: u64,
    /// Status answers not sent ([`UnitConfig::answers_per_sec`]).
    pub answers_dropped: u64,
    /// Workers forgotten after [`UnitConfig::idle_timeout`].
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
pub struct Unit {
    cfg: UnitConfig,
    status: Mailbox,
    table: HashMap<(u32, u32), WorkerEntry>,
    stats: UnitStats,
    scratch: Vec<u8>,
    limiter: Limiter,
}

impl Unit {
    /// Create the status QP (with the fixed QPN and Q_Key) on `ep`.
    pub fn new(ep: &mut Endpoint, cfg: UnitConfig) -> Result<Unit, Error> {
        cfg.check()?;
        let cq = ep.create_cq();
        let init = QpInit {
            send_cq: cq,
            recv_cq: cq,
            traffic_class: cfg.levels.status_tc(),
            ..QpInit::new(QpType::Ud)
        };
        let qpn = ep.create_qp_numbered(cfg.status_qpn, init)?;
        ep.ready_qp(qpn, cfg.status_qkey, None, 0, Mtu::M4096)?;
        let status = Mailbox::new(ep, qpn, cq, 256, 2048 + 256, true)?;
        Ok(Unit {
            cfg,
            status,
            table: HashMap::new(),
            stats: UnitStats::default(),
            scratch: Vec::new(),
            limiter: Limiter::new(cfg.answers_per_sec),
        })
    }

    /// Counters.
    pub fn stats(&self) -> UnitStats {
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

    /// When [`Unit::poll`] must run again though nothing arrives (a consumer that took
    /// no frame wants to be asked again).
    pub fn poll_timeout(&self, consumer: &dyn Consumer) -> Option<Instant> {
        let waiting = self
            .table
            .values()
            .filter_map(|w| w.channel.as_ref())
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
        self.each_channel(now, consumer, |ch, take, stats| {
            ch.answer_frames(ep, take, stats)
        });
        self.consume(ep, now, consumer);
    }

    /// Frames delivered that the consumer has not taken yet (none of them ACKed).
    pub fn pending(&self) -> usize {
        self.table
            .values()
            .filter_map(|w| w.channel.as_ref())
            .map(|c| c.book.pending())
            .sum()
    }

    /// A stopping buffer unit: hand the consumer what it takes now of the frames
    /// delivered in order and not taken, ACKing each, and answering nothing new; the number
    /// of those still waiting. A frame behind a gap (one never delivered: NACKed, or still
    /// to be sent again) is not one of them: nothing fills the gap any more, and the
    /// stream's frames are taken in order or not at all. A unit calls this until it is 0
    /// or the consumer is [done](Consumer::done), then [`Unit::discard`]s the rest.
    pub fn drain(&mut self, ep: &mut Endpoint, now: Instant, consumer: &mut dyn Consumer) -> usize {
        self.consume(ep, now, consumer);
        self.table
            .values()
            .filter_map(|w| w.channel.as_ref())
            .map(|c| c.book.in_order())
            .sum()
    }

    /// Forget the frames delivered and not taken (never ACKed), counted as
    /// [`UnitStats::frames_discarded`]; how many.
    pub fn discard(&mut self, ep: &mut Endpoint) -> usize {
        let Unit { table, stats, .. } = self;
        let mut n = 0;
        for ch in table.values_mut().filter_map(|w| w.channel.as_mut()) {
            n += ch.discard(ep, stats);
        }
        n
    }

    /// Hand the consumer the frames at each ring's read pointer.
    fn consume(&mut self, ep: &mut Endpoint, now: Instant, consumer: &mut dyn Consumer) {
        self.each_channel(now, consumer, |ch, take, stats| ch.consume(ep, take, stats));
    }

    /// Run `f` on every open channel with what taking its frames needs.
    fn each_channel(
        &mut self,
        now: Instant,
        consumer: &mut dyn Consumer,
        mut f: impl FnMut(&mut Channel, &mut Take<'_>, &mut UnitStats),
    ) {
        let Unit {
            table,
            stats,
            scratch,
            cfg,
            ..
        } = self;
        for (&worker, w) in table.iter_mut() {
            if let Some(ch) = w.channel.as_mut() {
                let mut take = Take {
                    now,
                    worker,
                    verify: cfg.verify,
                    consumer: &mut *consumer,
                    scratch: &mut *scratch,
                };
                f(ch, &mut take, stats);
            }
        }
    }

    /// Take a channel down: no more writes, and no ACK can reach its worker any more, so
    /// the frames it delivered and the consumer has not taken are discarded.
    fn retire(&mut self, ep: &mut Endpoint, mut ch: Channel) {
        ch.discard(ep, &mut self.stats);
        ch.close_qp(ep);
        ep.deregister_mr(ch.ring.lkey);
    }
}
