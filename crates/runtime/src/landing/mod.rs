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
