//! The receiver's fast path: an HSB stream is predictable, so the kernel copies each
//! payload straight to its place in the page ring and nothing copies it again.
//!
//! From what has arrived (the packet size, the current page and how far it is filled) the
//! fast path predicts the next datagrams: RDMA WRITE ONLY packets of the learned size at
//! consecutive addresses, then the metadata packet in the page's metadata slot, then the
//! next page. It hands that plan to [`rocelink_io::scatter`]: each predicted segment's
//! headers go to scratch, its payload to the region, its ICRC to scratch.
//!
//! After the call each segment whose size, opcode, pad and address fit the plan's slot is
//! handed to the transport as landed ([`Endpoint::handle_landed`]), which verifies it as it
//! verifies any datagram — ICRC over the headers, the payload where it landed and the tail;
//! peer, QP, P_Key, PSN; R_Key, access, bounds — and accounts for it the same way. The fast
//! path itself writes no region byte and checks no key. Anything that does not fit its slot
//! — a loss, a reorder, a duplicate, a short window, a hostile packet — is gathered into one
//! buffer and given to the endpoint as a whole datagram (the slow path).
//!
//! A mispredicted segment was still written where the plan put it, so the plan only names
//! bytes no one can still need: slots at or after the high-water mark of the page being
//! filled (the highest byte any packet wrote there since the page's last frame end, by
//! either path — a next frame's packet that overtook the previous frame end counts), never past the end of the ring (no
//! wrap inside one plan, so no byte is named twice), and only when no report of an earlier
//! frame is outstanding (the receiver plans only once its reports are handed out, and a
//! report's bytes are valid only until the next call). A frame whose packets strayed to
//! another page is checked against a CRC computed over the page itself.

use rocelink_io::scatter::{ScatterRx, Slot};
use rocelink_io::udp::UdpSocket;
use rocelink_transport::{AccessError, Endpoint, Holds, Landing};
use rocelink_wire::hsb::metadata;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

const WRITE_ONLY: u8 = 0x2A;
const WRITE_ONLY_IMM: u8 = 0x2B;
const BTH_RETH: usize = 28;
const BTH_RETH_IMM: usize = 32;
/// The shortest plan [`FastPath::adapt`] makes.
const ADAPT_MIN: usize = 8;

/// Where the stream's bytes go.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// The ring region (VA = byte offset).
    pub(super) lkey: u32,
    pub(super) page_size: u64,
    pub(super) md_offset: u64,
    pub(super) frame_size: u64,
    pub(super) pages: u32,
    pub(super) md_disable: bool,
}

/// What the plan expects of one slot.
#[derive(Debug, Clone, Copy)]
struct Expect {
    va: u64,
    len: u32,
    opcode: u8,
    pad: usize,
}

/// A segment that fits its slot: its payload sits at `va` of the ring.
#[derive(Debug, Clone, Copy)]
pub(super) struct Accepted {
    /// The plan's slot (its headers and tail are in the scatter scratch).
    slot: usize,
    /// The message it came in (its sender: [`FastPath::src`]).
    msg: usize,
    /// Where the payload is (and, if the transport agrees, belongs).
    pub(super) va: u64,
    pub(super) len: u32,
    /// It landed elsewhere (shifted by lost packets) and was moved here.
    moved: bool,
}

/// One segment of a sorted batch.
#[derive(Debug, Clone)]
pub(super) enum Item {
    /// Its payload is in the ring: for [`Endpoint::handle_landed`].
    Landed(Accepted),
    /// Bytes `scratch[range]` of message `.1` (its sender: [`FastPath::src_of`]), for the
    /// endpoint.
    Slow(Range<usize>, usize),
}

/// Fast-path counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastStats {
    /// Segments placed by the kernel where the plan put them and accepted there by the
    /// transport.
    pub in_place: u64,
    /// Segments that arrived shifted by lost packets, moved to their place (a copy within
    /// the region, instead of the slow way) and accepted there.
    pub moved: u64,
    /// Segments that went the slow way (gathered, then the generic endpoint).
    pub slow: u64,
    /// Segments that fit their slot but the transport refused (it counts them under the
    /// reason: ICRC, QP, R_Key, bounds, …).
    pub refused: u64,
}

/// Prediction state and the scatter machinery.
#[derive(Debug)]
pub(super) struct FastPath {
    g: Geometry,
    /// Finds the page of a placed VA.
    pages_of: super::PageFinder,
    rx: ScatterRx,
    plan: Vec<Slot>,
    expect: Vec<Expect>,
    per_msg: usize,
    msgs: usize,
    /// How many segments the next plan names: a little more than recent receives brought
    /// (see [`FastPath::adapt`]), at most `msgs` messages' worth.
    want: usize,
    gro: bool,
    /// Payload bytes per data packet, learned from the stream.
    payload: Option<u32>,
    /// Per page: highest end offset written since the page's last frame end.
    hwm: Vec<u64>,
    /// Segments copied out for the slow path, back to back.
    pub(super) scratch: Vec<u8>,
    /// Their ranges in `scratch` and messages.
    pub(super) slow: Vec<(Range<usize>, usize)>,
    /// Segments verified in place.
    pub(super) accepted: Vec<Accepted>,
    /// Next of `accepted` then `slow` to apply.
    cursor: usize,
    /// Segments of the last receive: message and byte range. (Senders stay in the
    /// receive's metadata: copied along with every segment they cost more than the rest.)
    segs: Vec<(usize, usize, Range<usize>)>,
    /// Pages lent to the application: never planned into.
    holds: Option<Arc<Holds>>,
    pub(super) stats: FastStats,
}

impl FastPath {
    pub(super) fn new(g: Geometry, gro: bool, batch: usize) -> FastPath {
        FastPath {
            g,
            pages_of: super::PageFinder::new(g.page_size),
            rx: ScatterRx::new(if gro { 65_536 } else { 9_216 }),
            plan: Vec::new(),
            expect: Vec::new(),
            per_msg: 1,
            // with GRO a message holds an unknown number of segments, so the plan of a second
            // message could not know where to start: one message per call
            msgs: if gro {
                1
            } else {
                batch.clamp(1, rocelink_io::scatter::MAX_MSGS)
            },
            want: ADAPT_MIN,
            gro,
            payload: None,
            hwm: vec![0; g.pages as usize],
            scratch: Vec::with_capacity(65_536),
            segs: Vec::new(),
            slow: Vec::new(),
            accepted: Vec::new(),
            cursor: 0,
            holds: None,
            stats: FastStats::default(),
        }
    }

    /// Never plan into a page `holds` says the application holds.
    pub(super) fn with_holds(mut self, holds: Arc<Holds>) -> FastPath {
        self.holds = Some(holds);
        self
    }

    /// Predict the next segments from `at`: the page being filled and its high-water mark.
    fn build_plan(&mut self, at: Option<(u32, u64)>) {
        self.plan.clear();
        self.expect.clear();
        let (Some(p), Some((mut page, mut off))) = (self.payload, at) else {
            return;
        };
        let g = self.g;
        self.per_msg = if self.gro {
            (65_535 / (BTH_RETH + p as usize + 4)).max(1)
        } else {
            1
        };
        let max = (self.per_msg * self.msgs).min(self.want);
        let held = |p: u32| self.holds.as_ref().is_some_and(|h| h.is_held(p as usize));
        while self.plan.len() < max && page < g.pages && !held(page) {
            let base = u64::from(page) * g.page_size;
            let (off_in, len, opcode, next) = if off < g.frame_size {
                let len = u64::from(p).min(g.frame_size - off);
                let end = off + len == g.frame_size;
                if end && g.md_disable {
                    (off, len, WRITE_ONLY_IMM, None)
                } else {
                    (off, len, WRITE_ONLY, Some(off + len))
                }
            } else if !g.md_disable {
                (
                    g.md_offset,
                    metadata::RECORD_LEN as u64,
                    WRITE_ONLY_IMM,
                    None,
                )
            } else {
                break;
            };
            let pad = (4 - (len as usize % 4)) % 4;
            let head = if opcode == WRITE_ONLY_IMM {
                BTH_RETH_IMM
            } else {
                BTH_RETH
            };
            let va = base + off_in;
            self.plan.push(Slot {
                head,
                body: va as usize..(va + len) as usize,
                tail: pad + 4,
            });
            self.expect.push(Expect {
                va,
                len: len as u32,
                opcode,
                pad,
            });
            match next {
                Some(o) => off = o,
                None => {
                    // a frame end: the next page, unless that wraps the ring
                    page += 1;
                    off = 0;
                }
            }
        }
    }

    /// Receive one batch, predicting from `page` (the page being filled) and its
    /// high-water mark (see the module notes for why no byte below it is ever named).
    /// Returns the number of messages.
    pub(super) fn recv(
        &mut self,
        sock: &UdpSocket,
        ep: &mut Endpoint,
        page: Option<u32>,
        wait: Option<std::time::Duration>,
    ) -> io::Result<usize> {
        let at = page.and_then(|p| Some((p, *self.hwm.get(p as usize)?)));
        self.build_plan(at);
        // the kernel writes only the planned slots: bytes no accepted data still needs
        let zone = ep.landing_zone(self.g.lkey).map_err(io::Error::other)?;
        // as many messages as the plan's length asks for (all of them while it is unbounded)
        let msgs = self.msgs.min(self.want.div_ceil(self.per_msg)).max(1);
        let n = self
            .rx
            .recv_wait(sock, zone, &self.plan, self.per_msg, msgs, wait)?;
        self.adapt();
        Ok(n)
    }

    /// Size the next plan to what arrives: the segments of the last receive and some.
    /// A plan names a slot (two I/O vectors, built here and all read by the kernel for a GRO
    /// message) for every segment a receive could bring, though at a steady rate one brings
    /// a fraction of them (a GSO sender's runs are all the same length); a receive that
    /// brings more than planned sends the rest the slow way once, and the next plan is as
    /// long as the full one again.
    fn adapt(&mut self) {
        let got: usize = self
            .rx
            .meta()
            .iter()
            .map(|m| m.len.div_ceil(m.segment))
            .sum();
        self.want = next_want(self.want, got, self.plan.len());
    }

    /// Split the received messages into segments (`segs`: message, index in it, byte range).
    fn split(&mut self) {
        self.segs.clear();
        for (m, meta) in self.rx.meta().iter().enumerate() {
            // a truncated datagram's last segment is incomplete; gathered, it fails the
            // slow path's length and ICRC checks
            let mut at = 0;
            let mut k = 0;
            while at < meta.len {
                let r = at..(at + meta.segment).min(meta.len);
                at = r.end;
                self.segs.push((m, k, r));
                k += 1;
            }
        }
    }

    /// Whether one segment fits the slot the plan gave it: the datagram's size, opcode and
    /// pad match the slot's split into headers, payload and tail, and its address is the
    /// planned one. (What the packet may do is the transport's to check.) With `shift` =
    /// `None`, a segment whose address is past the planned one by `d` (the packets in
    /// between were lost) fits too, to be moved there, and `shift` becomes `Some(d)`; after
    /// that only segments shifted by exactly `d` do, so the moves (done in reverse order)
    /// never overwrite a body not yet moved.
    fn fit(
        &self,
        (msg, k, range): (usize, usize, Range<usize>),
        shift: &mut Option<u64>,
    ) -> Option<Accepted> {
        let j = self.rx.slot_for_segment(msg, k, range)?;
        let e = self.expect[j];
        let h = self.rx.head(j).get(..28)?;
        let va = u64::from_be_bytes(h[12..20].try_into().ok()?);
        let moved = match *shift {
            _ if va == e.va && shift.is_none() => false,
            Some(d) if va == e.va + d => true,
            None if va > e.va && e.opcode == WRITE_ONLY => {
                // moved within the same page's data area only
                let g = self.g;
                let page = e.va / g.page_size;
                let end = va + u64::from(e.len);
                if va / g.page_size != page || end > page * g.page_size + g.md_offset {
                    return None;
                }
                true
            }
            _ => return None,
        };
        if h[0] != e.opcode || (h[1] >> 4) & 3 != e.pad as u8 || be32(&h[24..28]) != e.len {
            return None;
        }
        if moved {
            *shift = Some(va - e.va);
        }
        Some(Accepted {
            slot: j,
            msg,
            va,
            len: e.len,
            moved,
        })
    }

    /// Sort the last batch's segments: those that fit their slots (or all shifted forward
    /// by the same lost packets), up to the first that does not, go to `accepted`; that one
    /// and every later one are copied out to `scratch` (`slow`) before anything moves, so
    /// applying them in arrival order can never clobber a byte a later segment still has
    /// to be read from. Then shifted payloads are moved to their place, last first.
    pub(super) fn sort_batch(&mut self, ep: &mut Endpoint) -> io::Result<()> {
        self.split();
        self.accepted.clear();
        self.slow.clear();
        self.scratch.clear();
        self.cursor = 0;
        let mut missed = false;
        let mut shift = None;
        let region = ep.mr(self.g.lkey).map_err(io::Error::other)?.bytes();
        for i in 0..self.segs.len() {
            let (m, k, r) = self.segs[i].clone();
            if !missed {
                if let Some(a) = self.fit((m, k, r.clone()), &mut shift) {
                    self.accepted.push(a);
                    continue;
                }
                missed = true;
            }
            self.stats.slow += 1;
            let start = self.scratch.len();
            self.rx.gather(region, m, r, &mut self.scratch);
            self.slow.push((start..self.scratch.len(), m));
        }
        if let Some(d) = shift {
            for a in self.accepted.iter().rev().filter(|a| a.moved) {
                let (to, len) = (a.va as usize, a.len as usize);
                match ep.move_landed(self.g.lkey, to - d as usize, to, len) {
                    // its page is lent out: left where it landed, and refused when applied
                    // (its ICRC, over bytes that did not move, fails first: a rare case of
                    // a misprediction running into a held page)
                    Ok(()) | Err(AccessError::Held { .. }) => {}
                    Err(e) => return Err(io::Error::other(e)),
                }
            }
        }
        Ok(())
    }

    /// The sender of an accepted segment.
    pub(super) fn src(&self, a: &Accepted) -> SocketAddr {
        self.src_of(a.msg)
    }

    /// The sender of message `m` of the last receive.
    pub(super) fn src_of(&self, m: usize) -> SocketAddr {
        self.rx.meta()[m].src
    }

    /// The headers and the tail (pad, ICRC) of an accepted segment.
    pub(super) fn head_tail(&self, a: &Accepted) -> (&[u8], &[u8]) {
        (self.rx.head(a.slot), self.rx.tail(a.slot))
    }

    /// What the transport made of an accepted segment.
    pub(super) fn landed(&mut self, a: &Accepted, l: Landing) {
        match l {
            Landing::Refused => self.stats.refused += 1,
            _ if a.moved => self.stats.moved += 1,
            _ => self.stats.in_place += 1,
        }
    }

    /// The next segment of the sorted batch to apply, in arrival order.
    pub(super) fn next_item(&mut self) -> Option<Item> {
        let i = self.cursor;
        let item = if i < self.accepted.len() {
            Item::Landed(self.accepted[i])
        } else {
            let (r, m) = self.slow.get(i - self.accepted.len())?.clone();
            Item::Slow(r, m)
        };
        self.cursor += 1;
        Some(item)
    }

    /// A data write of `len` bytes was placed at `va` (either path): raise its page's
    /// high-water mark, learn the stream's packet size.
    pub(super) fn note_placed(&mut self, va: u64, len: u32) {
        let (page, off) = self.pages_of.locate(va);
        let page = page as usize;
        let end = off + u64::from(len);
        if off >= self.g.md_offset {
            return;
        }
        if let Some(h) = self.hwm.get_mut(page) {
            *h = (*h).max(end);
        }
        if len > 0 && end < self.g.frame_size {
            self.payload = Some(len);
        }
    }

    /// The frame on `page` ended: the page's next bytes belong to a later frame.
    pub(super) fn note_end(&mut self, page: u32) {
        if let Some(h) = self.hwm.get_mut(page as usize) {
            *h = 0;
        }
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

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_what_arrives() {
        // nothing planned yet (the packet size is not known): the first plan is a full one
        assert_eq!(next_want(ADAPT_MIN, 3, 0), usize::MAX);
        // 15 of 45 came: 23 next time; then 24 of 23 (the plan was too short): full again
        assert_eq!(next_want(usize::MAX, 15, 45), 23);
        assert_eq!(next_want(23, 24, 23), usize::MAX);
        // a timeout changes nothing; a trickle keeps the shortest plan
        assert_eq!(next_want(23, 0, 23), 23);
        assert_eq!(next_want(23, 1, 23), 1 + ADAPT_MIN);
    }
}
