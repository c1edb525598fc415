//! The worker's data channel: frames sent as UC RDMA WRITEs into the server's window, sent
//! again when due, and each ACK or NACK acted on (Table 3.4).

use super::*;
use crate::source::Fill;

/// How soon a source that had no frame yet is asked again.
const SOURCE_RETRY: Duration = Duration::from_millis(1);

impl Worker {
    /// Post slot `i`'s frame.
    fn transmit(&mut self, ep: &mut Endpoint, now: Instant, i: usize) -> Result<(), Error> {
        self.transmit_marked(ep, now, i, 0)
    }

    /// Post slot `i`'s frame with `marks` on its last packet.
    fn transmit_marked(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        i: usize,
        marks: u8,
    ) -> Result<(), Error> {
        let s = &mut self.slots[i];
        let wr = SendWr {
            wr_id: i as u64,
            op: SendOp::Write {
                va: s.va,
                rkey: self.rkey,
            },
            sg_list: Sge {
                lkey: self.frames.lkey,
                va: (i * self.frame_len) as u64,
                len: s.len as u32,
            }
            .into(),
            signaled: true,
            solicited: false,
            marks,
        };
        ep.post_send(self.data_qpn, wr)?;
        self.stats.marked += u64::from(marks != 0);
        s.queued += 1;
        self.seq += 1;
        s.state = SlotState::Sent {
            deadline: now + self.cfg.timeout,
            seq: self.seq,
        };
        Ok(())
    }

    /// A unit that answered nothing for [`WorkerConfig::silence`] while frames wait for an
    /// answer is gone.
    pub(super) fn check_silence(&self, now: Instant) -> Result<(), Error> {
        let waiting = self
            .slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::Sent { .. } | SlotState::Waiting { .. }))
            .count();
        match self.last_answer {
            Some(t) if waiting > 0 && now >= t + self.cfg.silence => Err(Error::Silent {
                server: self.cfg.server,
                secs: now.duration_since(t).as_secs_f64(),
                frames: waiting,
            }),
            _ => Ok(()),
        }
    }

    pub(super) fn resend_due(&mut self, ep: &mut Endpoint, now: Instant) -> Result<(), Error> {
        for i in 0..self.slots.len() {
            match self.slots[i].state {
                SlotState::Sent { deadline, .. } if deadline <= now => {
                    self.stats.timeouts += 1;
                    self.stats.retransmissions += 1;
                    self.transmit(ep, now, i)?;
                }
                SlotState::Waiting { until } if until <= now => {
                    self.stats.retransmissions += 1;
                    self.transmit(ep, now, i)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn send_new(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        source: &mut dyn FrameSource,
    ) -> Result<(), Error> {
        while !self.stop && !self.source_done {
            let Some(i) = self.slots.iter().position(|s| s.state == SlotState::Free) else {
                return Ok(());
            };
            let (index, va) = (self.next_index, self.next_va);
            let at = (i * self.frame_len) as u64;
            let buf = ep
                .mr_mut(self.frames.lkey)
                .and_then(|m| m.slice_mut(at, self.frame_len as u64, Access::NONE))?;
            self.source_retry = None;
            let len = match source
                .next_frame(index, va, buf)
                .map_err(Error::from_source)?
            {
                Fill::Frame(n) if n == self.frame_len => n,
                Fill::Frame(n) => {
                    // a shorter frame than the slot: it must obey the packet rules too
                    self.cfg.check(n)?;
                    n.min(self.frame_len)
                }
                Fill::Later => {
                    self.source_retry = Some(now + SOURCE_RETRY);
                    return Ok(());
                }
                Fill::Done => {
                    self.source_done = true;
                    return Ok(());
                }
            };
            self.slots[i] = Slot {
                index,
                va,
                len,
                state: SlotState::Free,
                queued: self.slots[i].queued,
                sent_whole: false,
            };
            self.next_index += 1;
            self.next_va = align_up(va.wrapping_add(len as u64));
            let marks = match self.cfg.mark_bad {
                Some(m) if (index + 1).is_multiple_of(m.every) => m.marks,
                _ => 0,
            };
            self.transmit_marked(ep, now, i, marks)?;
        }
        Ok(())
    }

    /// The frame an answer is about: by VA, or for a no-start NACK (VA 0) the oldest
    /// transmission still unanswered.
    fn slot_for(&self, a: &AckRepr) -> Option<usize> {
        let live = |s: &Slot| !matches!(s.state, SlotState::Free | SlotState::Acked);
        if a.kind == AckType::Nack && a.events.0 & Events::NO_START_OF_FRAME != 0 && a.va == 0 {
            return self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s.state {
                    SlotState::Sent { seq, .. } => Some((seq, i)),
                    _ => None,
                })
                .min()
                .map(|(_, i)| i);
        }
        self.slots.iter().position(|s| live(s) && s.va == a.va)
    }

    pub(super) fn answer(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        a: AckRepr,
    ) -> Result<(), Error> {
        let slot = self.slot_for(&a);
        if a.kind == AckType::Ack && slot.is_some_and(|i| !self.slots[i].sent_whole) {
            // no transmission of that frame has completely left: no unit has it whole
            self.stats.early_acks += 1;
            return Ok(());
        }
        self.last_answer = Some(now);
        match a.kind {
            AckType::Ack => self.stats.acked += 1,
            AckType::Nack => {
                self.stats.nacks += 1;
                self.stats.nacked.add(a.events);
            }
        }
        let Some(i) = slot else {
            self.stats.stale += 1;
            return Ok(());
        };
        if a.kind == AckType::Ack {
            self.stats.frames += 1;
            self.stats.bytes += self.slots[i].len as u64;
            let s = &mut self.slots[i];
            s.state = if s.queued == 0 {
                SlotState::Free
            } else {
                SlotState::Acked
            };
            return Ok(());
        }
        match a.events.action() {
            SenderAction::Terminate => Err(Error::Refused {
                va: a.va,
                causes: a.events.names().collect::<Vec<_>>().join(", "),
            }),
            SenderAction::RetransmitAfterWait => {
                self.stats.window_stalls += 1;
                self.slots[i].state = SlotState::Waiting {
                    until: now + self.cfg.wait,
                };
                Ok(())
            }
            SenderAction::Retransmit => {
                self.stats.retransmissions += 1;
                self.transmit(ep, now, i)
            }
        }
    }
}
