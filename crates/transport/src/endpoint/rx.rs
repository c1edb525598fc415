//! The receive path: a datagram's headers and ICRC checked, then handed to its QP — whole
//! (`handle_datagram`), or with the payload already in a region (`handle_landed`).
//!
//! # In-place placement
//!
//! `Endpoint::handle_landed(now, Landed { src, dst, headers, lkey, offset, len, tail })` takes
//! an RDMA WRITE whose payload some backend already put into a region — the kernel through
//! scatter iovecs today, an AF_XDP UMEM or a NIC-like device later — with its headers and
//! pad+ICRC kept apart. It runs the same code as `handle_datagram` past the parse: the ICRC over
//! headers, the landed payload and the tail (`icrc::check_pieces`, one pass over the payload
//! that also yields its CRC-32 for frame CRCs), then QP, peer, P_Key, transport, state, PSN,
//! opcode sequence and length, R_Key, access and bounds of the destination; it advances the
//! QP's PSN state, counters, events and completions exactly as a copy would
//! (`crates/transport/tests/landed.rs` feeds twin endpoints the same datagrams, one whole and
//! one landed, and compares everything observable). The answer is `InPlace` (the bytes already
//! sat where the RETH says), `Copied` (they were moved there: a payload landed elsewhere, or in
//! another region) or `Refused` (counted under the reason). Only WRITE opcodes may arrive this
//! way: a SEND's payload has no place of its own (refused as malformed). The payload is read
//! only from inside its region (offset and length checked against the region first).
//!
//! Why not let the role keep its own checks: the HSB fast path used to check R_Key, QP and
//! bounds itself and wrote the ring directly, so the UC QP never saw most packets (its PSN state
//! and counters were wrong) and every new role would have re-implemented the checks. Now the
//! fast and generic paths give equal transport counters over 100 random fault schedules.
//!
//! Cost: the transport's generic per-packet work (lookups of QP and region, the PSN state, the
//! event the frame tracker reads) is more than the old inline checks; at 1408-byte payloads the
//! 4K stream costs more CPU than before (see `performance.md`, "In-place placement through the shared transport"). The one-pass header
//! parse (`IbRepr::parse_headers`, no copy of the header-order table per call — that copy had
//! been costing the generic path too), the ICRC's IP/UDP prefix kept per flow and packet length,
//! and a single region lookup for an in-place WRITE ONLY took back most of it.
//!
//! The lane (`endpoint/lane.rs`): the common landed packet — a UC RDMA WRITE ONLY
//! without immediate, no pad, to a UC QP that is between messages, not dropping and expecting
//! exactly its PSN — is checked by the same predicates in the same order (length and tail,
//! opcode/pad/version from the typed BTH view, DMA length, QP, P_Key, peer, responder state,
//! the payload inside its region, the ICRC, then R_Key, access and bounds through the same
//! `MrTable::place_landed`) without the general structures, and accounted by
//! `Qp::uc_write_only_placed`, which does what `uc_request` and `rc_uc_write` do for that
//! packet. It changes nothing unless every check passes; otherwise the general path decides and
//! counts the reason (an ICRC that fails is hashed twice — rare). It is a fast path *inside* the
//! transport, so no role re-implements a check; `tests/landed.rs` holds it to the general path
//! on seeded random streams of good and faulty packets (lost, replayed, wrong R_Key/P_Key/QP,
//! past the region, damaged, padded, landed elsewhere, with immediate, an open message), and
//! `tests/instructions.rs` fails if the landed path's instruction count goes back up.
//!
//! Runs (`Endpoint::handle_landed_run`): the packets of one GRO message are one sender's, so the
//! lane takes them as a run. The first is checked as above; each later one against the one
//! before — the BTH bytes up to the PSN and the R_Key equal, the PSN one more, VA and region
//! offset one payload further, its own ICRC from the run's prefix — with the QP, the region's
//! span (bounds and held pages, `MemoryRegion::in_place_span`) and the prefix looked up once,
//! and the QP accounted once at the end. The first packet that differs stops the run and goes
//! by itself, so no check is weaker; `tests/landed_runs.rs` plants each fault mid-run and holds
//! the result to a twin fed whole datagrams. `LandingRx::handle_run` hands a message's landed
//! segments over as a run; the HSB tracker and prediction account per run. The per-packet
//! work left is spread (the sort's fit of each segment, the plan and iovecs per slot, the
//! run's loop): the figures are in `docs/performance.md`.
//!
//! The UD lane (`endpoint/ud_lane.rs`) does the same for the ultrasound host's packets: a UD
//! SEND ONLY whose payload already sits where the next posted receive puts it, after a
//! discarded 40-byte GRH slot, is checked (layout, QP, state, P_Key, Q_Key, the receive's
//! segment and access, ICRC) and completed without the parsed header set, the GRH that would
//! be thrown away or a second walk of the scatter list; `tests/landed_ud.rs` holds it to whole
//! datagrams.
//!
//! The UD send lane (`qp/requester/ud_send.rs`) is the sender's half: a probe sends shot after
//! shot to one receiver, so a UD SEND gathered from one piece of a region reuses the headers
//! of the one before (kept per QP with the destination, Q_Key, P_Key, immediate flag and
//! length they were built for) and the ICRC's state after their fixed bytes, patching the PSN
//! and immediate. Inline data, several pieces, shared memory, payloads small enough to copy
//! and regions gone since posting take the general path; `tests/gather.rs` holds both to the
//! same bytes.

use super::{Datagram, Endpoint, IcrcPolicy, IcrcStatus};
use crate::qp::{Payload, QpState, QpType};
use rocelink_wire::ib::{ICRC_LEN, IbPacket, IbRepr, Opcode, Transport};
use rocelink_wire::icrc::{self, Pieces};
use rocelink_wire::udp;
use std::net::SocketAddr;
use std::time::Instant;

/// A received RDMA WRITE whose payload a backend already put into a registered region —
/// the kernel scattered it there (`recvmmsg` iovecs), or a NIC-like backend wrote it to
/// shared memory — with its headers and tail kept apart. [`Endpoint::handle_landed`]
/// verifies and accounts for it exactly as [`Endpoint::handle_datagram`] would have.
#[derive(Debug, Clone, Copy)]
pub struct Landed<'a> {
    /// Sender (IP and UDP port).
    pub src: SocketAddr,
    /// Where it was received (our IP and port).
    pub dst: SocketAddr,
    /// BTH and extended headers, as received.
    pub headers: &'a [u8],
    /// The region holding the payload (its local key) …
    pub lkey: u32,
    /// … the payload's byte offset in it …
    pub offset: usize,
    /// … and its length.
    pub len: usize,
    /// Pad bytes, then the ICRC, as received.
    pub tail: &'a [u8],
}

impl<'a> Landed<'a> {
    /// The datagram it came in, for the QP's checks of the peer (its payload is elsewhere).
    pub(super) fn datagram(&self) -> Datagram<'static> {
        Datagram {
            src: self.src,
            dst: self.dst,
            ip_header: None,
            payload: &[],
        }
    }

    /// Its addresses, for the ICRC: borrowed where they are (a fresh copy read back at once
    /// stalled on store forwarding in the per-packet profile).
    pub(super) fn flow(&self) -> Flow<'_> {
        Flow {
            src: &self.src,
            dst: &self.dst,
            ip_header: None,
        }
    }

    /// Its headers, `payload` (where it landed) and tail, as the ICRC covers them.
    pub(super) fn pieces<'p>(&self, payload: &'p [u8]) -> Pieces<'p>
    where
        'a: 'p,
    {
        let part = LandedPart {
            headers: self.headers,
            offset: self.offset,
            len: self.len,
            tail: self.tail,
        };
        part.pieces(payload)
    }
}

/// What the packets of a run of landed packets share ([`Endpoint::handle_landed_run`]): one
/// sender, one receiving address, one region — one GRO message, say.
#[derive(Debug, Clone, Copy)]
pub struct LandedFlow {
    /// Sender (IP and UDP port).
    pub src: SocketAddr,
    /// Where they were received (our IP and port).
    pub dst: SocketAddr,
    /// The region holding their payloads (its local key).
    pub lkey: u32,
}

/// One packet of a run: a [`Landed`] less what the run shares ([`LandedFlow`]).
#[derive(Debug, Clone, Copy)]
pub struct LandedPart<'a> {
    /// BTH and extended headers, as received.
    pub headers: &'a [u8],
    /// The payload's byte offset in the region …
    pub offset: usize,
    /// … and its length.
    pub len: usize,
    /// Pad bytes, then the ICRC, as received.
    pub tail: &'a [u8],
}

impl LandedFlow {
    /// Packet `p` of the run, whole.
    pub fn landed<'a>(&self, p: LandedPart<'a>) -> Landed<'a> {
        Landed {
            src: self.src,
            dst: self.dst,
            headers: p.headers,
            lkey: self.lkey,
            offset: p.offset,
            len: p.len,
            tail: p.tail,
        }
    }
}

impl<'a> LandedPart<'a> {
    /// Its headers, `payload` (where it landed) and tail, as the ICRC covers them.
    pub(super) fn pieces<'p>(&self, payload: &'p [u8]) -> Pieces<'p>
    where
        'a: 'p,
    {
        Pieces {
            headers: self.headers,
            payload,
            tail: self.tail,
        }
    }
}

/// The addresses (and, when the backend saw it, the IP header) the ICRC covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flow<'a> {
    src: &'a SocketAddr,
    dst: &'a SocketAddr,
    ip_header: Option<&'a [u8]>,
}

impl Datagram<'_> {
    /// Its addresses and IP header, for the ICRC.
    pub(super) fn flow(&self) -> Flow<'_> {
        Flow {
            src: &self.src,
            dst: &self.dst,
            ip_header: self.ip_header,
        }
    }
}

/// The rest of an RDMA WRITE a QP is in the middle of, where a backend may land it
/// ([`Endpoint::write_under_way`]): bytes `offset..offset + len` of region `lkey`, in
/// packets of `mtu` bytes (the last may be shorter), the first with PSN `psn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteUnderWay {
    /// The region (its local key).
    pub lkey: u32,
    /// Where in it the next packet's payload goes …
    pub offset: usize,
    /// … which is this VA of the message.
    pub va: u64,
    /// Bytes of the message from there on, as far as they lie in one piece of the region.
    pub len: usize,
    /// Payload bytes of every packet but the last.
    pub mtu: usize,
    /// The PSN the next packet must carry.
    pub psn: u32,
}

/// Where the payloads of a SEND message a QP receives go ([`Endpoint::recv_under_way`]):
/// bytes `offset..offset + len` of region `lkey`, in packets of `mtu` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvUnderWay {
    /// The region (its local key).
    pub lkey: u32,
    /// Where in it the message's next payload goes …
    pub offset: usize,
    /// … and how many bytes of the receive's first scatter entry are left from there.
    pub len: usize,
    /// Payload bytes of every packet but a message's last.
    pub mtu: usize,
    /// The message is under way (its next packet is a MIDDLE or LAST, not a FIRST or ONLY).
    pub under_way: bool,
}

/// What became of a [`Landed`] payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
#[non_exhaustive]
pub enum Landing {
    /// Verified and accepted where it landed: it was already where its RETH says. Its
    /// placement (`None` for a write of no bytes).
    InPlace(Option<Placement>),
    /// Verified, accepted, and copied to where its RETH says.
    Copied(Placement),
    /// A UD SEND, verified and delivered into the receive it completed: `in_place` when
    /// the payload already sat where that receive puts it (else it was copied there).
    Received {
        /// Nothing was copied.
        in_place: bool,
    },
    /// Not accepted (counted under the reason: ICRC, QP, P_Key, PSN, R_Key, access, bounds,
    /// malformed). The bytes where it landed are not data.
    Refused,
}

impl Landing {
    /// What was placed, if anything.
    pub fn placement(&self) -> Option<&Placement> {
        match self {
            Landing::InPlace(p) => p.as_ref(),
            Landing::Copied(p) => Some(p),
            Landing::Received { .. } | Landing::Refused => None,
        }
    }
}

/// Where an accepted [`Landed`] payload now is: what [`crate::Event::Placed`] reports for a
/// datagram, returned by [`Endpoint::handle_landed`] instead of queued (a receiver that lands
/// payloads accounts for each as it hands it over, without a trip through the event queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Placement {
    /// The packet's PSN.
    pub psn: u32,
    /// Region key.
    pub rkey: u32,
    /// Where.
    pub va: u64,
    /// How many bytes.
    pub len: u32,
    /// CRC-32 (IEEE) of those bytes, from the same pass that checked the ICRC.
    pub crc: u32,
}

impl Endpoint {
    /// Process one received datagram.
    pub fn handle_datagram(&mut self, now: Instant, d: Datagram<'_>) {
        self.stats.rx_datagrams += 1;
        self.last_icrc = None;
        let Ok(pkt) = IbPacket::new_checked(d.payload) else {
            self.stats.malformed += 1;
            return;
        };
        let ib = IbRepr::parse(&pkt);
        if ib.bth.tver != 0 || pkt.pad().iter().any(|&b| b != 0) {
            self.stats.malformed += 1;
            return;
        }
        let (h, p) = (pkt.header_len(), pkt.payload_len());
        let pieces = Pieces {
            headers: &d.payload[..h],
            payload: &d.payload[h..h + p],
            tail: &d.payload[h + p..],
        };
        let Some(pcrc) = self.verify_icrc(&d, pieces) else {
            return;
        };
        self.dispatch(now, &d, &ib, Payload::Bytes(pkt.payload()), pcrc);
    }

    /// Where the rest of the RDMA WRITE that QP `qpn` is in the middle of goes, for a
    /// backend that lands payloads ([`Endpoint::landing_zone`]): `None` when it is in none,
    /// or its bytes may not be written now (access — a landing zone also needs
    /// LOCAL_WRITE —, bounds, window, held pages). These are bytes the message claimed
    /// when its first packet was accepted, and that it overwrites if it completes; but if
    /// it does not (a lost packet on UC), what landed there in its stead stays, where the
    /// copying receive would have written nothing. So a backend may land only where the
    /// old bytes matter to no one: the application says where (a buffer nobody reads, a
    /// ring outside the frames it has not consumed). A ring's range that wraps is given up
    /// to the ring's end.
    pub fn write_under_way(&self, qpn: u32) -> Option<WriteUnderWay> {
        let q = self.qps.get(&qpn)?;
        let (rkey, va, left, psn) = q.write_under_way()?;
        let r = self.mrs.get_in(q.pd_id, rkey).ok()?;
        // (a landing zone needs LOCAL_WRITE, and memory the endpoint owns)
        if !r.access().contains(crate::Access::LOCAL_WRITE) || r.is_shared() {
            return None;
        }
        r.check_remote_write(va, left).ok()?;
        let [a, _] = r.ring_ranges(va, left).ok()?;
        if self.mrs.held(rkey, a.start, a.len()) {
            return None;
        }
        Some(WriteUnderWay {
            lkey: rkey,
            offset: a.start,
            va,
            len: a.len(),
            mtu: q.mtu_bytes,
            psn,
        })
    }

    /// Where the next payloads of SEND messages to QP `qpn` go, for a backend that lands
    /// payloads ([`Endpoint::landing_zone`]): `k` = 0 is the receive of the message under
    /// way (from where its next payload goes) or else the next posted one, `k` = 1 the
    /// receive after it, and so on. `None` past the posted receives, while a WRITE is under
    /// way, for a QP that is not an RC or UC one receiving, or where the receive's first
    /// scatter entry is no piece of a region that may be written now (access, bounds, held
    /// pages). Only that first entry is named. These are the buffers of receives posted and
    /// not completed, which the application gave up to the QP.
    pub fn recv_under_way(&self, qpn: u32, k: usize) -> Option<RecvUnderWay> {
        let q = self.qps.get(&qpn)?;
        if !matches!(q.qp_type, QpType::Rc | QpType::Uc)
            || !matches!(q.state, QpState::Rtr | QpState::Rts)
        {
            return None;
        }
        let (recv, at, under_way) = q.recv_under_way(k)?;
        let sge = *recv.sg_list.as_slice().first()?;
        let left = u64::from(sge.len).checked_sub(at).filter(|&n| n > 0)?;
        if sge.is_discard() {
            return None;
        }
        let r = self.mrs.get(sge.lkey).ok()?;
        if !r.access().contains(crate::Access::LOCAL_WRITE) || r.is_shared() {
            return None;
        }
        let offset = r.offset_of(sge.va + at, left).ok()?;
        let len = usize::try_from(left).ok()?;
        if self.mrs.held(sge.lkey, offset, len) {
            return None;
        }
        Some(RecvUnderWay {
            lkey: sge.lkey,
            offset,
            len,
            mtu: q.mtu_bytes,
            under_way,
        })
    }

    /// Process a received RDMA WRITE or SEND (RC or UC, any of FIRST/MIDDLE/LAST/ONLY, with
    /// or without immediate; UD SEND) whose payload already sits in a region (see
    /// [`Landed`]); a SEND goes to the posted receive it would go to as a datagram, its
    /// payload left in place when that is where the receive puts it. It is
    /// checked and accounted exactly as by [`Endpoint::handle_datagram`] — ICRC over the
    /// headers, the payload where it landed and the tail; QP, peer, P_Key, state and PSN;
    /// R_Key, access and bounds of the destination — and advances the QP's state and
    /// counters the same way. The payload is never read from outside the region: an offset
    /// or length past its end, headers that do not match the opcode, or another opcode, is
    /// refused and counted as malformed.
    pub fn handle_landed(&mut self, now: Instant, d: Landed<'_>) -> Landing {
        let lane = match d.headers.first().map(|&b| Opcode(b)) {
            Some(Opcode::UD_SEND_ONLY | Opcode::UD_SEND_ONLY_WITH_IMMEDIATE) => self.ud_lane(&d),
            _ => self.landed_lane(&d),
        };
        if let Some(l) = lane {
            return l;
        }
        self.stats.rx_datagrams += 1;
        self.last_icrc = None;
        self.sinks.landing = None;
        let payload = self.mrs.get(d.lkey).ok().and_then(|m| {
            let end = d.offset.checked_add(d.len)?;
            (end <= m.keys().len).then_some(())?;
            m.bytes().get(d.offset..end)
        });
        let Ok(ib) = IbRepr::parse_headers(d.headers, d.len) else {
            self.stats.malformed += 1;
            return Landing::Refused;
        };
        let pad = usize::from(ib.bth.pad_count & 3);
        let (Some(payload), true) = (
            payload,
            (ib.bth.opcode.is_write() || ib.bth.opcode.is_send())
                && ib.bth.tver == 0
                && d.tail.len() == pad + ICRC_LEN
                && d.tail[..pad].iter().all(|&b| b == 0),
        ) else {
            self.stats.malformed += 1;
            return Landing::Refused;
        };
        // (the payload borrows the region table; the check needs the endpoint)
        let (status, pcrc) = check_icrc(
            &mut self.prefixes,
            &mut self.comb,
            self.cfg.icrc,
            d.flow(),
            d.pieces(payload),
        );
        if !self.note_icrc(status) {
            return Landing::Refused;
        }
        let dg = d.datagram();
        let landed = Payload::Landed {
            lkey: d.lkey,
            offset: d.offset,
            len: d.len,
        };
        self.dispatch(now, &dg, &ib, landed, pcrc);
        self.sinks.landing.take().unwrap_or(Landing::Refused)
    }

    /// Hand a packet whose ICRC checked out to its QP.
    fn dispatch(
        &mut self,
        now: Instant,
        d: &Datagram<'_>,
        ib: &IbRepr,
        payload: Payload<'_>,
        payload_crc: u32,
    ) {
        if ib.bth.opcode == Opcode::CNP {
            return; // congestion notification: no rate control here
        }
        let Endpoint {
            qps,
            mrs,
            sinks,
            stats,
            ..
        } = self;
        let Some(q) = qp_for(qps, stats, d.src, ib) else {
            return;
        };
        let src = d.src;
        let op = ib.bth.opcode;
        let in_sequence = q.in_sequence(ib);
        if q.qp_type != QpType::Ud && in_sequence {
            q.learn_peer_port(src);
        }
        if op == Opcode::RC_ATOMIC_ACKNOWLEDGE {
            if matches!(q.state, QpState::Rts)
                && let (Some(a), Some(orig)) = (ib.aeth, ib.atomic_ack)
            {
                q.handle_atomic_ack(now, ib.bth.psn, a, orig, mrs, sinks);
            }
        } else if op == Opcode::RC_ACKNOWLEDGE {
            if matches!(q.state, QpState::Rts)
                && let Some(a) = ib.aeth
            {
                q.handle_ack(now, ib.bth.psn, a, sinks);
            }
        } else if op.is_read_response() {
            if matches!(q.state, QpState::Rts)
                && let Payload::Bytes(b) = payload
            {
                q.handle_read_response(now, ib, b, mrs, sinks);
            }
        } else {
            q.rx_payload_crc = payload_crc;
            // the IP header, for a UD receive's GRH slot only
            let mut synth = [0u8; 40];
            let net = if q.qp_type == QpType::Ud {
                let n = ib.header_len() + ib.payload_len + usize::from(ib.bth.pad_count & 3) + 4;
                crate::prefix::net_header(d.ip_header, src, d.dst, udp::HEADER_LEN + n, &mut synth)
                    .unwrap_or(&[])
            } else {
                &[]
            };
            q.handle_request(now, src, net, ib, payload, mrs, sinks);
        }
    }

    /// Check, count and remember a packet's ICRC; the payload's CRC-32 if it goes on.
    fn verify_icrc(&mut self, d: &Datagram<'_>, pieces: Pieces<'_>) -> Option<u32> {
        let (status, pcrc) = check_icrc(
            &mut self.prefixes,
            &mut self.comb,
            self.cfg.icrc,
            d.flow(),
            pieces,
        );
        self.note_icrc(status).then_some(pcrc)
    }

    /// Count an ICRC verdict and remember it for [`Endpoint::last_icrc`]; whether the
    /// packet goes on.
    fn note_icrc(&mut self, status: IcrcStatus) -> bool {
        self.last_icrc = Some(status);
        match status {
            IcrcStatus::Failed => {
                self.stats.icrc_errors += 1;
                false
            }
            IcrcStatus::IdRecovered(_) => {
                self.stats.icrc_unverified += 1;
                true
            }
            IcrcStatus::Exact => true,
        }
    }
}

/// Check the ICRC of a packet in `pieces` received from `d.src` at `d.dst`; also the CRC-32
/// of the payload, computed in the same single pass, for receivers that keep a running CRC
/// of placed data. Without a received IP header the IP+UDP part is hashed once per flow and
/// packet length.
pub(super) fn check_icrc(
    prefixes: &mut crate::prefix::PrefixCache,
    comb: &mut icrc::Combiner,
    policy: IcrcPolicy,
    f: Flow<'_>,
    pieces: Pieces<'_>,
) -> (IcrcStatus, u32) {
    if cfg!(fuzzing) {
        return (IcrcStatus::Exact, 0);
    }
    let ib_len = pieces.headers.len() + pieces.payload.len() + pieces.tail.len();
    let prefix = match f.ip_header {
        Some(h) => icrc::socket_udp_header(*f.src, *f.dst, ib_len)
            .and_then(|u| icrc::IcrcHasher::prefix(h, &u))
            .ok(),
        None => prefixes.get(f.src, f.dst, ib_len),
    };
    let Some(prefix) = prefix else {
        return (IcrcStatus::Failed, 0);
    };
    match icrc::check_pieces(prefix, pieces, comb) {
        Err(_) => (IcrcStatus::Failed, 0),
        Ok((c, pcrc)) if c.ok() => (IcrcStatus::Exact, pcrc),
        Ok((c, pcrc)) => {
            let id =
                (f.ip_header.is_none() && f.src.is_ipv4() && policy == IcrcPolicy::RecoverIpv4Id)
                    .then(|| icrc::recover_ipv4_ident(&c, ib_len))
                    .flatten();
            match id {
                Some(id) => (IcrcStatus::IdRecovered(id), pcrc),
                None => (IcrcStatus::Failed, pcrc),
            }
        }
    }
}

/// The payload's CRC-32 if the ICRC of a packet in `pieces` checks out exactly against
/// `prefix`, its flow's IP+UDP part ([`check_icrc`] with the prefix looked up already, for a
/// run of packets of one flow and length); `None` for any other verdict, which the full path
/// then gives and counts.
#[inline]
pub(super) fn exact_icrc(
    prefix: &icrc::IcrcHasher,
    comb: &mut icrc::Combiner,
    pieces: Pieces<'_>,
) -> Option<u32> {
    if cfg!(fuzzing) {
        return Some(0);
    }
    match icrc::check_pieces(prefix.clone(), pieces, comb) {
        Ok((c, pcrc)) if c.ok() => Some(pcrc),
        _ => None,
    }
}

/// Linux rxe `pkey_match`: low 15 bits equal and non-zero, one of them a full member.
pub(super) fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7FFF) == (b & 0x7FFF) && (a & 0x7FFF) != 0 && (a | b) & 0x8000 != 0
}

/// The QP a checked packet from `src` is for, when it may take it: the QP exists, the
/// P_Key matches, the sender is its peer (any sender for UD), the opcode is of its
/// transport. Counted where not.
fn qp_for<'q>(
    qps: &'q mut crate::keymap::KeyMap<crate::qp::Qp>,
    stats: &mut crate::stats::EndpointStats,
    src: SocketAddr,
    ib: &IbRepr,
) -> Option<&'q mut crate::qp::Qp> {
    let Some(q) = qps.get_mut(&ib.bth.dest_qp) else {
        stats.unknown_qp += 1;
        return None;
    };
    if !pkey_match(ib.bth.pkey, q.pkey) {
        stats.pkey_errors += 1;
        return None;
    }
    if q.qp_type != QpType::Ud && !q.is_peer(src) {
        if q.remote.is_some_and(|r| r.ip() == src.ip()) {
            q.stats.foreign_port += 1; // the peer's address, another port
        } else {
            stats.unknown_qp += 1; // not this QP's peer
        }
        return None;
    }
    q.stats.rx_packets += 1;
    let want = match q.qp_type {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud => Transport::Ud,
    };
    if ib.bth.opcode.transport() != want {
        q.stats.drops += 1;
        return None;
    }
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::pkey_match;

    #[test]
    fn pkeys() {
        assert!(pkey_match(0xFFFF, 0xFFFF));
        assert!(pkey_match(0x7FFF, 0xFFFF));
        assert!(!pkey_match(0x7FFF, 0x7FFF));
        assert!(!pkey_match(0x8000, 0x8000));
        assert!(!pkey_match(0xFFFF, 0x8001));
    }
}
