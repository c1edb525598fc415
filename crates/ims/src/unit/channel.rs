//! One data channel of the buffer unit: its UC QP and ring, the answer to every WRITE
//! message that ends on it, and the hand-over of consecutively delivered frames to the
//! consumer, which moves the write window.
//!
//! A frame is ACKed once the consumer has taken it, never before: a NACK goes out as soon
//! as a message fails, but a frame delivered whole waits in the ring, unanswered, until it
//! is its turn and the consumer takes it. So every frame a worker saw ACKed was taken
//! (recorded, or counted as dropped with its reason), whatever stops the unit; a frame
//! delivered and never taken (the unit stopped taking, its worker left) was never ACKed.

use super::{Frame, UnitConfig, UnitStats};
use crate::consumer::Consumer;
use crate::mailbox::Mailbox;
use crate::nack::events_for_faults;
use crate::ring::{Delivery, RingBook};
use crate::{Error, source::Verify};
use rocelink_io::aligned::AlignedBuf;
use rocelink_transport::{
    Access, CqId, Endpoint, Event, MessageOutcome, MrKeys, Mtu, QpInit, QpType, SendOp, WriteRules,
};
use rocelink_wire::ims::{AckRepr, AckType, Events, ack, marks};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;

/// What a channel needs to hand frames to the consumer.
pub(super) struct Take<'a> {
    pub(super) now: Instant,
    /// The worker: (LID, status QPN).
    pub(super) worker: (u32, u32),
    pub(super) verify: Verify,
    pub(super) consumer: &'a mut dyn Consumer,
    /// Where a frame that wraps past the ring's end is put together.
    pub(super) scratch: &'a mut Vec<u8>,
}

/// Frames NACKed and not yet delivered that a channel remembers, to count them when they
/// come again.
const NACKED_KEPT: usize = 4096;

#[derive(Debug)]
pub(super) struct Channel {
    pub(super) qpn: u32,
    cq: CqId,
    pub(super) ring: MrKeys,
    pub(super) book: RingBook,
    acks: Mailbox,
    pub(super) remote_qpn: u32,
    /// VAs NACKed and not delivered since (bounded).
    nacked: BTreeSet<u64>,
    /// Packets its QP had received when last looked at (to see it is in use).
    pub(super) rx_seen: u64,
}

impl Channel {
    pub(super) fn open(
        ep: &mut Endpoint,
        remote: SocketAddr,
        remote_qpn: u32,
        cfg: &UnitConfig,
    ) -> Result<Channel, Error> {
        let mem =
            AlignedBuf::try_lazy_zeroed(cfg.ring_bytes).ok_or(Error::RingMemory(cfg.ring_bytes))?;
        let ring = ep
            .register_ring_mr(
                mem,
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                cfg.va_offset,
                cfg.ring_bytes as u64,
            )
            .ok_or(Error::RingWindow(cfg.ring_bytes))?;
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
            // the worker's first packet in sequence names its port; the PSNs of a stream
            // that starts at 0 (a replay behind it is refused)
            pin_peer_port: true,
            psn_window: 1 << 23,
            traffic_class: cfg.levels.data_tc(),
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
            nacked: BTreeSet::new(),
            rx_seen: 0,
        })
    }

    /// Destroy the QP and its answer slots (the ring stays).
    pub(super) fn close_qp(&mut self, ep: &mut Endpoint) {
        let _ = ep.destroy_qp(self.qpn);
        while ep.poll_cq(self.cq).is_some() {}
        while ep.poll_qp_event(self.qpn).is_some() {}
        self.acks.close(ep);
    }

    /// Whether its QP received anything since the last look.
    pub(super) fn active(&mut self, ep: &Endpoint) -> bool {
        let rx = ep.qp_stats(self.qpn).map_or(0, |s| s.rx_packets);
        let moved = rx != self.rx_seen;
        self.rx_seen = rx;
        moved
    }

    /// Answer every WRITE message that ended since the last call, in their order: a NACK
    /// for a failed one, an ACK for a frame taken before (sent again after a lost ACK); a
    /// frame delivered is handed on at once if it is its turn and the consumer takes it,
    /// and ACKed then ([`Channel::consume`]), else it waits, unanswered.
    pub(super) fn answer_frames(
        &mut self,
        ep: &mut Endpoint,
        take: &mut Take<'_>,
        stats: &mut UnitStats,
    ) {
        while let Some(e) = ep.poll_qp_event(self.qpn) {
            let Event::WriteMessage {
                va,
                len,
                outcome,
                faults,
                ..
            } = e
            else {
                continue;
            };
            let mut events = events_for_faults(faults);
            // this frame came before (NACKed, or delivered): the worker sent it again
            let again = outcome != MessageOutcome::NoStart
                && (self.nacked.contains(&va) || self.book.behind(va) || self.book.holds(va));
            stats.seen_again += u64::from(again);
            if outcome == MessageOutcome::Delivered {
                self.nacked.remove(&va);
            }
            match outcome {
                MessageOutcome::Delivered => match self.book.delivered(va, len) {
                    Delivery::New => {
                        stats.frames_delivered += 1;
                        stats.bytes += u64::from(len);
                        // its ACK (and those of the frames it let through) before the
                        // answers to the messages after it
                        self.consume(ep, take, stats);
                        continue;
                    }
                    // waiting for the consumer: its ACK comes when it is taken
                    Delivery::Duplicate if self.book.holds(va) => {
                        stats.duplicates += 1;
                        continue;
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
            if events != 0 && va != 0 {
                self.remember_nacked(va);
            }
            self.answer(ep, va, Events(events), stats);
        }
    }

    /// Send an ACK (no `events`) or a NACK for the frame at `va`.
    fn answer(&mut self, ep: &mut Endpoint, va: u64, events: Events, stats: &mut UnitStats) {
        let kind = if events.0 == 0 {
            stats.acked += 1;
            AckType::Ack
        } else {
            stats.nacks += 1;
            stats.nacked.add(events);
            AckType::Nack
        };
        let mut b = [0u8; ack::PACKET_LEN];
        AckRepr { kind, events, va }.emit(&mut b);
        // a full send queue drops the answer: the worker's timeout sends the frame again,
        // and a frame taken before is ACKed again
        let _ = self.acks.send(ep, SendOp::Send, &b);
    }

    /// Forget the frames delivered and not taken (never ACKed): counted discarded; how many.
    pub(super) fn discard(&mut self, ep: &mut Endpoint, stats: &mut UnitStats) -> usize {
        let mut n = 0;
        while self.book.pass_gap().is_some() {
            self.book.consume();
            n += 1;
        }
        stats.frames_discarded += n as u64;
        if n > 0 {
            let (start, len) = self.book.window();
            let _ = ep.set_ring_window(self.ring.lkey, start, len);
        }
        n
    }

    fn remember_nacked(&mut self, va: u64) {
        if self.nacked.len() >= NACKED_KEPT {
            // forget the VAs the window has passed, then the oldest
            let book = &self.book;
            self.nacked.retain(|&v| !book.behind(v));
            if self.nacked.len() >= NACKED_KEPT {
                self.nacked.pop_first();
            }
        }
        self.nacked.insert(va);
    }

    /// Hand frames at the read pointer to the consumer, in order, each ACKed as it is
    /// taken; move the window past those taken.
    pub(super) fn consume(
        &mut self,
        ep: &mut Endpoint,
        take: &mut Take<'_>,
        stats: &mut UnitStats,
    ) {
        let now = take.now;
        let mut moved = false;
        while let Some((va, len)) = self.book.next() {
            if !take.consumer.ready(now) {
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
                take.scratch.clear();
                take.scratch.extend_from_slice(a);
                take.scratch.extend_from_slice(b);
                &take.scratch[..]
            };
            let f = Frame {
                worker: take.worker,
                va,
                bytes,
                intact: take.verify.check(bytes, va),
            };
            take.consumer.consume(now, &f);
            if !f.intact {
                stats.image_crc_failures += 1;
            }
            stats.frames_consumed += 1;
            self.book.consume();
            moved = true;
            // taken: only now may its worker hear it is stored
            self.answer(ep, va, Events(0), stats);
        }
        if moved {
            let (start, len) = self.book.window();
            let _ = ep.set_ring_window(self.ring.lkey, start, len);
        }
    }
}
