//! Receiving straight into a role's memory: the role predicts where its next datagrams'
//! payloads go (the receives it has posted, in the order they complete), the kernel copies
//! each payload there through a scatter `recvmmsg` ([`rocelink_io::scatter`]), and the
//! transport verifies each where it landed ([`Endpoint::handle_landed`]).
//!
//! Nothing is trusted for being in place: a segment whose size or header layout does not
//! fit its slot is gathered back into one datagram and handled the copying way, and one
//! that fits is checked by the transport as any datagram (ICRC over the headers, the payload
//! where it landed and the tail; QP, Q_Key, peer), which leaves it where it is only when
//! that is where the receive it completes puts it, and copies it there otherwise.
//!
//! A prediction may only name bytes no accepted data still needs: the buffers of receives
//! posted and not yet completed, in completion order. Because a datagram completes at most
//! one receive, the receive it completes is never later in the plan than the slot it landed
//! in, so a copy only ever moves bytes to an earlier slot, never over a landed payload not
//! yet handled.

use rocelink_io::scatter::{ScatterRx, Slot};
use rocelink_io::udp::UdpSocket;
use rocelink_transport::{Datagram, Endpoint, Landed, Landing, WriteUnderWay};
use rocelink_wire::ib::{BTH_LEN, ICRC_LEN, Opcode};
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

/// Where a role expects its next datagrams' payloads: region `lkey`, one slot per
/// datagram in arrival order.
#[derive(Debug, Default)]
pub struct Plan {
    /// The region the slots' bodies are in.
    pub lkey: u32,
    /// The expected datagrams (head: BTH and extension headers, body: the payload's place
    /// in the region, tail: pad and ICRC).
    pub slots: Vec<Slot>,
    /// Slots and bytes one receive can fill: no more are taken.
    room: (usize, usize),
    /// Nothing placed: take the next datagram alone, the copying way, and plan again.
    alone: bool,
}

impl Plan {
    /// Expect a datagram with `headers` bytes of BTH and extension headers whose `len`-byte
    /// payload goes to bytes `at..at + len` of the region. Returns whether the plan takes
    /// more (one receive fills only so many).
    pub fn expect(&mut self, headers: usize, at: usize, len: usize) -> bool {
        let s = Slot {
            head: headers,
            body: at..at + len,
            tail: (4 - len % 4) % 4 + ICRC_LEN,
        };
        // in ascending order of their place only (the scatter receive walks the region
        // forwards): a ring's wrap or a bounce buffer ends the plan
        if self.slots.last().is_some_and(|l| l.body.end > s.body.start) {
            self.room = (0, 0);
            return false;
        }
        let n = s.len();
        self.slots.push(s);
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
        while more && at < offset + len {
            let n = mtu.min(offset + len - at);
            more = self.expect(BTH_LEN, at, n);
            at += n;
        }
        true
    }

    /// Expect nothing yet: the next datagram is received alone, the copying way, and the
    /// role is asked again after it — for a role whose next placement only the next
    /// packet can say (the first packet of a WRITE names where the rest goes).
    pub fn next_alone(&mut self) {
        self.alone = true;
    }
}

/// Counters of the landing receive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LandingStats {
    /// Segments the kernel put where the plan said and the transport accepted there.
    pub in_place: u64,
    /// Segments that fit a slot, were accepted, but belonged elsewhere (copied there).
    pub moved: u64,
    /// Segments that did not fit their slot: gathered and handled as datagrams.
    pub gathered: u64,
    /// Segments that fit their slot but the transport refused (counted under the reason).
    pub refused: u64,
}

/// The most a GRO message holds.
const GRO_BYTES: usize = 65_535;

/// One received segment: message, index in it, byte range.
type Seg = (usize, usize, Range<usize>);

/// The scatter machinery and the batch being handled.
#[derive(Debug)]
pub(crate) struct LandingRx {
    rx: ScatterRx,
    gro: bool,
    plan: Plan,
    lkey: u32,
    segs: Vec<Seg>,
    /// Next of `segs` to handle.
    cursor: usize,
    scratch: Vec<u8>,
    /// Segments copied out of the region ([`LandingRx::settle`]): bytes in `scratch`, sender.
    settled: Vec<(Range<usize>, SocketAddr)>,
    /// Next of `settled` to handle.
    settled_at: usize,
    pub(crate) stats: LandingStats,
}

impl LandingRx {
    pub(crate) fn new(gro: bool) -> LandingRx {
        LandingRx {
            rx: ScatterRx::new(if gro { 65_536 } else { 9_216 }),
            gro,
            plan: Plan::default(),
            lkey: 0,
            segs: Vec::new(),
            cursor: 0,
            scratch: Vec::with_capacity(65_536),
            settled: Vec::new(),
            settled_at: 0,
            stats: LandingStats::default(),
        }
    }

    /// The plan to fill (cleared), with room for what one receive can fill: one GRO
    /// message's 64 KiB, or a slot for each of the messages of a call (every slot costs
    /// the kernel two I/O vectors to walk, filled or not).
    pub(crate) fn plan_mut(&mut self) -> &mut Plan {
        self.plan.slots.clear();
        self.plan.alone = false;
        self.plan.room = if self.gro {
            (usize::MAX, GRO_BYTES)
        } else {
            (rocelink_io::scatter::MAX_MSGS, usize::MAX)
        };
        &mut self.plan
    }

    /// Receive one batch into the plan [`LandingRx::plan_mut`] filled. Returns the messages
    /// received (`None`: the plan names nothing usable, receive the copying way).
    pub(crate) fn recv(
        &mut self,
        sock: &UdpSocket,
        ep: &mut Endpoint,
        wait: Option<Duration>,
    ) -> io::Result<Option<usize>> {
        if self.plan.slots.is_empty() {
            return Ok(None);
        }
        self.lkey = self.plan.lkey;
        let zone = ep.landing_zone(self.lkey).map_err(io::Error::other)?;
        // with GRO a message holds an unknown number of segments, so a second message's
        // plan could not know where to start: one message per call, every slot its own
        // (planning 64 KiB per message was tried: the sender's runs are cut where its
        // flushes end, and a third of the segments then landed out of place)
        let slots = self.plan.slots.len();
        let (per_msg, msgs) = if self.gro {
            (slots, 1)
        } else {
            (1, slots.min(rocelink_io::scatter::MAX_MSGS))
        };
        let n = self
            .rx
            .recv_wait(sock, zone, &self.plan.slots, per_msg, msgs, wait)?;
        self.segs.clear();
        self.cursor = 0;
        for (m, meta) in self.rx.meta().iter().enumerate() {
            let (mut at, mut k) = (0, 0);
            while at < meta.len {
                let r = at..(at + meta.segment.max(1)).min(meta.len);
                at = r.end;
                self.segs.push((m, k, r));
                k += 1;
            }
        }
        Ok(Some(n))
    }

    /// Handle the next landed segment of the batch: `None` when there is none, else
    /// whether it was accepted where it landed.
    pub(crate) fn handle_next(
        &mut self,
        ep: &mut Endpoint,
        now: std::time::Instant,
        local: SocketAddr,
    ) -> Option<bool> {
        let (m, k, r) = self.segs.get(self.cursor).cloned()?;
        self.cursor += 1;
        let src = self.rx.meta()[m].src;
        let Some(j) = self.fits(m, k, r.clone()) else {
            self.stats.gathered += 1;
            let mut one = std::mem::take(&mut self.scratch);
            one.clear();
            if let Ok(mr) = ep.mr(self.lkey) {
                self.rx.gather(mr.bytes(), m, r, &mut one);
            }
            let d = Datagram {
                src,
                dst: local,
                ip_header: None,
                payload: &one,
            };
            ep.handle_datagram(now, d);
            self.scratch = one;
            return Some(false);
        };
        let body = self.plan.slots[j].body.clone();
        let l = ep.handle_landed(
            now,
            Landed {
                src,
                dst: local,
                headers: self.rx.head(j),
                lkey: self.lkey,
                offset: body.start,
                len: body.len(),
                tail: self.rx.tail(j),
            },
        );
        Some(match l {
            Landing::Refused => {
                self.stats.refused += 1;
                false
            }
            Landing::InPlace(_) | Landing::Received { in_place: true } => {
                self.stats.in_place += 1;
                true
            }
            _ => {
                self.stats.moved += 1;
                false
            }
        })
    }

    /// Copy the batch's segments not handled yet out of the region (the role may write to
    /// its buffers once it runs again), to be handled one by one as datagrams
    /// ([`LandingRx::handle_settled`]).
    pub(crate) fn settle(&mut self, ep: &Endpoint) {
        self.settled.clear();
        self.settled_at = 0;
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        if let Ok(mr) = ep.mr(self.lkey) {
            for (m, _, r) in self.segs.drain(self.cursor..) {
                let start = buf.len();
                self.rx.gather(mr.bytes(), m, r, &mut buf);
                self.settled.push((start..buf.len(), self.rx.meta()[m].src));
            }
        }
        self.cursor = self.segs.len();
        self.scratch = buf;
    }

    /// The plan asked for the next datagram alone ([`Plan::next_alone`]) and named no
    /// place (the flag is cleared: it holds for one receive).
    pub(crate) fn take_alone(&mut self) -> bool {
        std::mem::take(&mut self.plan.alone) && self.plan.slots.is_empty()
    }

    /// Datagrams copied out by [`LandingRx::settle`] and not handled yet.
    pub(crate) fn pending(&self) -> bool {
        self.settled_at < self.settled.len()
    }

    /// Handle the next datagram [`LandingRx::settle`] copied out (false: none is left).
    pub(crate) fn handle_settled(
        &mut self,
        ep: &mut Endpoint,
        now: std::time::Instant,
        local: SocketAddr,
    ) -> bool {
        let Some((r, src)) = self.settled.get(self.settled_at).cloned() else {
            return false;
        };
        self.settled_at += 1;
        self.stats.gathered += 1;
        let d = Datagram {
            src,
            dst: local,
            ip_header: None,
            payload: &self.scratch[r],
        };
        ep.handle_datagram(now, d);
        true
    }

    /// The slot segment `k` (bytes `r`) of message `m` filled, if it filled one exactly
    /// and its headers and pad are laid out as the slot splits them.
    fn fits(&self, m: usize, k: usize, r: Range<usize>) -> Option<usize> {
        let j = self.rx.slot_for_segment(m, k, r)?;
        let s = &self.plan.slots[j];
        let h = self.rx.head(j);
        let headers = Opcode(*h.first()?).headers()?;
        let pad = usize::from((*h.get(1)? >> 4) & 3);
        (BTH_LEN + headers.ext_len() == s.head && pad + ICRC_LEN == s.tail).then_some(j)
    }
}
