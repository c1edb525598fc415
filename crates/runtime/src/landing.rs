//! Receiving straight into a role's memory: the role predicts where its next datagrams'
//! payloads go ([`Plan`]), the kernel copies each payload there through a scatter
//! `recvmmsg` ([`rocelink_io::scatter`]), and the transport verifies each where it landed
//! ([`Endpoint::handle_landed`]). Every role that lands payloads — the RDMA responders
//! through [`crate::Driver::run_landing`], the HSB frame receiver through its own loop —
//! goes through [`LandingRx`]: the roles only say where.
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

use rocelink_io::scatter::{ScatterRx, Slot};
use rocelink_io::udp::UdpSocket;
use rocelink_transport::{AccessError, Datagram, Endpoint, Landed, Landing, WriteUnderWay};
use rocelink_wire::ib::{BTH_LEN, HeaderSet, ICRC_LEN, Opcode};
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

/// Where a role expects its next datagrams' payloads: region `lkey`, one slot per
/// datagram in arrival order.
#[derive(Debug, Default)]
pub struct Plan {
    /// The region the slots' bodies are in.
    pub lkey: u32,
    /// The expected datagrams (head: BTH and extension headers, body: the payload's place
    /// in the region, tail: pad and ICRC).
    slots: Vec<Slot>,
    /// What each slot's packet must say of its place (in step with `slots`).
    places: Vec<Place>,
    /// Slots and bytes one receive can fill: no more are taken.
    room: (usize, usize),
    /// Nothing placed: take the next datagram alone, the copying way, and plan again.
    alone: bool,
    /// A slot lies below one before it (receives that reuse a buffer): no run shifted by
    /// lost packets is moved then.
    wrapped: bool,
}

/// What the packet of a slot must say of its own place: the VA its RETH names — and up
/// to where a later VA may move it —, or the QP it is for and which of a message's
/// packets it is (the transport places it, where the plan expects exactly that packet).
#[derive(Debug, Clone, Copy, Default)]
struct Place {
    va: Option<u64>,
    movable_to: usize,
    /// The destination QP and the opcodes (their low five bits, as a mask) it may carry.
    packet: Option<(u32, u32)>,
}

/// Opcode masks (the low five bits, so RC and UC alike) of a message's packets.
const SEND_FIRST: u32 = 1 << 0x00;
const SEND_MIDDLE: u32 = 1 << 0x01;
const SEND_LAST: u32 = 1 << 0x02;
const SEND_ONLY: u32 = 1 << 0x04;
/// A WRITE's packets after its first (a range cut at a ring's end ends on a MIDDLE).
const WRITE_REST: u32 = 1 << 0x07 | 1 << 0x08;

impl Plan {
    /// Expect a datagram with `headers` bytes of BTH and extension headers whose `len`-byte
    /// payload goes to bytes `at..at + len` of the region. Returns whether the plan takes
    /// more (one receive fills only so many).
    pub fn expect(&mut self, headers: usize, at: usize, len: usize) -> bool {
        self.push(headers, at, len, Place::default(), false)
    }

    /// Expect an RDMA WRITE ONLY (or FIRST) packet — BTH, RETH and, with `imm`, immediate
    /// data — whose RETH names `va`, its `len`-byte payload at bytes `at..at + len` of the
    /// region. One whose RETH names a later VA, `va + d` (the packets before it were lost),
    /// fits too if `at + d + len <= movable_to`: its payload is moved to `at + d`, and the
    /// batch's later segments fit only if shifted by the same `d`. So the role must know
    /// that nobody needs the bytes up to `movable_to` (0: never moved). Returns whether the
    /// plan takes more.
    pub fn expect_at(
        &mut self,
        at: usize,
        len: usize,
        imm: bool,
        va: u64,
        movable_to: usize,
    ) -> bool {
        let headers = BTH_LEN + HeaderSet::RETH.ext_len() + if imm { 4 } else { 0 };
        let place = Place {
            va: Some(va),
            movable_to,
            packet: None,
        };
        self.push(headers, at, len, place, false)
    }

    /// Add a slot; returns whether the plan takes more. A slot below the one before it
    /// ends the plan (a ring's wrap, a bounce buffer), unless `wrap` allows one that
    /// overlaps no other (receives posted again into one buffer).
    fn push(&mut self, headers: usize, at: usize, len: usize, place: Place, wrap: bool) -> bool {
        let s = Slot {
            head: headers,
            body: at..at + len,
            tail: (4 - len % 4) % 4 + ICRC_LEN,
        };
        // (once a plan has wrapped, a slot above the one before may still meet an earlier one)
        if self.wrapped || self.slots.last().is_some_and(|l| l.body.end > s.body.start) {
            let apart = |l: &Slot| l.body.end <= s.body.start || s.body.end <= l.body.start;
            if !wrap || !self.slots.iter().all(apart) {
                self.room = (0, 0);
                return false;
            }
            self.wrapped = true;
        }
        let n = s.len();
        self.slots.push(s);
        self.places.push(place);
        self.room = (self.room.0.saturating_sub(1), self.room.1.saturating_sub(n));
        self.room.0 > 0 && self.room.1 > 0
    }

    /// Expect the rest of the RDMA WRITE QP `qpn` is in the middle of (see
    /// [`Endpoint::write_under_way`]), as MIDDLE and LAST packets in PSN order, in region
    /// `lkey` only if the plan is empty or already there. Returns whether it expected any.
    /// A WRITE's packets after its first carry the BTH alone (a LAST with immediate data
    /// does not fit its slot and is handled the copying way).
    pub fn expect_write(&mut self, ep: &Endpoint, qpn: u32) -> bool {
        let Some(WriteUnderWay {
            lkey,
            offset,
            len,
            mtu,
            ..
        }) = ep.write_under_way(qpn)
        else {
            return false;
        };
        if (!self.slots.is_empty() && self.lkey != lkey) || mtu == 0 {
            return false;
        }
        self.lkey = lkey;
        let mut at = offset;
        let mut more = true;
        let place = Place {
            packet: Some((qpn, WRITE_REST)),
            ..Place::default()
        };
        while more && at < offset + len {
            let n = mtu.min(offset + len - at);
            more = self.push(BTH_LEN, at, n, place, false);
            at += n;
        }
        true
    }

    /// Expect the SEND messages QP `qpn` receives next, into its posted receives (see
    /// [`Endpoint::recv_under_way`]): the rest of the one under way, then one message per
    /// receive, each filling its receive's first scatter entry in packets of the path MTU
    /// (a shorter message's LAST comes where a MIDDLE was expected: it and the rest of its
    /// batch are handled the copying way). Receives that reuse a buffer are expected too,
    /// as long as no two slots of the plan overlap. Returns whether it expected any.
    pub fn expect_sends(&mut self, ep: &Endpoint, qpn: u32) -> bool {
        let before = self.slots.len();
        let mut more = true;
        let mut k = 0;
        while more {
            let Some(u) = ep.recv_under_way(qpn, k) else {
                break;
            };
            if (!self.slots.is_empty() && self.lkey != u.lkey) || u.mtu == 0 {
                break;
            }
            self.lkey = u.lkey;
            let n = u.len.div_ceil(u.mtu);
            for i in 0..n {
                let at = u.offset + i * u.mtu;
                let len = u.mtu.min(u.offset + u.len - at);
                let op = match (i == 0 && !u.under_way, i + 1 == n) {
                    (true, true) => SEND_ONLY,
                    (true, false) => SEND_FIRST,
                    (false, false) => SEND_MIDDLE,
                    (false, true) => SEND_LAST,
                };
                let place = Place {
                    packet: Some((qpn, op)),
                    ..Place::default()
                };
                let len_before = self.slots.len();
                more = self.push(BTH_LEN, at, len, place, true);
                if !more || self.slots.len() == len_before {
                    break;
                }
            }
            k += 1;
        }
        self.slots.len() > before
    }

    /// Expect nothing yet: the next datagram is received alone, the copying way, and the
    /// role is asked again after it — for a role whose next placement only the next
    /// packet can say (the first packet of a WRITE names where the rest goes).
    pub fn next_alone(&mut self) {
        self.alone = true;
    }

    /// How many datagrams it expects.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it expects none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

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

/// What [`LandingRx::handle_next`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Its payload was in the region: what the transport made of it, and its opcode.
    Landed(Landing, Opcode),
    /// It was handed to the transport as a whole datagram.
    Datagram,
}

/// The most a GRO message holds.
const GRO_BYTES: usize = 65_535;
/// The fewest slots a receive that brought few segments leaves for the next plan.
const ADAPT_MIN: usize = 8;

/// One received segment: message, index in it, byte range.
type Seg = (usize, usize, Range<usize>);

/// One segment of a sorted batch, in arrival order.
#[derive(Debug, Clone)]
enum Item {
    /// It fits `slot` (its headers and tail are in the scatter scratch) of message `msg`;
    /// its payload is at `offset..offset + len` of the region (moved there if `moved`).
    Landed {
        slot: usize,
        msg: usize,
        offset: usize,
        len: usize,
        moved: bool,
    },
    /// Copied out whole: bytes `scratch[range]` from `src`.
    Copied(Range<usize>, SocketAddr),
}

/// The scatter receive and the batch being handled: a role fills the plan
/// ([`LandingRx::plan_mut`]), receives ([`LandingRx::recv`]) and hands the batch to the
/// transport segment by segment ([`LandingRx::handle_next`]).
#[derive(Debug)]
pub struct LandingRx {
    rx: ScatterRx,
    gro: bool,
    /// Most messages per receive without GRO.
    msgs: usize,
    plan: Plan,
    /// The region of the batch being handled.
    lkey: u32,
    /// Plans follow what receives bring ([`LandingRx::adapting`]).
    adapt: bool,
    /// Slots the next plan may name: a little more than recent receives brought.
    want: usize,
    segs: Vec<Seg>,
    items: Vec<Item>,
    /// Next of `items` to handle.
    cursor: usize,
    /// Segments copied out, back to back.
    scratch: Vec<u8>,
    /// What became of the segments so far.
    pub stats: LandingStats,
}

impl LandingRx {
    /// Receive with GRO (one message of up to 64 KiB per call) or without (up to `msgs`
    /// datagrams per call, at most [`rocelink_io::scatter::MAX_MSGS`]).
    pub fn new(gro: bool, msgs: usize) -> LandingRx {
        LandingRx {
            rx: ScatterRx::new(if gro { 65_536 } else { 9_216 }),
            gro,
            msgs: msgs.clamp(1, rocelink_io::scatter::MAX_MSGS),
            plan: Plan::default(),
            lkey: 0,
            adapt: false,
            want: usize::MAX,
            segs: Vec::new(),
            items: Vec::new(),
            cursor: 0,
            scratch: Vec::with_capacity(65_536),
            stats: LandingStats::default(),
        }
    }

    /// Size each plan to what recent receives brought, and some: every slot costs the
    /// kernel two I/O vectors to walk, filled or not, and at a steady rate a receive brings
    /// a fraction of a full plan (a GSO sender's runs are all the same length). A receive
    /// that brings more than planned sends the rest the copying way once, and makes the
    /// next plan as long as it may be again. For a steady stream (HSB); a bursty one
    /// (shots, a bandwidth test's windows) keeps full plans.
    pub fn adapting(mut self) -> LandingRx {
        self.adapt = true;
        self
    }

    /// The plan to fill (cleared), with room for what one receive can fill: one GRO
    /// message's 64 KiB, or a slot for each message of a call (and, adapting, no more than
    /// recent receives brought and some).
    pub fn plan_mut(&mut self) -> &mut Plan {
        self.plan.slots.clear();
        self.plan.places.clear();
        self.plan.alone = false;
        self.plan.wrapped = false;
        self.plan.room = if self.gro {
            (self.want, GRO_BYTES)
        } else {
            (self.msgs.min(self.want), usize::MAX)
        };
        &mut self.plan
    }

    /// Receive one batch into the plan [`LandingRx::plan_mut`] filled, and sort it.
    /// Returns the messages received (`None`: the plan names nothing, receive the copying
    /// way).
    pub fn recv(
        &mut self,
        sock: &UdpSocket,
        ep: &mut Endpoint,
        wait: Option<Duration>,
    ) -> io::Result<Option<usize>> {
        if self.plan.slots.is_empty() {
            return Ok(None);
        }
        self.recv_any(sock, ep, wait).map(Some)
    }

    /// As [`LandingRx::recv`], also when the plan names nothing (then every datagram is
    /// handled the copying way). Returns the messages received.
    pub fn recv_any(
        &mut self,
        sock: &UdpSocket,
        ep: &mut Endpoint,
        wait: Option<Duration>,
    ) -> io::Result<usize> {
        self.lkey = self.plan.lkey;
        // with GRO a message holds an unknown number of segments, so a second message's
        // plan could not know where to start: one message per call, every slot its own
        // (planning 64 KiB per message was tried: the sender's runs are cut where its
        // flushes end, and a third of the segments then landed out of place)
        let slots = self.plan.slots.len();
        let (per_msg, msgs) = if self.gro {
            (slots.max(1), 1)
        } else {
            (1, if slots == 0 { self.msgs } else { slots })
        };
        let mut none: [u8; 0] = [];
        let zone = if slots == 0 {
            &mut none[..]
        } else {
            ep.landing_zone(self.lkey).map_err(io::Error::other)?
        };
        let n = self
            .rx
            .recv_wait(sock, zone, &self.plan.slots, per_msg, msgs, wait)?;
        self.split();
        if self.adapt {
            self.want = next_want(self.want, self.segs.len(), slots);
        }
        self.sort(ep)?;
        Ok(n)
    }

    /// Split the received messages into segments.
    fn split(&mut self) {
        self.segs.clear();
        for (m, meta) in self.rx.meta().iter().enumerate() {
            // a truncated datagram's last segment is incomplete; gathered, it fails the
            // transport's length and ICRC checks
            let (mut at, mut k) = (0, 0);
            while at < meta.len {
                let r = at..(at + meta.segment.max(1)).min(meta.len);
                at = r.end;
                self.segs.push((m, k, r));
                k += 1;
            }
        }
    }

    /// Sort the batch: the segments that fit their slots, up to the first that does not,
    /// stay in the region; that one and every later one are gathered into `scratch` before
    /// anything moves. Then payloads shifted by lost packets are moved to their place,
    /// last first.
    fn sort(&mut self, ep: &mut Endpoint) -> io::Result<()> {
        self.items.clear();
        self.cursor = 0;
        self.scratch.clear();
        let mut shift = None;
        let mut missed = false;
        {
            let region = ep.mr(self.lkey).map_or(&[][..], |m| m.bytes());
            for (m, k, r) in self.segs.iter().cloned() {
                if !missed {
                    if let Some(item) = self.fit(m, k, r.clone(), &mut shift) {
                        self.items.push(item);
                        continue;
                    }
                    missed = true;
                }
                let start = self.scratch.len();
                self.rx.gather(region, m, r, &mut self.scratch);
                let src = self.rx.meta()[m].src;
                self.items
                    .push(Item::Copied(start..self.scratch.len(), src));
            }
        }
        if shift.is_none() {
            return Ok(());
        }
        for item in self.items.iter().rev() {
            let &Item::Landed {
                slot,
                offset,
                len,
                moved: true,
                ..
            } = item
            else {
                continue;
            };
            let from = self.plan.slots[slot].body.start;
            match ep.move_landed(self.lkey, from, offset, len) {
                // lent out: left where it landed, and refused when handled (its ICRC, over
                // bytes that did not move, fails first)
                Ok(()) | Err(AccessError::Held { .. }) => {}
                Err(e) => return Err(io::Error::other(e)),
            }
        }
        Ok(())
    }

    /// Whether segment `k` (bytes `r`) of message `m` fits the slot it filled: exactly, with
    /// its headers and pad laid out as the slot splits them, and its RETH naming the
    /// slot's VA (or one past it by `shift`, which the first such segment sets).
    fn fit(&self, m: usize, k: usize, r: Range<usize>, shift: &mut Option<usize>) -> Option<Item> {
        let j = self.rx.slot_for_segment(m, k, r)?;
        let s = &self.plan.slots[j];
        let h = self.rx.head(j);
        let headers = Opcode(*h.first()?).headers()?;
        let pad = usize::from((*h.get(1)? >> 4) & 3);
        if BTH_LEN + headers.ext_len() != s.head || pad + ICRC_LEN != s.tail {
            return None;
        }
        let place = self.plan.places[j];
        if let Some((qpn, ops)) = place.packet {
            // for that QP, and the packet of the message the slot expects (else the
            // transport would place it elsewhere, maybe over a payload not yet handled)
            let dest = u32::from_be_bytes([0, *h.get(5)?, *h.get(6)?, *h.get(7)?]);
            if dest != qpn || ops & (1 << (h[0] & 0x1F)) == 0 {
                return None;
            }
        }
        let landed = |d: usize| Item::Landed {
            slot: j,
            msg: m,
            offset: s.body.start + d,
            len: s.body.len(),
            moved: d > 0,
        };
        let Some(want) = place.va else {
            // placed by the transport: only where nothing before it moved
            return shift.is_none().then(|| landed(0));
        };
        // the RETH follows the BTH directly (no RDETH or DETH on RC and UC)
        if !headers.has(HeaderSet::RETH) || headers.has(HeaderSet::DETH) {
            return None;
        }
        let va = u64::from_be_bytes(h.get(BTH_LEN..BTH_LEN + 8)?.try_into().ok()?);
        let d = usize::try_from(va.checked_sub(want)?).ok()?;
        match *shift {
            None if d == 0 => return Some(landed(0)),
            Some(sd) if sd != d => return None,
            _ => {}
        }
        if self.plan.wrapped || s.body.end.checked_add(d)? > place.movable_to {
            return None;
        }
        *shift = Some(d);
        Some(landed(d))
    }

    /// Handle the next segment of the batch: `None` when none is left.
    pub fn handle_next(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        local: SocketAddr,
    ) -> Option<Handled> {
        let item = self.items.get(self.cursor).cloned()?;
        self.cursor += 1;
        let (slot, msg, offset, len, moved) = match item {
            Item::Copied(r, src) => {
                self.stats.gathered += 1;
                let d = Datagram {
                    src,
                    dst: local,
                    ip_header: None,
                    payload: &self.scratch[r],
                };
                ep.handle_datagram(now, d);
                return Some(Handled::Datagram);
            }
            Item::Landed {
                slot,
                msg,
                offset,
                len,
                moved,
            } => (slot, msg, offset, len, moved),
        };
        let headers = self.rx.head(slot);
        let opcode = Opcode(headers.first().copied().unwrap_or(0));
        let l = ep.handle_landed(
            now,
            Landed {
                src: self.rx.meta()[msg].src,
                dst: local,
                headers,
                lkey: self.lkey,
                offset,
                len,
                tail: self.rx.tail(slot),
            },
        );
        match l {
            Landing::Refused => self.stats.refused += 1,
            Landing::InPlace(_) | Landing::Received { in_place: true } if !moved => {
                self.stats.in_place += 1
            }
            Landing::InPlace(_) | Landing::Received { in_place: true } => self.stats.moved += 1,
            _ => {
                // the transport copied it: to a place a later payload may still sit in
                self.stats.moved += 1;
                self.settle(ep);
            }
        }
        Some(Handled::Landed(l, opcode))
    }

    /// Copy the batch's payloads not handled yet out of the region, to be handled as
    /// datagrams.
    fn settle(&mut self, ep: &Endpoint) {
        let region = ep.mr(self.lkey).map_or(&[][..], |m| m.bytes());
        for i in self.cursor..self.items.len() {
            let Item::Landed {
                slot,
                msg,
                offset,
                len,
                ..
            } = self.items[i]
            else {
                continue;
            };
            let start = self.scratch.len();
            self.scratch.extend_from_slice(self.rx.head(slot));
            // (a region gone meanwhile: a datagram too short, refused as malformed)
            if let Some(body) = region.get(offset..offset + len) {
                self.scratch.extend_from_slice(body);
                self.scratch.extend_from_slice(self.rx.tail(slot));
            }
            let src = self.rx.meta()[msg].src;
            self.items[i] = Item::Copied(start..self.scratch.len(), src);
        }
    }

    /// The plan asked for the next datagram alone ([`Plan::next_alone`]) and named no
    /// place (the flag is cleared: it holds for one receive).
    pub fn take_alone(&mut self) -> bool {
        std::mem::take(&mut self.plan.alone) && self.plan.slots.is_empty()
    }

    /// Segments of the batch not handled yet.
    pub fn pending(&self) -> bool {
        self.cursor < self.items.len()
    }

    /// The next segment to handle is a payload in the region (the role must not write
    /// its buffers until it is handled).
    pub fn landed_waiting(&self) -> bool {
        matches!(self.items.get(self.cursor), Some(Item::Landed { .. }))
    }
}

/// The plan length after a receive that brought `got` segments of a plan of `planned`: all
/// it may be if the plan was filled (or there was none), else what came and some; a receive
/// that brought nothing changes nothing.
fn next_want(want: usize, got: usize, planned: usize) -> usize {
    match got {
        0 => want,
        _ if got >= planned => usize::MAX,
        _ => got + ADAPT_MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_what_arrives() {
        // nothing planned yet: the first plan is a full one
        assert_eq!(next_want(ADAPT_MIN, 3, 0), usize::MAX);
        // 15 of 45 came: 23 next time; then 24 of 23 (the plan was too short): full again
        assert_eq!(next_want(usize::MAX, 15, 45), 23);
        assert_eq!(next_want(23, 24, 23), usize::MAX);
        // a timeout changes nothing; a trickle keeps the shortest plan
        assert_eq!(next_want(23, 0, 23), 23);
        assert_eq!(next_want(23, 1, 23), 1 + ADAPT_MIN);
    }
}
