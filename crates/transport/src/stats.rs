//! Counters, as plain structs (quinn style).

/// Per-QP counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct QpStats {
    /// Packets received for this QP (before any check).
    pub rx_packets: u64,
    /// Payload bytes accepted.
    pub rx_bytes: u64,
    /// Packets sent (including retransmissions).
    pub tx_packets: u64,
    /// Payload bytes sent.
    pub tx_bytes: u64,
    /// PSN gaps seen by the responder (RC: out-of-sequence packets; UC: lost packets).
    pub psn_gaps: u64,
    /// Duplicate packets (PSN behind the expected one).
    pub duplicates: u64,
    /// Packets retransmitted.
    pub retransmissions: u64,
    /// Retransmit timer expiries.
    pub timeouts: u64,
    /// Times the RC congestion window was cut (once per loss event: a sequence NAK or a
    /// timeout).
    pub window_cuts: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// NAKs received (including RNR NAKs).
    pub naks_received: u64,
    /// RNR NAKs received.
    pub rnr_naks_received: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// R_Key, access or bounds violations by the peer.
    pub access_violations: u64,
    /// WRITE packets refused because they touched a page the application still held
    /// ([`crate::Holds`]): the frame it belonged to is lost to the reader that held on.
    pub held_refusals: u64,
    /// Packets dropped by this QP (bad opcode sequence, UC drop state, no RECV on UD, …).
    pub drops: u64,
    /// UC messages discarded because of a gap.
    pub damaged_messages: u64,
    /// Packets from the peer's IP but another UDP source port than the one learnt
    /// ([`crate::QpInit::pin_peer_port`]), dropped.
    pub foreign_port: u64,
    /// ACKs and NAKs naming a PSN this QP has no packet outstanding at, and UC requests
    /// outside [`crate::QpInit::psn_window`], dropped.
    pub psn_refused: u64,
}

/// Endpoint-wide counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct EndpointStats {
    /// Datagrams handed to `handle_datagram`.
    pub rx_datagrams: u64,
    /// Datagrams produced by `poll_transmit`.
    pub tx_datagrams: u64,
    /// Not a valid RoCE v2 packet (truncated, bad header, bad pad, TVer ≠ 0).
    pub malformed: u64,
    /// ICRC mismatches (dropped).
    pub icrc_errors: u64,
    /// Packets whose ICRC could not be verified (IPv4 via a UDP socket, ID unknown).
    pub icrc_unverified: u64,
    /// Packets for a QP that does not exist or is not ready.
    pub unknown_qp: u64,
    /// P_Key mismatches.
    pub pkey_errors: u64,
}
