//! Scatter receive: the kernel copies each datagram straight to where its payload belongs.
//!
//! A receiver that can predict the layout of the next datagrams (an HSB stream: fixed-size
//! RDMA WRITEs to consecutive addresses) gives a *plan*: for each expected segment, a head
//! (headers, to scratch), a body (a range of the caller's region: the payload's place) and a
//! tail (ICRC, to scratch). `recvmmsg` is called with one iovec per body and one per run of
//! scratch between bodies (a slot's tail and the next slot's head are adjacent in scratch,
//! so the kernel walks two iovecs per segment, not three), so a predicted payload lands in
//! the region with the kernel's one copy and no second one. What does not
//! fit the plan (a spill area per message catches the excess) the caller [`ScatterRx::gather`]s
//! into a contiguous buffer and processes the slow way.
//!
//! Nothing is trusted by being in place: the caller checks every segment's headers and ICRC
//! against the plan after the call. A segment that does not match was still written where
//! the plan put it — so the plan must only name bytes that may be overwritten (bytes no
//! packet has filled yet).
//!
//! With `UDP_GRO` a message holds several equal-sized segments; plan `per_msg` slots for it.

use crate::sys::MmsgRecv;
use crate::udp::UdpSocket;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;

/// Largest head of a slot (bytes).
pub const MAX_HEAD: usize = 64;
/// Largest tail of a slot (bytes).
pub const MAX_TAIL: usize = 8;
/// Largest number of messages per call.
pub const MAX_MSGS: usize = 64;
/// A tail, then the next slot's head.
const JOINT: usize = MAX_TAIL + MAX_HEAD;

/// Where one predicted segment goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slot {
    /// Leading bytes that go to scratch (≤ [`MAX_HEAD`]).
    pub head: usize,
    /// Range of the region that takes the next bytes.
    pub body: Range<usize>,
    /// Trailing bytes that go to scratch (≤ [`MAX_TAIL`]).
    pub tail: usize,
}

impl Slot {
    /// Bytes of the segment this slot expects.
    pub fn len(&self) -> usize {
        self.head + self.body.len() + self.tail
    }
    /// True when the slot expects no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An iovec of `len` bytes at `p`.
#[inline]
fn iovec(p: *mut u8, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: p.cast(),
        iov_len: len,
    }
}

/// One received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScatterMeta {
    /// Sender.
    pub src: SocketAddr,
    /// Bytes received.
    pub len: usize,
    /// Segment size (with GRO: of every segment but possibly the last; else `len`).
    pub segment: usize,
    /// The datagram was longer than slots + spill; the rest was discarded.
    pub truncated: bool,
    /// Indices of the plan's slots this message was given.
    pub slots: Range<usize>,
}

/// Reusable state for scatter receives on one socket.
pub struct ScatterRx {
    spill_len: usize,
    /// Scratch between bodies: `joints[j]` holds slot `j - 1`'s tail (ending at
    /// [`MAX_TAIL`]) and then slot `j`'s head, so the kernel fills both through one iovec.
    joints: Vec<[u8; JOINT]>,
    spill: Vec<u8>,
    /// Start of each slot within its message.
    starts: Vec<usize>,
    plan: Vec<Slot>,
    meta: Vec<ScatterMeta>,
    iovs: Vec<libc::iovec>,
    groups: Vec<Range<usize>>,
    /// The bodies of a plan that is not in ascending order, sorted to check them.
    sorted: Vec<Range<usize>>,
    mmsg: MmsgRecv,
}

// SAFETY: the raw pointers in `iovs` are written at the start of `recv` and used only inside
// it, while the buffers they point at are borrowed; between calls they are never
// dereferenced, so moving the value to another thread cannot make anything unsound.
unsafe impl Send for ScatterRx {}

impl std::fmt::Debug for ScatterRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScatterRx")
            .field("spill_len", &self.spill_len)
            .field("messages", &self.meta.len())
            .finish()
    }
}

impl ScatterRx {
    /// State for up to [`MAX_MSGS`] messages, each with `spill_len` bytes of spill area for
    /// what its slots do not take (65 536 covers any GRO message).
    pub fn new(spill_len: usize) -> ScatterRx {
        ScatterRx {
            spill_len,
            joints: Vec::new(),
            spill: vec![0; spill_len * MAX_MSGS],
            starts: Vec::new(),
            plan: Vec::new(),
            meta: Vec::with_capacity(MAX_MSGS),
            iovs: Vec::new(),
            groups: Vec::with_capacity(MAX_MSGS),
            sorted: Vec::new(),
            mmsg: MmsgRecv::new(MAX_MSGS),
        }
    }

    /// Receive up to `msgs` messages without blocking; message `m` is given the slots
    /// `plan[m·per_msg ..][.. per_msg]` (those that exist) and then its spill area. Slots'
    /// bodies must lie in `region` and not overlap (in any order: a plan may wrap to a
    /// lower place, e.g. receives that reuse one buffer). Returns how many messages
    /// arrived ([`ScatterRx::meta`]).
    pub fn recv(
        &mut self,
        sock: &UdpSocket,
        region: &mut [u8],
        plan: &[Slot],
        per_msg: usize,
        msgs: usize,
    ) -> io::Result<usize> {
        self.recv_wait(sock, region, plan, per_msg, msgs, None)
    }

    /// As [`ScatterRx::recv`], but with `wait`, sleeps up to about that long for the first
    /// datagram inside the call (one system call instead of poll + receive).
    pub fn recv_wait(
        &mut self,
        sock: &UdpSocket,
        region: &mut [u8],
        plan: &[Slot],
        per_msg: usize,
        msgs: usize,
        wait: Option<std::time::Duration>,
    ) -> io::Result<usize> {
        let flags = match wait {
            Some(w) => {
                sock.arm_recv_timeout(w)?;
                libc::MSG_WAITFORONE
            }
            None => libc::MSG_DONTWAIT,
        };
        let msgs = msgs.clamp(1, MAX_MSGS);
        let plan = &plan[..plan.len().min(per_msg * msgs)];
        if !self.disjoint(plan, region.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "scatter plan: a slot is oversized, out of the region, or overlaps another",
            ));
        }
        self.plan.clear();
        self.plan.extend_from_slice(plan);
        if self.joints.len() < plan.len() + 1 {
            self.joints.resize(plan.len() + 1, [0; JOINT]);
        }
        self.build_iovs(region.as_mut_ptr(), per_msg, msgs);
        // SAFETY: the iovecs point into `self.joints`/`self.spill` (not resized
        // until the call returns) and into disjoint ranges of `region`, which is mutably
        // borrowed for the whole call; message m's group is its own iovecs.
        let r = unsafe {
            self.mmsg
                .recv(sock.raw_fd(), &mut self.iovs, &self.groups, true, flags)?
        };
        self.collect_meta(r, per_msg);
        Ok(self.meta.len())
    }

    /// The iovecs of `msgs` messages of `per_msg` slots of the plan in `self.plan`, over
    /// the region at `base` (each slot's head in a joint with the previous slot's tail, its
    /// body in place, the message's last tail and its spill area after), grouped per
    /// message in `self.groups`. The plan must have passed [`ScatterRx::disjoint`] against
    /// the region, which the caller keeps borrowed until the receive returns.
    fn build_iovs(&mut self, base: *mut u8, per_msg: usize, msgs: usize) {
        let plan = &self.plan;
        // written in place, not pushed: two iovecs per slot (an empty one costs the kernel
        // nothing) and two per message, and every slot's start. The lists only grow: every
        // entry a message's group covers is written below, so nothing is cleared per call.
        let none = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let need = 2 * plan.len() + 2 * msgs;
        if self.iovs.len() < need {
            self.iovs.resize(need, none);
        }
        if self.starts.len() < plan.len() {
            self.starts.resize(plan.len(), 0);
        }
        self.groups.clear();
        let joints = self.joints.as_mut_ptr();
        let mut n = 0;
        for m in 0..msgs {
            let first = n;
            let slots = (m * per_msg).min(plan.len())..((m + 1) * per_msg).min(plan.len());
            let pairs = self.iovs[n..n + 2 * slots.len()].chunks_exact_mut(2);
            let starts = self.starts[slots.clone()].iter_mut();
            let mut at = 0;
            // scratch bytes owed before the next body: the previous slot's tail, in the
            // joint that also takes this slot's head
            let mut owed = 0;
            for ((j, pair), start) in slots.clone().zip(pairs).zip(starts) {
                let s = &plan[j];
                *start = at;
                at += s.len();
                // SAFETY: `j` is below `joints.len()` (resized above) and `MAX_TAIL - owed`
                // and `MAX_TAIL + s.head` lie within a joint (`owed` ≤ MAX_TAIL, `s.head` ≤
                // MAX_HEAD, both checked); `s.body` was checked to lie within `region`, so
                // those offsets stay inside their allocations.
                let (joint, body) = unsafe {
                    (
                        joints.add(j).cast::<u8>().add(MAX_TAIL - owed),
                        base.add(s.body.start),
                    )
                };
                pair[0] = iovec(joint, owed + s.head);
                pair[1] = iovec(body, s.body.len());
                owed = s.tail;
            }
            n += 2 * slots.len();
            // the message's last tail alone, before its spill area
            // SAFETY: `slots.end` ≤ `plan.len()` < `joints.len()`, and `owed` ≤ MAX_TAIL.
            let tail = unsafe { joints.add(slots.end).cast::<u8>().add(MAX_TAIL - owed) };
            self.iovs[n] = iovec(tail, owed);
            self.iovs[n + 1] = iovec(
                self.spill[m * self.spill_len..].as_mut_ptr(),
                self.spill_len,
            );
            n += 2;
            self.groups.push(first..n);
        }
    }

    /// What each of the `r` messages received: its sender, length, segment size and the
    /// slots it was planned for.
    fn collect_meta(&mut self, r: usize, per_msg: usize) {
        let plan_len = self.plan.len();
        self.meta.clear();
        for m in 0..r {
            let Some(got) = self.mmsg.received(m) else {
                continue;
            };
            let Some(src) = got.src else { continue };
            self.meta.push(ScatterMeta {
                src,
                len: got.len,
                segment: got.segment.unwrap_or(got.len).max(1),
                truncated: got.truncated,
                slots: (m * per_msg).min(plan_len)..((m + 1) * per_msg).min(plan_len),
            });
        }
    }

    /// Whether every slot of `plan` fits the joints and lies in a region of `len` bytes, and
    /// no two bodies overlap: checked in one pass when they ascend (the usual plan), by
    /// sorting them otherwise.
    fn disjoint(&mut self, plan: &[Slot], len: usize) -> bool {
        let (mut end, mut ascending) = (0, true);
        for s in plan {
            if s.head > MAX_HEAD
                || s.tail > MAX_TAIL
                || s.body.end < s.body.start
                || s.body.end > len
            {
                return false;
            }
            ascending &= s.body.start >= end;
            end = end.max(s.body.end);
        }
        if ascending {
            return true;
        }
        self.sorted.clear();
        self.sorted.extend(
            plan.iter()
                .map(|s| s.body.clone())
                .filter(|b| !b.is_empty()),
        );
        self.sorted.sort_unstable_by_key(|b| b.start);
        self.sorted.windows(2).all(|w| w[0].end <= w[1].start)
    }

    /// The messages of the last [`ScatterRx::recv`].
    pub fn meta(&self) -> &[ScatterMeta] {
        &self.meta
    }

    /// The slot that bytes `range` of message `msg` filled exactly, if one did.
    pub fn slot_for(&self, msg: usize, range: Range<usize>) -> Option<usize> {
        let segment = self.meta.get(msg)?.segment.max(1);
        self.slot_for_segment(msg, range.start / segment, range)
    }

    /// [`ScatterRx::slot_for`] for bytes `range`, the `k`-th segment of message `msg`: a
    /// caller that walks the segments in order knows `k` and saves the division.
    pub fn slot_for_segment(&self, msg: usize, k: usize, range: Range<usize>) -> Option<usize> {
        let m = self.meta.get(msg)?;
        let starts = self.starts.get(m.slots.clone())?;
        // the common case first: a plan of equal slots, each taking one segment, so segment
        // `k` is slot `k` — one load instead of a search whose dependent loads cost more per
        // packet than the rest of the lookup
        if starts.get(k) == Some(&range.start) {
            let j = m.slots.start + k;
            if self.plan[j].len() == range.len() {
                return Some(j);
            }
        }
        // starts are recorded per message in slot order, never decreasing (equal only after
        // an empty slot)
        let k = starts.partition_point(|&s| s < range.start);
        (k..starts.len())
            .take_while(|&k| starts[k] == range.start)
            .map(|k| m.slots.start + k)
            .find(|&j| self.plan[j].len() == range.len())
    }

    /// The head bytes slot `j` received.
    #[inline]
    pub fn head(&self, j: usize) -> &[u8] {
        &self.joints[j][MAX_TAIL..][..self.plan[j].head]
    }

    /// The head and tail bytes slot `j` received ([`ScatterRx::head`],
    /// [`ScatterRx::tail`]) at once.
    #[inline]
    pub fn head_tail(&self, j: usize) -> (&[u8], &[u8]) {
        let s = &self.plan[j];
        let (h, t) = (&self.joints[j], &self.joints[j + 1]);
        (&h[MAX_TAIL..][..s.head], &t[MAX_TAIL - s.tail..MAX_TAIL])
    }

    /// The tail bytes slot `j` received.
    #[inline]
    pub fn tail(&self, j: usize) -> &[u8] {
        &self.joints[j + 1][MAX_TAIL - self.plan[j].tail..MAX_TAIL]
    }

    /// Append bytes `range` of message `msg` to `out`, from
    /// wherever they landed: slot heads, `region` (the same region given to `recv`, not
    /// written since), tails, and the spill area. Bytes beyond what arrived are not copied.
    pub fn gather(&self, region: &[u8], msg: usize, range: Range<usize>, out: &mut Vec<u8>) {
        let Some(m) = self.meta.get(msg) else {
            return;
        };
        let range = range.start.min(m.len)..range.end.min(m.len);
        let mut at = 0usize;
        let mut take = |piece: &[u8], out: &mut Vec<u8>| {
            let (s, e) = (at, at + piece.len());
            at = e;
            let lo = range.start.max(s);
            let hi = range.end.min(e);
            if lo < hi {
                out.extend_from_slice(&piece[lo - s..hi - s]);
            }
        };
        for j in m.slots.clone() {
            let s = &self.plan[j];
            take(self.head(j), out);
            take(region.get(s.body.clone()).unwrap_or(&[]), out);
            take(self.tail(j), out);
        }
        take(&self.spill[msg * self.spill_len..][..self.spill_len], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::UdpConfig;
    use std::io::IoSlice;
    use std::time::Duration;

    fn pair(gro: bool) -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let b = UdpSocket::bind(
            "127.0.0.1:0".parse().unwrap(),
            &UdpConfig {
                gro,
                ..UdpConfig::default()
            },
        )
        .unwrap();
        (a, b)
    }

    fn seg(i: u8, body: usize) -> Vec<u8> {
        let mut v = vec![0xA0 | i; 4];
        v.extend(std::iter::repeat_n(i, body));
        v.extend([0xE0 | i; 2]);
        v
    }

    fn recv_some(b: &UdpSocket, rx: &mut ScatterRx, region: &mut [u8], plan: &[Slot], k: usize) {
        for _ in 0..100 {
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            if rx.recv(b, region, plan, k, 8).unwrap() > 0 {
                return;
            }
        }
        panic!("nothing arrived");
    }

    #[test]
    fn predicted_bodies_land_in_the_region_and_the_rest_can_be_gathered() {
        let (a, b) = pair(false);
        let pkts = [seg(1, 10), seg(2, 10), seg(3, 7)];
        let refs: Vec<(SocketAddr, &[u8])> =
            pkts.iter().map(|p| (b.local_addr(), &p[..])).collect();
        assert_eq!(a.send_batch(&refs).unwrap(), 3);
        let mut region = vec![0u8; 64];
        let plan: Vec<Slot> = (0..3)
            .map(|i| Slot {
                head: 4,
                body: 10 * i..10 * i + 10,
                tail: 2,
            })
            .collect();
        let mut rx = ScatterRx::new(2048);
        let mut got = 0;
        let mut out = Vec::new();
        for _ in 0..10 {
            if got == 3 {
                break;
            }
            recv_some(&b, &mut rx, &mut region, &plan[got..], 1);
            for m in 0..rx.meta().len() {
                let meta = rx.meta()[m].clone();
                let i = got + m;
                out.clear();
                rx.gather(&region, m, 0..meta.len, &mut out);
                assert_eq!(out, pkts[i], "message {i} gathers back to what was sent");
                if i < 2 {
                    let j = rx.slot_for(m, 0..meta.len).expect("exact fit");
                    assert_eq!(rx.head(j), &pkts[i][..4]);
                    assert_eq!(rx.tail(j), &pkts[i][14..]);
                } else {
                    // shorter than planned: no exact slot, and the body spilt past the tail
                    assert_eq!(rx.slot_for(m, 0..meta.len), None);
                }
            }
            got += rx.meta().len();
        }
        assert_eq!(got, 3);
        assert_eq!(&region[..20], &[[1u8; 10], [2u8; 10]].concat()[..]);
    }

    #[test]
    fn gro_segments_fill_consecutive_slots() {
        let (a, b) = pair(true);
        let s: Vec<Vec<u8>> = (1..=4).map(|i| seg(i, 100)).collect();
        let parts: Vec<IoSlice<'_>> = s.iter().map(|p| IoSlice::new(p)).collect();
        a.send_gso(b.local_addr(), &parts, 106).unwrap();
        let mut region = vec![0u8; 1000];
        let plan: Vec<Slot> = (0..8)
            .map(|i| Slot {
                head: 4,
                body: 100 * i..100 * i + 100,
                tail: 2,
            })
            .collect();
        let mut rx = ScatterRx::new(65_536);
        let mut segs = Vec::new();
        let mut out = Vec::new();
        for _ in 0..10 {
            if segs.len() == 4 {
                break;
            }
            recv_some(&b, &mut rx, &mut region, &plan[segs.len()..], 8);
            for m in 0..rx.meta().len() {
                let meta = rx.meta()[m].clone();
                let mut at = 0;
                while at < meta.len {
                    let r = at..(at + meta.segment).min(meta.len);
                    // segment k of the message in slot k of its share of the plan
                    let k = meta.slots.start + at / meta.segment;
                    assert_eq!(rx.slot_for(m, r.clone()), Some(k));
                    out.clear();
                    rx.gather(&region, m, r.clone(), &mut out);
                    // a tail and the next head share one joint: neither clobbers the other
                    let sent = &s[segs.len()];
                    assert_eq!(rx.head(k), &sent[..4]);
                    assert_eq!(rx.tail(k), &sent[104..]);
                    segs.push(out.clone());
                    at = r.end;
                }
            }
        }
        assert_eq!(segs, s);
        for i in 0..4 {
            assert!(
                region[100 * i..100 * i + 100]
                    .iter()
                    .all(|&x| x == i as u8 + 1)
            );
        }
    }

    #[test]
    fn an_empty_slot_shifts_the_segments_to_the_next_slots() {
        // segment i is not slot i here: the lookup must search, not guess
        let (a, b) = pair(true);
        let s: Vec<Vec<u8>> = (1..=3).map(|i| seg(i, 100)).collect();
        let parts: Vec<IoSlice<'_>> = s.iter().map(|p| IoSlice::new(p)).collect();
        a.send_gso(b.local_addr(), &parts, 106).unwrap();
        let mut region = vec![0u8; 1000];
        let mut plan = vec![Slot::default()];
        plan.extend((0..4).map(|i| Slot {
            head: 4,
            body: 100 * i..100 * i + 100,
            tail: 2,
        }));
        let mut rx = ScatterRx::new(65_536);
        let mut found = Vec::new();
        for _ in 0..10 {
            if found.len() == 3 {
                break;
            }
            recv_some(&b, &mut rx, &mut region, &plan, 5);
            for m in 0..rx.meta().len() {
                let meta = rx.meta()[m].clone();
                for at in (0..meta.len).step_by(meta.segment) {
                    found.push(rx.slot_for(m, at..at + meta.segment));
                }
            }
        }
        assert_eq!(found, [Some(1), Some(2), Some(3)]);
        assert!(
            region[..300]
                .chunks(100)
                .zip(1u8..)
                .all(|(c, i)| c.iter().all(|&x| x == i))
        );
    }

    #[test]
    fn a_plan_may_wrap_to_lower_places() {
        // two receives into one buffer, as a bandwidth server posts them: the second
        // message's first packets go below the first message's last ones
        let (a, b) = pair(false);
        let pkts = [seg(1, 10), seg(2, 10), seg(3, 10)];
        let refs: Vec<(SocketAddr, &[u8])> =
            pkts.iter().map(|p| (b.local_addr(), &p[..])).collect();
        assert_eq!(a.send_batch(&refs).unwrap(), 3);
        let mut region = vec![0u8; 40];
        let plan: Vec<Slot> = [20, 0, 10]
            .iter()
            .map(|&at| Slot {
                head: 4,
                body: at..at + 10,
                tail: 2,
            })
            .collect();
        let mut rx = ScatterRx::new(2048);
        let mut got = 0;
        for _ in 0..10 {
            if got == 3 {
                break;
            }
            recv_some(&b, &mut rx, &mut region, &plan[got..], 1);
            got += rx.meta().len();
        }
        assert_eq!(got, 3);
        assert_eq!(
            &region[..30],
            &[[2u8; 10], [3u8; 10], [1u8; 10]].concat()[..]
        );
    }

    #[test]
    fn refuses_overlapping_or_outside_plans() {
        let (_a, b) = pair(false);
        let mut rx = ScatterRx::new(2048);
        let mut region = vec![0u8; 32];
        let overlap = [
            Slot {
                head: 0,
                body: 0..10,
                tail: 0,
            },
            Slot {
                head: 0,
                body: 5..12,
                tail: 0,
            },
        ];
        assert!(rx.recv(&b, &mut region, &overlap, 1, 2).is_err());
        // out of order, and one overlapping a body two slots back
        let wrapped_overlap = [
            Slot {
                head: 0,
                body: 10..20,
                tail: 0,
            },
            Slot {
                head: 0,
                body: 0..5,
                tail: 0,
            },
            Slot {
                head: 0,
                body: 19..25,
                tail: 0,
            },
        ];
        assert!(rx.recv(&b, &mut region, &wrapped_overlap, 1, 3).is_err());
        let outside = [Slot {
            head: 0,
            body: 30..40,
            tail: 0,
        }];
        assert!(rx.recv(&b, &mut region, &outside, 1, 1).is_err());
        let big_head = [Slot {
            head: MAX_HEAD + 1,
            body: 0..1,
            tail: 0,
        }];
        assert!(rx.recv(&b, &mut region, &big_head, 1, 1).is_err());
    }
}
