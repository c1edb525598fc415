//! The plan: where a role expects its next datagrams' payloads, and what each packet must
//! say of its own place.

use rocelink_io::scatter::Slot;
use rocelink_transport::{Endpoint, WriteUnderWay};
use rocelink_wire::ib::{BTH_LEN, HeaderSet, ICRC_LEN};

/// Where a role expects its next datagrams' payloads: region `lkey`, one slot per
/// datagram in arrival order.
#[derive(Debug, Default)]
pub struct Plan {
    /// The region the slots' bodies are in.
    pub lkey: u32,
    /// The expected datagrams (head: BTH and extension headers, body: the payload's place
    /// in the region, tail: pad and ICRC).
    pub(super) slots: Vec<Slot>,
    /// What each slot's packet must say of its place (in step with `slots`).
    pub(super) places: Vec<Place>,
    /// Slots and bytes one receive can fill: no more are taken.
    pub(super) room: (usize, usize),
    /// Nothing placed: take the next datagram alone, the copying way, and plan again.
    pub(super) alone: bool,
    /// A slot lies below one before it (receives that reuse a buffer): no run shifted by
    /// lost packets is moved then.
    pub(super) wrapped: bool,
}

/// What the packet of a slot must say of its own place: the VA its RETH names — and up
/// to where a later VA may move it —, or the QP it is for and which of a message's
/// packets it is (the transport places it, where the plan expects exactly that packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) va: Option<u64>,
    pub(super) movable_to: usize,
    /// The destination QP and the opcodes (their low five bits, as a mask) it may carry.
    pub(super) packet: Option<(u32, u32)>,
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

    /// [`Plan::expect_at`] for the RDMA WRITE ONLY packets without immediate that carry
    /// `total` bytes in payloads of `per` bytes (the last may be shorter), one after
    /// another from `va` at bytes `at..` of the region, each movable up to `movable_to`:
    /// the slots of a run, made at once. Returns whether the plan takes more.
    pub fn expect_run(
        &mut self,
        at: usize,
        total: usize,
        per: usize,
        va: u64,
        movable_to: usize,
    ) -> bool {
        if per == 0 || total == 0 {
            return self.room.0 > 0 && self.room.1 > 0;
        }
        let head = BTH_LEN + HeaderSet::RETH.ext_len();
        let tail = |len: usize| (4 - len % 4) % 4 + ICRC_LEN;
        // the first slot as any other (it may meet the one before); the rest follow it
        let first = per.min(total);
        if !self.expect_at(at, first, false, va, movable_to) {
            return false;
        }
        // the rest, as many as the plan takes (a push takes one while slots and bytes are
        // left), made in one go
        let size = |len: usize| head + len + tail(len);
        let rest = total - first;
        let k = rest
            .div_ceil(per)
            .min(self.room.0)
            .min(self.room.1.div_ceil(size(per)));
        let at = at + first;
        let va = va + first as u64;
        // all of `per` bytes but maybe the last
        let last = per.min(rest.saturating_sub(k.saturating_sub(1) * per));
        let full_tail = tail(per);
        self.slots.extend((0..k).map(|i| Slot {
            head,
            body: at + i * per..at + i * per + per,
            tail: full_tail,
        }));
        self.places.extend((0..k).map(|i| Place {
            va: Some(va + (i * per) as u64),
            movable_to,
            packet: None,
        }));
        if let Some(s) = self.slots.last_mut().filter(|_| k > 0) {
            s.body.end = s.body.start + last;
            s.tail = tail(last);
        }
        let bytes = match k {
            0 => 0,
            _ => (k - 1) * size(per) + size(last),
        };
        self.room = (self.room.0 - k, self.room.1.saturating_sub(bytes));
        self.room.0 > 0 && self.room.1 > 0
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan with one slot in it and room for `slots` slots and `bytes` bytes more.
    fn plan(slots: usize, bytes: usize) -> Plan {
        let mut p = Plan {
            room: (2, 1000),
            ..Plan::default()
        };
        assert!(p.expect_at(0, 100, false, 0, 0));
        p.room = (slots, bytes);
        p
    }

    #[test]
    fn a_run_of_slots_is_the_slots_one_at_a_time() {
        for slots in [1, 2, 3, 16, 24, 200] {
            for bytes in [1, 1500, 20_000, 65_535, usize::MAX] {
                for per in [1408, 4096, 64, 13] {
                    for total in [0, 1, 13, 1407, 1408, 1409, 5000, 142 * 1408] {
                        let (mut a, mut b) = (plan(slots, bytes), plan(slots, bytes));
                        let ra = a.expect_run(1000, total, per, 0x1000, 9_999_999);
                        // one by one, as `expect_at` for each packet
                        let mut rb = b.room.0 > 0 && b.room.1 > 0;
                        let mut done = 0;
                        while rb && done < total {
                            let len = per.min(total - done);
                            rb = b.expect_at(
                                1000 + done,
                                len,
                                false,
                                0x1000 + done as u64,
                                9_999_999,
                            );
                            done += len;
                        }
                        let what = format!("{slots} slots {bytes} bytes, {total} by {per}");
                        assert_eq!(a.slots, b.slots, "{what}");
                        assert_eq!(a.places, b.places, "{what}");
                        assert_eq!((a.room, ra), (b.room, rb), "{what}");
                    }
                }
            }
        }
    }
}
