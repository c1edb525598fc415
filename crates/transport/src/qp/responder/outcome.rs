//! How a WRITE message ended at the responder, for QPs that report messages
//! ([`crate::QpInit::report_messages`]): the per-message verdict a protocol that
//! acknowledges messages itself (IMS over UC) turns into its ACK or NACK.

use super::{InMsg, Qp, Sinks};
use crate::Event;
use crate::mr::AccessError;

/// How a WRITE message ended ([`Event::WriteMessage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageOutcome {
    /// Its last packet was accepted: every byte of `[va, va + len)` was placed.
    Delivered,
    /// A packet with an unexpected PSN (a loss, a reorder, a duplicate) cut it short.
    Sequence,
    /// A MIDDLE or LAST packet came with no message in progress: its FIRST was never
    /// seen (lost, or the responder was reset in between).
    NoStart,
    /// A packet's length did not fit its opcode (a FIRST or MIDDLE shorter than the MTU,
    /// any packet longer than the MTU) or broke the QP's [`crate::WriteRules`] (shorter than
    /// `min_packet`, a FIRST or MIDDLE not a multiple of `packet_step`).
    Length,
    /// The packets did not add up to the message's DMA length (a LAST that does not end
    /// it, a FIRST or MIDDLE that reaches its end), or the DMA length is over 2³¹.
    FrameLength,
    /// Its VA is not a multiple of the QP's [`crate::WriteRules::va_align`].
    Misaligned,
    /// No region has its R_Key.
    UnknownKey,
    /// The region does not allow remote writes.
    Denied,
    /// `[va, va + len)` is not inside the region (or straddles a ring region's end).
    OutOfBounds,
    /// `[va, va + len)` is not inside a ring region's write window.
    OutsideWindow,
    /// A new FIRST or ONLY came before its LAST.
    Interrupted,
    /// It carried an immediate and no receive was posted for it.
    NoReceive,
    /// Its sender marked a packet of it bad: the reserved BTH bits of that packet that the
    /// QP honours ([`crate::WriteRules::marks`]).
    Marked(u8),
}

impl From<AccessError> for MessageOutcome {
    fn from(e: AccessError) -> MessageOutcome {
        match e {
            AccessError::UnknownKey(_) => MessageOutcome::UnknownKey,
            AccessError::Denied | AccessError::Shared => MessageOutcome::Denied,
            AccessError::OutOfBounds { .. } => MessageOutcome::OutOfBounds,
            // a page the application still reads: the window has not come round to it
            AccessError::OutsideWindow { .. } | AccessError::Held { .. } => {
                MessageOutcome::OutsideWindow
            }
        }
    }
}

impl MessageOutcome {
    fn bit(self) -> u16 {
        1 << match self {
            MessageOutcome::Delivered => 0,
            MessageOutcome::Sequence => 1,
            MessageOutcome::NoStart => 2,
            MessageOutcome::Length => 3,
            MessageOutcome::FrameLength => 4,
            MessageOutcome::Misaligned => 5,
            MessageOutcome::UnknownKey => 6,
            MessageOutcome::Denied => 7,
            MessageOutcome::OutOfBounds => 8,
            MessageOutcome::OutsideWindow => 9,
            MessageOutcome::Interrupted => 10,
            MessageOutcome::NoReceive => 11,
            MessageOutcome::Marked(_) => 12,
        }
    }
}

/// Every check a WRITE message failed ([`crate::Event::WriteMessage`]'s `faults`): one
/// packet can break several rules at once — a FIRST with an unknown R_Key and an unaligned
/// VA — and a protocol that reports each (IMS's NACK event bits) needs all of them. A
/// delivered message has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Faults {
    bits: u16,
    marks: u8,
}

impl Faults {
    /// Only `o` (none for [`MessageOutcome::Delivered`]).
    pub fn of(o: MessageOutcome) -> Faults {
        let mut f = Faults::default();
        f.add(o);
        f
    }

    /// Add `o`.
    pub fn add(&mut self, o: MessageOutcome) {
        if o == MessageOutcome::Delivered {
            return;
        }
        self.bits |= o.bit();
        if let MessageOutcome::Marked(m) = o {
            self.marks |= m;
        }
    }

    /// Whether `o` is among them (any marks match [`MessageOutcome::Marked`]).
    pub fn contains(&self, o: MessageOutcome) -> bool {
        self.bits & o.bit() != 0
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.bits == 0
    }

    /// Each of them, in the order of [`MessageOutcome`]'s variants.
    pub fn iter(&self) -> impl Iterator<Item = MessageOutcome> + '_ {
        use MessageOutcome::*;
        [
            Sequence,
            NoStart,
            Length,
            FrameLength,
            Misaligned,
            UnknownKey,
            Denied,
            OutOfBounds,
            OutsideWindow,
            Interrupted,
            NoReceive,
            Marked(self.marks),
        ]
        .into_iter()
        .filter(|o| self.contains(*o))
    }
}

/// A message's identity for its report: first PSN, VA, R_Key, DMA length.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MsgId {
    pub(super) first_psn: u32,
    pub(super) va: u64,
    pub(super) rkey: u32,
    pub(super) len: u32,
}

impl MsgId {
    /// The report of a message whose FIRST was never seen: only the PSN of the packet that
    /// showed it.
    pub(super) fn no_start(psn: u32) -> MsgId {
        MsgId {
            first_psn: psn,
            ..MsgId::default()
        }
    }
}

impl From<&InMsg> for MsgId {
    fn from(m: &InMsg) -> MsgId {
        MsgId {
            first_psn: m.first_psn,
            va: m.va,
            rkey: m.rkey,
            len: m.dma_len as u32,
        }
    }
}

impl Qp {
    /// Report how WRITE message `m` ended, if this QP reports messages.
    #[inline]
    pub(super) fn report_message(&self, sinks: &mut Sinks, m: MsgId, outcome: MessageOutcome) {
        self.report_faults(sinks, m, outcome, Faults::of(outcome));
    }

    /// Report how WRITE message `m` ended: `outcome`, the first check it failed, and
    /// `faults`, every one it failed.
    #[inline]
    pub(super) fn report_faults(
        &self,
        sinks: &mut Sinks,
        m: MsgId,
        outcome: MessageOutcome,
        faults: Faults,
    ) {
        if self.report_messages {
            sinks.events.push_back(Event::WriteMessage {
                qpn: self.qpn,
                first_psn: m.first_psn,
                va: m.va,
                rkey: m.rkey,
                len: m.len,
                outcome,
                faults,
            });
        }
    }
}
