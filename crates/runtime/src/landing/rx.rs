//! The landing receive itself: the scatter receive into a plan, the batch sorted against
//! it, and each segment handed to the transport.

use super::LandingStats;
use super::plan::Plan;
use rocelink_io::scatter::ScatterRx;
use rocelink_io::udp::UdpSocket;
use rocelink_transport::{
    AccessError, Datagram, Endpoint, Landed, LandedFlow, LandedPart, Landing, Placement,
};
use rocelink_wire::ib::{BTH_LEN, HeaderSet, ICRC_LEN, Opcode};
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

/// What [`LandingRx::handle_next`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Its payload was in the region: what the transport made of it, and its opcode.
    Landed(Landing, Opcode),
    /// It was handed to the transport as a whole datagram.
    Datagram,
    /// It and the next ones, this many in all, were taken by the transport as one run of
    /// UC WRITE ONLY packets in place ([`LandingRx::handle_run`]); their placements are in
    /// [`LandingRx::placed`].
    Run(usize),
}

/// The most a GRO message holds.
const GRO_BYTES: usize = 65_535;
/// The fewest slots a receive that brought few segments leaves for the next plan.
const ADAPT_MIN: usize = 8;

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

/// The landed segments of message `msg` at the head of `items`, as a run's parts
/// ([`LandingRx::handle_run`]).
struct RunParts<'a> {
    items: std::slice::Iter<'a, Item>,
    rx: &'a ScatterRx,
    msg: usize,
}

impl<'a> Iterator for RunParts<'a> {
    type Item = LandedPart<'a>;

    #[inline]
    fn next(&mut self) -> Option<LandedPart<'a>> {
        match *self.items.next()? {
            Item::Landed {
                slot,
                msg,
                offset,
                len,
                moved: false,
            } if msg == self.msg => {
                let (headers, tail) = self.rx.head_tail(slot);
                Some(LandedPart {
                    headers,
                    offset,
                    len,
                    tail,
                })
            }
            _ => None,
        }
    }
}

/// The scatter receive and the batch being handled: a role fills the plan
/// ([`LandingRx::plan_mut`]), receives ([`LandingRx::recv`]) and hands the batch to the
/// transport segment by segment ([`LandingRx::handle_next`]) or run by run
/// ([`LandingRx::handle_run`]).
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
    /// Segments the last receive that brought any brought.
    last_got: usize,
    items: Vec<Item>,
    /// Next of `items` to handle.
    cursor: usize,
    /// Segments copied out, back to back.
    scratch: Vec<u8>,
    /// The placements of the last run taken.
    placed: Vec<Placement>,
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
            last_got: 0,
            items: Vec::new(),
            cursor: 0,
            scratch: Vec::with_capacity(65_536),
            placed: Vec::new(),
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
            // Error::other: a receive speaks io::Error; the AccessError rides inside
            ep.landing_zone(self.lkey).map_err(io::Error::other)?
        };
        let n = self
            .rx
            .recv_wait(sock, zone, &self.plan.slots, per_msg, msgs, wait)?;
        let got = self.sort(ep)?;
        if self.adapt {
            self.want = next_want(self.want, (got, self.last_got), slots);
            if got > 0 {
                self.last_got = got;
            }
        }
        Ok(n)
    }

    /// Sort the batch, segment by segment (a GRO message holds several): the segments that
    /// fit their slots, up to the first that does not, stay in the region; that one and
    /// every later one are gathered into `scratch` before anything moves. Then payloads
    /// shifted by lost packets are moved to their place, last first. Returns the segments
    /// received.
    fn sort(&mut self, ep: &mut Endpoint) -> io::Result<usize> {
        self.items.clear();
        self.cursor = 0;
        self.scratch.clear();
        let mut shift = None;
        let mut missed = false;
        {
            let region = ep.mr(self.lkey).map_or(&[][..], |m| m.bytes());
            for m in 0..self.rx.meta().len() {
                let meta = &self.rx.meta()[m];
                let (len, segment, src) = (meta.len, meta.segment.max(1), meta.src);
                // a truncated datagram's last segment is incomplete; gathered, it fails the
                // transport's length and ICRC checks
                let (mut at, mut k) = (0, 0);
                while at < len {
                    let r = at..(at + segment).min(len);
                    at = r.end;
                    k += 1;
                    if !missed {
                        if let Some(item) = self.fit(m, k - 1, r.clone(), &mut shift) {
                            self.items.push(item);
                            continue;
                        }
                        missed = true;
                    }
                    let start = self.scratch.len();
                    self.rx.gather(region, m, r, &mut self.scratch);
                    self.items
                        .push(Item::Copied(start..self.scratch.len(), src));
                }
            }
        }
        let got = self.items.len();
        if shift.is_none() {
            return Ok(got);
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
                // Error::other: a receive speaks io::Error; the AccessError rides inside
                Err(e) => return Err(io::Error::other(e)),
            }
        }
        Ok(got)
    }

    /// Whether segment `k` (bytes `r`) of message `m` fits the slot it filled: exactly, with
    /// its headers and pad laid out as the slot splits them, and its RETH naming the
    /// slot's VA (or one past it by `shift`, which the first such segment sets).
    fn fit(&self, m: usize, k: usize, r: Range<usize>, shift: &mut Option<usize>) -> Option<Item> {
        let j = self.rx.slot_for_segment(m, k, r)?;
        let s = &self.plan.slots[j];
        let h = self.rx.head(j);
        let op = Opcode(*h.first()?);
        let pad = usize::from((*h.get(1)? >> 4) & 3);
        if BTH_LEN + op.ext_len()? != s.head || pad + ICRC_LEN != s.tail {
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
        let headers = op.headers()?;
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

    /// As [`LandingRx::handle_next`], but the landed segments of one message from here on
    /// go to the transport as one run ([`Endpoint::handle_landed_run`]): the packets it
    /// takes are accounted as one [`Handled::Run`], their placements in
    /// [`LandingRx::placed`]; where it takes none, the next segment is handled by itself.
    pub fn handle_run(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        local: SocketAddr,
    ) -> Option<Handled> {
        let start = self.cursor;
        let Some(&Item::Landed {
            msg, moved: false, ..
        }) = self.items.get(start)
        else {
            return self.handle_next(ep, now, local);
        };
        let flow = LandedFlow {
            src: self.rx.meta()[msg].src,
            dst: local,
            lkey: self.lkey,
        };
        let run = RunParts {
            items: self.items[start..].iter(),
            rx: &self.rx,
            msg,
        };
        self.placed.clear();
        let k = ep.handle_landed_run(flow, run, &mut self.placed);
        if k == 0 {
            return self.handle_next(ep, now, local);
        }
        self.cursor += k;
        self.stats.in_place += k as u64;
        Some(Handled::Run(k))
    }

    /// The placements of the run [`LandingRx::handle_run`] took last, in PSN order.
    pub fn placed(&self) -> &[Placement] {
        &self.placed
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

/// The plan length after a receive that brought `got` segments of a plan of `planned`
/// (`last`: what the receive before it brought): all it may be if the plan was filled (or
/// there was none), else the larger of the two receives and some — a frame's lone metadata
/// packet does not shrink the plan the next frame's first run needs —; a receive that
/// brought nothing changes nothing.
fn next_want(want: usize, (got, last): (usize, usize), planned: usize) -> usize {
    match got {
        0 => want,
        _ if got >= planned => usize::MAX,
        _ => got.max(last) + ADAPT_MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_what_arrives() {
        // nothing planned yet: the first plan is a full one
        assert_eq!(next_want(ADAPT_MIN, (3, 0), 0), usize::MAX);
        // 15 of 45 came: 23 next time; then 24 of 23 (the plan was too short): full again
        assert_eq!(next_want(usize::MAX, (15, 0), 45), 23);
        assert_eq!(next_want(23, (24, 15), 23), usize::MAX);
        // a timeout changes nothing
        assert_eq!(next_want(23, (0, 15), 23), 23);
        // a lone packet (a frame's metadata) after runs of 15 keeps room for the next run
        assert_eq!(next_want(23, (1, 15), 23), 15 + ADAPT_MIN);
        // a trickle keeps the shortest plan
        assert_eq!(next_want(23, (1, 1), 23), 1 + ADAPT_MIN);
    }
}
