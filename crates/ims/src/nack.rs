//! What a buffer unit answers for each way a frame can end (the transport's
//! [`MessageOutcome`]), and NACK counters per cause of Table 3.7.

use rocelink_transport::{Faults, MessageOutcome};
use rocelink_wire::ims::{Events, marks};

/// The Table 3.7 event bits of a NACK for `outcome` (0: ACK).
///
/// | outcome | NACK cause |
/// |---|---|
/// | sequence (a lost, late or repeated packet) | out of sequence |
/// | no start (a MIDDLE/LAST without its FIRST) | no start of frame (VA 0) |
/// | a packet too short or too long | packet length |
/// | packets not adding up to the RETH's length, a FIRST before the LAST | frame length |
/// | unknown R_Key, region not writable | invalid RKEY |
/// | VA not 64-byte aligned, outside the region | invalid VA |
/// | outside the write window | outside window |
/// | carried an immediate with no receive for it | frame length |
/// | a packet marked bad by its sender ([`rocelink_wire::ims::marks`]) | end of bad packet / end of bad frame |
pub fn events_for(outcome: MessageOutcome) -> u32 {
    match outcome {
        MessageOutcome::Delivered => 0,
        MessageOutcome::Sequence => Events::OUT_OF_SEQUENCE,
        MessageOutcome::NoStart => Events::NO_START_OF_FRAME,
        MessageOutcome::Length => Events::PACKET_LENGTH,
        MessageOutcome::UnknownKey | MessageOutcome::Denied => Events::INVALID_RKEY,
        MessageOutcome::Misaligned | MessageOutcome::OutOfBounds => Events::INVALID_VA,
        MessageOutcome::OutsideWindow => Events::OUTSIDE_WINDOW,
        MessageOutcome::Marked(bits) if marks::events(bits) != 0 => marks::events(bits),
        _ => Events::FRAME_LENGTH,
    }
}

/// The Table 3.7 event bits for every check a frame failed (Table 3.7: "for each detected
/// error the corresponding bit is set"); 0 for none.
pub fn events_for_faults(faults: Faults) -> u32 {
    faults.iter().fold(0, |bits, o| bits | events_for(o))
}

/// NACKs counted per cause (a NACK with several causes counts under each). Serialised as
/// an object of the causes' names ([`NackCounts::named`]) and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NackCounts(pub [u64; 12]);

impl serde::Serialize for NackCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.named())
    }
}

impl NackCounts {
    /// Count a NACK with `events`.
    pub fn add(&mut self, events: Events) {
        for (i, n) in self.0.iter_mut().enumerate() {
            if events.0 & (1 << i) != 0 {
                *n += 1;
            }
        }
    }

    /// The count of cause `bit` (an [`Events`] constant).
    pub fn get(&self, bit: u32) -> u64 {
        self.0
            .get(bit.trailing_zeros() as usize)
            .copied()
            .unwrap_or(0)
    }

    /// (name, count) of every cause, in bit order, with the names of
    /// [`Events::names`].
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        (0..12).map(|i| {
            let name = Events(1 << i).names().next().unwrap_or("?");
            (name, self.0[i])
        })
    }

    /// Every count added together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_wire::ims::SenderAction;

    #[test]
    fn each_outcome_asks_the_worker_for_the_table_3_4_action() {
        use MessageOutcome::*;
        assert_eq!(events_for(Delivered), 0);
        for o in [
            Sequence,
            NoStart,
            Length,
            FrameLength,
            Interrupted,
            Marked(marks::EBP),
            Marked(marks::EBF),
        ] {
            assert_eq!(
                Events(events_for(o)).action(),
                SenderAction::Retransmit,
                "{o:?}"
            );
        }
        assert_eq!(
            Events(events_for(OutsideWindow)).action(),
            SenderAction::RetransmitAfterWait
        );
        for o in [UnknownKey, Denied, Misaligned, OutOfBounds] {
            assert_eq!(
                Events(events_for(o)).action(),
                SenderAction::Terminate,
                "{o:?}"
            );
        }
    }

    #[test]
    fn every_fault_sets_its_bit() {
        let mut f = Faults::of(MessageOutcome::UnknownKey);
        f.add(MessageOutcome::Misaligned);
        f.add(MessageOutcome::Length);
        assert_eq!(
            events_for_faults(f),
            Events::INVALID_RKEY | Events::INVALID_VA | Events::PACKET_LENGTH
        );
        assert_eq!(events_for_faults(Faults::default()), 0);
        assert_eq!(
            events_for_faults(Faults::of(MessageOutcome::Marked(marks::EBF | marks::EBP))),
            marks::events(marks::EBF | marks::EBP)
        );
    }

    #[test]
    fn counts_per_cause_by_name() {
        let mut c = NackCounts::default();
        c.add(Events(Events::OUT_OF_SEQUENCE | Events::OUTSIDE_WINDOW));
        c.add(Events(Events::OUTSIDE_WINDOW));
        assert_eq!(c.get(Events::OUTSIDE_WINDOW), 2);
        assert_eq!(c.get(Events::OUT_OF_SEQUENCE), 1);
        assert_eq!(c.total(), 3);
        let named: Vec<_> = c.named().filter(|&(_, n)| n > 0).collect();
        assert_eq!(named, [("out_of_sequence", 1), ("outside_window", 2)]);
    }
}
