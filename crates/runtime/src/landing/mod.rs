//! Receiving straight into a role's memory: the role predicts where its next datagrams'
//! payloads go ([`Plan`]), the kernel copies each payload there through a scatter
//! `recvmmsg` ([`rocelink_io::scatter`]), and the transport verifies each where it landed
//! ([`Endpoint::handle_landed`]). Every role that lands payloads — the RDMA responders
//! through [`crate::Driver::run_landing`], the HSB frame receiver through its own loop —
//! goes through [`LandingRx`]: the roles only say where.
//!
//! [`Endpoint::handle_landed`]: rocelink_transport::Endpoint::handle_landed
//!
//! Nothing is trusted for being in place. After a receive the batch is sorted
//! ([`LandingRx::recv`]): a segment fits its slot when its size and header layout match
//! the slot's split into headers, payload and tail, and — for a slot that names the VA its
//! packet's RETH must carry ([`Plan::expect_at`]) — when the RETH names that VA. At the
//! first segment that does not fit, it and every later one of the batch are gathered back
//! into whole datagrams before anything else happens, and handled the copying way. A
//! segment that fits is checked by the transport as any datagram (ICRC over the headers,
//! the payload where it landed and the tail; QP, P_Key, PSN, R_Key, bounds, peer), which
//! leaves it where it is only when that is where it belongs and copies it there
//! otherwise; after a copy (or a refusal) the batch's later payloads are copied out too
//! and handled as datagrams, so nothing the transport wrote can have been read as a later
//! packet's payload.
//!
//! A role that can take them ([`LandingRx::handle_run`]) gets the landed segments of one
//! message as one run ([`Endpoint::handle_landed_run`]): the transport checks the first in
//! full and each later one against the one before it, with the QP, the region and the
//! ICRC's prefix looked up once; where a run stops, the next segment goes by itself, as
//! above.
//!
//! [`Endpoint::handle_landed_run`]: rocelink_transport::Endpoint::handle_landed_run
//!
//! A prediction may only name bytes no accepted data still needs: the buffers of receives
//! posted and not yet completed, in completion order (a datagram completes at most one
//! receive, so a copy only ever moves bytes to an earlier slot); or, for WRITEs, bytes the
//! role knows nobody reads now (the rest of a message under way, a ring page past what
//! its frame has written).
//!
//! Lost packets shift a stream of WRITE ONLY packets: each later RETH names a VA past the
//! one planned by the same distance. A slot may allow that ([`Plan::expect_at`]'s
//! `movable_to`): such segments fit, and once the batch is sorted their payloads are moved
//! forward to where their RETHs say, last first (no move overwrites a payload not yet
//! moved), so the stream stays on the landing path through a loss.
//!
//! # Posted receives and WRITEs under way
//!
//! The same scatter receive serves any role that can say where its next payloads go; the
//! runtime does the receiving and the checks stay in the transport.
//!
//! - A `Role` may implement `predict(ep, plan)`: one slot per expected datagram, in arrival
//!   order (headers, the payload's place in a region, pad + ICRC). `drive` hands it to
//!   `Driver::run_landing`, which plans at most what one receive can fill (one GRO message's
//!   64 KiB, or 64 one-segment messages), stops at the first slot that is not above the one
//!   before (a ring's wrap, a bounce buffer) and receives with `ScatterRx`.
//! - A segment that fills its slot exactly, with the opcode's header length and the slot's pad
//!   (and, for a slot made by `Plan::expect_at`, its RETH naming the slot's VA), goes to
//!   `Endpoint::handle_landed`. For a UD SEND the transport verifies it as a datagram
//!   (ICRC over headers, the landed payload and the tail; QP, Q_Key) and completes the next
//!   posted receive: it leaves the payload where it is when that receive's scatter list puts
//!   it exactly there (one piece of the region at that offset), and copies it there otherwise
//!   (`Landing::Received { in_place }`). Anything else is gathered back into one datagram and
//!   handled the copying way.
//! - The ultrasound host predicts its posted receives: each message's place in its shot
//!   buffer, after the 40-byte GRH slot it discards. Only receives posted since the last
//!   message that landed in another's place are named: before that, the receives are in the
//!   order of a stream that had a fault, and the host moves messages between places when it
//!   hands a shot on, so nothing may land there unasked.
//! - A responder of RDMA WRITEs (the perftest WRITE bandwidth server, the IMS buffer unit)
//!   predicts the rest of the message under way: `Plan::expect_write(ep, qpn)` asks the
//!   transport (`Endpoint::write_under_way`) where the next packet's payload goes and how many
//!   bytes follow, and plans a BTH-only slot per packet there, in PSN order. With no message
//!   under way the role calls `Plan::next_alone()`: the next datagram is received alone, the
//!   copying way — a WRITE's first packet names where the rest goes — and the role plans
//!   again after it. Only the message's own remaining range is named: its first packet was
//!   accepted there (access, bounds, window, no held page, LOCAL_WRITE for the landing zone),
//!   and the message overwrites it if it completes. Whatever lands there — a duplicate, a
//!   corrupted or forged packet, the packet after a lost one — is refused or copied to its
//!   place as always; but if the message then does not complete (UC drops it at a loss), the
//!   landed bytes stay where the copying receive would have written nothing. So the role
//!   names only ranges whose old bytes matter to no one: the perftest server's buffer, and
//!   the IMS ring outside the frames delivered and not yet consumed — a worker that missed an
//!   ACK sends a delivered frame again, and landing that copy over the frame the consumer is
//!   about to read would corrupt it. The namespace test with nftables loss caught exactly
//!   that: without the check 2 of 4 runs delivered a frame with a bad CRC-32C; with it, none
//!   in 5.
//!   `crates/runtime/tests/write_landing.rs` sends 40 five-packet WRITEs with seeded faults
//!   (UC: loss, duplicates, swaps, corruption; RC: duplicates and corrupted copies) over
//!   loopback, with and without GRO, to a landing and a copying receiver: equal message
//!   reports, the sent bytes in every delivered message, nothing written between the
//!   messages, and both in-place and left paths taken. Predicting a wrong offset on purpose
//!   leaves the reports and bytes right and only the in-place count fails.
//! - RC and UC SENDs land too (`Plan::expect_sends(ep, qpn)`): the transport says where the
//!   next SEND payloads go (`Endpoint::recv_under_way`: the receive of the message under way
//!   from its next byte, then each posted receive, only its first scatter entry), and the
//!   plan names a BTH-only slot per packet, FIRST, MIDDLE… LAST (ONLY for one packet), per
//!   receive. Receives posted again into one buffer (a bandwidth server's) make a plan go
//!   back to a lower place; such a plan may continue as long as no two of its slots overlap
//!   (`io::scatter` checks every plan for overlap, in any order).
//! - A slot planned for a QP (`expect_write`, `expect_sends`) fits only a packet for that QP
//!   that is the packet of the message the slot expects (its opcode's low five bits: FIRST,
//!   MIDDLE, LAST, ONLY; for a WRITE's rest, MIDDLE or LAST). Otherwise the transport would
//!   place it elsewhere, and a copy to a later slot could overwrite a payload not yet
//!   handled: on UC, a message whose end was lost is dropped, and the next message's FIRST,
//!   landed in a MIDDLE's slot, belongs to the next receive — further on in the plan. The
//!   send-landing test catches exactly that when the check is taken out (completions differ).
//! - The role does not run while landed payloads of a batch wait in its buffers: the batch is
//!   handled through before the role is polled. The first segment that does not fit its slot
//!   and every later one are copied out when the batch is sorted, before anything is
//!   handled; after a segment the transport copied to its place, the rest of the batch is
//!   copied out too. Those are handled datagram by datagram with the role polled after each,
//!   exactly as the copying receive does; what is left when the role asks to stop waits,
//!   copied out, for the next call. A refused segment wrote nothing, so the batch goes on.
//! - A plan names only buffers of receives posted and not completed. A datagram completes at
//!   most one receive, so the receive it completes is never later in the plan than the slot
//!   it landed in: a copy only ever moves bytes to an earlier slot, never over a payload not
//!   yet handled.
//! - `crates/ultrasound/tests/landing.rs` sends a probe's packets with seeded loss,
//!   duplicates, swaps and corruption over loopback, with and without GRO, to a landing host
//!   and to a copying host: equal shot reports, equal bytes, and both in-place and left paths
//!   taken. `crates/runtime/tests/send_landing.rs` does the same for RC and UC SENDs of 40
//!   messages: each receive in a buffer of its own (in descending order, so plans wrap) or
//!   all in one, paced or back to back (runs that span messages): equal completions, the
//!   sent bytes in every receive completed, nothing between the buffers, and a clean stream
//!   entirely in place.
//! - Where landing pays: it saves the copy from the receive batch to the buffer, and costs
//!   a plan, two I/O vectors per segment and the matching. Into a large ring that is not in
//!   the cache (HSB, IMS) that is a copy saved; into a perftest server's one 64 KiB buffer,
//!   always in the cache, it is not: the SEND bandwidth server stays on the copying receive
//!   (measured slower landing, `docs/performance.md`).

mod plan;
mod rx;

pub use plan::Plan;
pub use rx::{Handled, LandingRx};

/// Counters of the landing receive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LandingStats {
    /// Segments the kernel put where the plan said and the transport accepted there.
    pub in_place: u64,
    /// Segments that fit a slot and were accepted, but belonged elsewhere: moved there
    /// forward past lost packets, or copied there by the transport.
    pub moved: u64,
    /// Segments that did not fit their slot (or followed one that had to be copied):
    /// gathered and handled as datagrams.
    pub gathered: u64,
    /// Segments that fit their slot but the transport refused (counted under the reason).
    pub refused: u64,
}

impl std::ops::AddAssign for LandingStats {
    fn add_assign(&mut self, o: LandingStats) {
        self.in_place += o.in_place;
        self.moved += o.moved;
        self.gathered += o.gathered;
        self.refused += o.refused;
    }
}
