//! The sans-IO frame tracker of the HSB receiver: per-packet accounting right after each
//! payload is placed (in order → the frame CRC joined from the payload CRCs), and at each
//! frame end the verdict — PSN span and missing packets, byte count, immediate, metadata,
//! frame CRC, stale (replayed) and late frames, the 16-bit frame number extended.

use super::predict::Prediction;
use rocelink_transport::{CqId, Endpoint, Event, Placement, WcOpcode, WcStatus};
use rocelink_wire::hsb::PAGE_SIZE;
use rocelink_wire::hsb::metadata::StreamLayout;
use rocelink_wire::hsb::metadata::{self, Metadata};
use rocelink_wire::ib::psn;

/// One received frame and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameReport {
    /// Frame number, extended from the device's 16-bit counter.
    pub frame_number: u64,
    /// Ring page it landed in.
    pub page: u32,
    /// Payload bytes that arrived.
    pub bytes: u64,
    /// Bytes the device says it wrote (metadata), or the frame size with `md_disable`.
    pub bytes_expected: u64,
    /// CRC computed over what arrived.
    pub crc: u32,
    /// CRC the device sent (`None` with `md_disable`).
    pub crc_expected: Option<u32>,
    /// Frame CRC matches (`None` when the device sent none).
    pub crc_ok: Option<bool>,
    /// PSN of the frame-end packet.
    pub psn: u32,
    /// Data packets that arrived.
    pub packets: u32,
    /// Packets missing (PSN gaps inside the frame and since the previous frame).
    pub dropped_packets: u64,
    /// Window-end flags (bit 0 early TLAST, bit 1 count only).
    pub flags: u32,
    /// PTP time of the first data of the window.
    pub sof: (u64, u32),
    /// PTP time the metadata was formed.
    pub meta: (u64, u32),
    /// Every packet arrived and the byte count matches.
    pub complete: bool,
}

impl FrameReport {
    /// Complete, and the CRC matches where there is one.
    pub fn good(&self) -> bool {
        self.complete && self.crc_ok != Some(false)
    }
}

/// Counters across frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ReceiverStats {
    /// Frames reported.
    pub frames: u64,
    /// Frames reported good.
    pub good: u64,
    /// Frames reported damaged.
    pub damaged: u64,
    /// Packets missing.
    pub dropped_packets: u64,
    /// Payload bytes that arrived.
    pub bytes: u64,
    /// Packets dropped for a bad ICRC.
    pub icrc_errors: u64,
    /// Packets refused for R_Key/bounds/QP/peer.
    pub refused: u64,
    /// Datagrams (GRO segments) received.
    pub datagrams: u64,
    /// Of those, payloads the kernel put in place (or, after a loss, next to it: then moved)
    /// and the fast path verified.
    pub in_place: u64,
    /// Frame ends from the past (PSN behind the last frame's): a replayed or stale
    /// stream, not reported.
    pub stale_frames: u64,
    /// Packets refused because their ring page was still lent to the application
    /// ([`super::receiver::Receiver::lend`]): the frames they carried were never reported.
    pub held_packets: u64,
}

/// The device's 16-bit frame counter `n` extended to the value nearest `last + 1`.
pub(super) fn extend_frame_number(n: u16, last: Option<u64>) -> u64 {
    let Some(last) = last else {
        return u64::from(n);
    };
    let base = (last & !0xFFFF) | u64::from(n);
    [base.wrapping_sub(0x1_0000), base, base + 0x1_0000]
        .into_iter()
        .min_by_key(|c| c.abs_diff(last + 1))
        .unwrap_or(base)
}

#[derive(Debug, Default)]
pub(super) struct Acc {
    pub(super) first_psn: Option<u32>,
    pub(super) next_psn: u32,
    pub(super) packets: u32,
    pub(super) bytes: u64,
    /// CRC-32 of the frame's bytes so far, in order (JAMCRC = its complement).
    pub(super) crc: u32,
    pub(super) next_offset: u64,
    pub(super) in_order: bool,
    pub(super) page: Option<u32>,
}

/// What the tracker needs of the receiver's settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrackerConfig {
    /// Bytes per frame.
    pub(super) frame_size: usize,
    /// Pages in the ring.
    pub(super) pages: u32,
    /// The device sends no metadata.
    pub(super) md_disable: bool,
    /// Immediate layout and metadata byte order.
    pub(super) layout: StreamLayout,
    /// Refuse a frame end older than the last one.
    pub(super) reject_stale: bool,
}

/// Per-frame accounting, separate from the endpoint so it can run right after each
/// datagram is placed (before the next one can overwrite a page).
#[derive(Debug)]
pub(super) struct Tracker {
    pub(super) cfg: TrackerConfig,
    /// The receiver's QP and its completion queue.
    pub(super) qpn: u32,
    pub(super) cq: rocelink_transport::CqId,
    pub(super) lkey: u32,
    pub(super) page_size: usize,
    /// Finds the page of a placed VA.
    pages_of: super::PageFinder,
    pub(super) md_offset: usize,
    pub(super) acc: Acc,
    pub(super) expect_psn: Option<u32>,
    pub(super) last_frame: Option<u64>,
    pub(super) ready: std::collections::VecDeque<FrameReport>,
    pub(super) ends: usize,
    pub(super) comb: rocelink_wire::icrc::Combiner,
    pub(super) stats: ReceiverStats,
    /// The page after the last frame end.
    pub(super) next_page: Option<u32>,
    /// 16-bit frame numbers of the last [`RECENT`] frames reported.
    pub(super) recent: std::collections::VecDeque<u16>,
    /// The latest metadata timestamp reported.
    pub(super) last_meta: (u64, u32),
    /// Consecutive stale frame ends without metadata.
    pub(super) stale_run: u32,
    /// The QP's held-page refusals at the last frame end.
    pub(super) held_seen: u64,
}

/// Stale frame ends without metadata in a row after which the stream counts as restarted.
const STALE_RUN: u32 = 8;

/// Frames remembered to refuse a replay: a frame number is reported at most once within
/// this many frames.
const RECENT: usize = 256;

/// The page layout of a ring for frames of `frame_size` bytes: (offset of the metadata
/// record = the frame rounded up to 128 bytes, page size = that plus the metadata slot).
pub fn page_layout(frame_size: usize) -> (usize, usize) {
    let md_offset = frame_size.next_multiple_of(PAGE_SIZE);
    (md_offset, md_offset + PAGE_SIZE)
}

impl Tracker {
    /// A tracker for the ring of `cfg` (page = frame rounded up to 128 bytes, plus the
    /// metadata slot) in the region `lkey`, fed by QP `qpn` whose completions go to `cq`.
    pub(super) fn new(cfg: TrackerConfig, qpn: u32, cq: CqId, lkey: u32) -> Tracker {
        let (md_offset, page_size) = page_layout(cfg.frame_size);
        Tracker {
            cfg,
            qpn,
            cq,
            lkey,
            page_size,
            pages_of: super::PageFinder::new(page_size as u64),
            md_offset,
            acc: Acc {
                in_order: true,
                ..Acc::default()
            },
            expect_psn: None,
            last_frame: None,
            ready: Default::default(),
            ends: 0,
            comb: Default::default(),
            stats: ReceiverStats::default(),
            next_page: None,
            recent: Default::default(),
            last_meta: (0, 0),
            stale_run: 0,
            held_seen: 0,
        }
    }

    /// The page the next packet should go to: the frame being received's, or the one
    /// after the last frame end.
    pub(super) fn page(&self) -> Option<u32> {
        self.acc.page.or(self.next_page)
    }

    pub(super) fn placed(&mut self, p: u32, va: u64, len: u32, crc: u32) {
        let (page, off) = self.pages_of.locate(va);
        let page = page as u32;
        if off >= self.md_offset as u64 && !self.cfg.md_disable {
            return; // the metadata record itself
        }
        let a = &mut self.acc;
        if a.first_psn.is_none() {
            a.first_psn = Some(p);
            a.page = Some(page);
        }
        a.next_psn = psn::add(p, 1);
        if a.page != Some(page) {
            a.in_order = false;
        }
        if off != a.next_offset {
            a.in_order = false;
        }
        if a.in_order {
            // the transport hashed the payload once for the ICRC; join it to the frame's CRC
            a.crc = self.comb.combine(a.crc, crc, len as usize);
        }
        a.next_offset = off + u64::from(len);
        a.packets += 1;
        a.bytes += u64::from(len);
    }

    /// [`Tracker::placed`] for each of a run of placements that follow one another (each
    /// PSN and VA right after the one before, as the transport's runs are): the page and
    /// the frame's order looked at once, each payload's CRC joined to the frame's.
    pub(super) fn placed_run(&mut self, run: &[Placement]) {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return;
        };
        let (page, off) = self.pages_of.locate(first.va);
        let span = last.va.wrapping_sub(first.va) + u64::from(last.len);
        // past the data area (the metadata record, a frame's end on another page): as
        // placements one by one
        if off + span > self.md_offset as u64 || run.len() == 1 {
            for p in run {
                self.placed(p.psn, p.va, p.len, p.crc);
            }
            return;
        }
        let page = page as u32;
        let a = &mut self.acc;
        if a.first_psn.is_none() {
            a.first_psn = Some(first.psn);
            a.page = Some(page);
        }
        a.in_order &= a.page == Some(page) && off == a.next_offset;
        if a.in_order {
            for p in run {
                a.crc = self.comb.combine(a.crc, p.crc, p.len as usize);
            }
        }
        a.next_psn = psn::add(last.psn, 1);
        a.next_offset = off + span;
        a.packets += run.len() as u32;
        a.bytes += span;
    }

    /// Account for what the endpoint placed and completed since the last call (telling the
    /// fast path, if any, so its prediction follows). True when a frame was reported.
    pub(super) fn drain(&mut self, ep: &mut Endpoint, mut fast: Option<&mut Prediction>) -> bool {
        // only this receiver's QP's events and CQ: other roles may share the endpoint
        while let Some(e) = ep.poll_qp_event(self.qpn) {
            if let Event::Placed {
                psn, va, len, crc, ..
            } = e
            {
                self.placed(psn, va, len, crc);
                if let Some(f) = fast.as_deref_mut() {
                    f.note_placed(va, len);
                }
            }
        }
        let mut ended = false;
        while let Some(wc) = ep.poll_cq(self.cq) {
            if wc.status == WcStatus::Success && wc.opcode == WcOpcode::RecvRdmaWithImm {
                self.ends += 1;
                let page = self.frame_end(ep, wc.imm.unwrap_or(0));
                if let Some(f) = fast.as_deref_mut() {
                    f.note_end(page);
                }
                ended = true;
            }
        }
        // a stale frame end reports nothing: keep receiving
        ended && !self.ready.is_empty()
    }

    /// Close the frame and queue its report; returns its page.
    pub(super) fn frame_end(&mut self, ep: &Endpoint, imm: u32) -> u32 {
        let (imm_psn, page) = self.cfg.layout.imm_layout.decode(imm);
        let acc = std::mem::replace(
            &mut self.acc,
            Acc {
                in_order: true,
                ..Acc::default()
            },
        );
        let page = page % self.cfg.pages;
        let base = page as usize * self.page_size;
        let (md, end_psn) = self.frame_metadata(ep, base, &acc);
        let fn16_of = md.map(|m| (m.frame_number & 0xFFFF) as u16);
        let Some(behind) = self.behind(md, end_psn) else {
            self.stats.stale_frames += 1;
            return page;
        };
        if let Some(m) = md {
            self.last_meta = self.last_meta.max((m.meta_s, m.meta_ns));
        }
        let dropped = self.dropped(ep, &acc, behind, end_psn);
        let crc = self.frame_crc(ep, &acc, base, dropped);
        let (bytes_expected, crc_expected, flags, sof, meta, fn16) = match md {
            Some(m) => (
                m.bytes_written,
                Some(m.crc),
                m.flags,
                (m.sof_s, m.sof_ns),
                (m.meta_s, m.meta_ns),
                Some(m.frame_number & 0xFFFF),
            ),
            None => (self.cfg.frame_size as u64, None, 0, (0, 0), (0, 0), None),
        };
        let frame_number = match (fn16, self.last_frame) {
            (Some(n), last) => extend_frame_number(n as u16, last),
            (None, Some(last)) => last + 1,
            (None, None) => 0,
        };
        if !behind {
            self.last_frame = Some(frame_number);
            self.expect_psn = Some(psn::add(end_psn, 1));
            self.next_page = Some((page + 1) % self.cfg.pages);
        }
        if let Some(n) = fn16_of {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(n);
        }
        let imm_ok = (end_psn & self.cfg.layout.imm_layout.psn_mask()) == imm_psn;
        let complete = !behind
            && dropped == 0
            && acc.bytes == bytes_expected
            && imm_ok
            && (md.is_some() || self.cfg.md_disable);
        self.report(FrameReport {
            frame_number,
            page,
            bytes: acc.bytes,
            bytes_expected,
            crc,
            crc_expected,
            crc_ok: crc_expected.map(|c| c == crc && complete),
            psn: end_psn,
            packets: acc.packets,
            dropped_packets: dropped,
            flags,
            sof,
            meta,
            complete,
        });
        page
    }

    /// The frame's metadata record (read from the page at `base`, unless metadata is off)
    /// and the PSN of its frame-end packet.
    fn frame_metadata(&self, ep: &Endpoint, base: usize, acc: &Acc) -> (Option<Metadata>, u32) {
        if self.cfg.md_disable {
            return (None, psn::sub1(acc.next_psn));
        }
        let at = base + self.md_offset;
        let rec = ep
            .mr(self.lkey)
            .ok()
            .map(|m| m.bytes()[at..at + metadata::RECORD_LEN].to_vec());
        let md = rec.and_then(|r| Metadata::parse(&r, self.cfg.layout.endian).ok());
        let end_psn = md.map_or(psn::sub1(acc.next_psn), |m| m.psn & psn::MASK);
        (md, end_psn)
    }

    /// Whether a frame end at `end_psn` is from the past: `Some(false)` a frame in
    /// sequence, `Some(true)` a late frame never reported (reported damaged), `None` a
    /// stale one (a replay of a frame already reported, or a metadata-less one: counted,
    /// never reported). Neither of the last two moves the PSN, page or frame number on (a
    /// replay would otherwise look like a 16-million-packet gap) — unless the device
    /// restarted: its PSNs start anew (randomly, so maybe "behind") while its clock goes
    /// on. A frame stamped later than the last one reported, or (without metadata) a run
    /// of consecutive frame ends, is a new stream.
    fn behind(&mut self, md: Option<Metadata>, end_psn: u32) -> Option<bool> {
        let mut behind =
            self.cfg.reject_stale && self.expect_psn.is_some_and(|e| psn::diff(end_psn, e) < 0);
        let restarted = match md {
            Some(m) => (m.meta_s, m.meta_ns) > self.last_meta,
            None => {
                self.stale_run = if behind { self.stale_run + 1 } else { 0 };
                self.stale_run > STALE_RUN
            }
        };
        if behind && restarted {
            behind = false;
            self.expect_psn = None;
            self.stale_run = 0;
        }
        // never reported, and from the last RECENT frames (older ones are forgotten, so
        // they count as replays)
        let late = |n: u16| {
            let last = self.last_frame.map_or(n, |l| l as u16);
            usize::from(last.wrapping_sub(n)) < RECENT && !self.recent.contains(&n)
        };
        let fn16 = md.map(|m| (m.frame_number & 0xFFFF) as u16);
        if behind && !fn16.is_some_and(late) {
            return None;
        }
        Some(behind)
    }

    /// Data packets the frame lacks: those it should have had — from the PSN after the
    /// previous frame end (or the first one seen) up to the frame-end packet — less those
    /// that came and those refused because their page was still lent out (not lost on the
    /// wire: a frame the reader held on to). Counting packets rather than gaps keeps
    /// reordering from looking like loss.
    fn dropped(&mut self, ep: &Endpoint, acc: &Acc, behind: bool, end_psn: u32) -> u64 {
        let start = self.expect_psn.or(acc.first_psn).unwrap_or(end_psn);
        let span = if behind {
            0 // a late frame: what it lacked is unknown, and it is reported damaged
        } else {
            psn::diff(end_psn, start).max(0) as u64 + u64::from(self.cfg.md_disable)
        };
        let held = ep.qp_stats(self.qpn).map_or(0, |q| q.held_refusals);
        let held_new = held.saturating_sub(self.held_seen);
        self.held_seen = held;
        self.stats.held_packets += held_new;
        span.saturating_sub(u64::from(acc.packets) + held_new)
    }

    /// The frame's CRC (JAMCRC): computed as the packets landed when they came in order;
    /// one pass over the page when all came out of order; informative only when the
    /// frame is damaged anyway.
    fn frame_crc(&self, ep: &Endpoint, acc: &Acc, base: usize, dropped: u64) -> u32 {
        let whole_page = acc.bytes as usize <= self.md_offset;
        if acc.in_order || acc.bytes == 0 || dropped > 0 || !whole_page {
            return !acc.crc;
        }
        ep.mr(self.lkey)
            .map(|m| metadata::jamcrc(&m.bytes()[base..base + acc.bytes as usize]))
            .unwrap_or(0)
    }

    /// Count a frame's report and queue it.
    fn report(&mut self, r: FrameReport) {
        self.stats.frames += 1;
        self.stats.bytes += r.bytes;
        self.stats.dropped_packets += r.dropped_packets;
        if r.good() {
            self.stats.good += 1;
        } else {
            self.stats.damaged += 1;
        }
        self.ready.push_back(r);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! The tracker over a sans-IO endpoint: packets from the device's packetizer handed to
    //! `handle_datagram`, no sockets.
    use super::*;
    use crate::device::VpStream;
    use crate::device::packetizer::{Packetizer, PacketizerOptions};
    use crate::host::receiver::ReceiverConfig;
    use crate::sensor::Sensor;
    use rocelink_transport::{
        Access, Datagram, EndpointConfig, Modify, Mtu, QpInit, QpType, RecvWr, Sge,
    };
    use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
    use std::time::Instant;

    const WINDOW: usize = 5000;
    const DEV: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
    const HOST: &str = "192.168.0.101:4791";

    fn setup() -> (Endpoint, Tracker, Vec<Vec<Vec<u8>>>) {
        let local: SocketAddr = HOST.parse().unwrap();
        let mut ep = Endpoint::new(EndpointConfig::new(local));
        let cfg = ReceiverConfig {
            pages: 2,
            ..ReceiverConfig::new(local, DEV, WINDOW)
        };
        let cq = ep.create_cq();
        let mut t = Tracker::new(cfg.tracker(), 0, cq, 0);
        let mr = ep.register_mr(
            vec![0u8; t.page_size * 2].into_boxed_slice(),
            0,
            Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        );
        let qpn = ep
            .create_qp(QpInit {
                report_writes: true,
                send_cq: cq,
                recv_cq: cq,
                ..QpInit::new(QpType::Uc)
            })
            .unwrap();
        (t.qpn, t.lkey) = (qpn, mr.lkey);
        let dev = SocketAddr::new(DEV.into(), rocelink_wire::hsb::DATA_SOURCE_PORT);
        ep.modify_qp(qpn, Modify::Init { qkey: 0 }).unwrap();
        ep.modify_qp(
            qpn,
            Modify::Rtr {
                remote: Some(dev),
                dest_qpn: 0,
                rq_psn: 0,
                mtu: Mtu::Jumbo(65_532),
                min_rnr_timer: 0,
            },
        )
        .unwrap();
        for _ in 0..64 {
            let sge = Sge {
                lkey: mr.lkey,
                va: 0,
                len: 0,
            };
            ep.post_recv(qpn, RecvWr::new(0, sge)).unwrap();
        }
        let stream = VpStream {
            vp: 0,
            qp: qpn,
            rkey: mr.rkey,
            base: 0,
            page_stride: t.page_size as u64,
            first_page: 0,
            pages: 2,
            window: WINDOW as u32,
            host: SocketAddrV4::new(Ipv4Addr::new(192, 168, 0, 101), 4791),
            host_mac: rocelink_wire::bytes::Mac([0; 6]),
            md_disable: false,
            payload: 1408,
            src_port: rocelink_wire::hsb::DATA_SOURCE_PORT,
            vlan: None,
            camera: None,
            coe: None,
        };
        let mut p = Packetizer::new(stream, DEV, 0x123, PacketizerOptions::default());
        let mut buf = Vec::new();
        let frames = (0..4)
            .map(|n| {
                Sensor::Pattern.frame(n, WINDOW, &mut buf);
                let mut out = Vec::new();
                p.push(&buf, Some(0), (10 + n, 0), &mut out);
                out
            })
            .collect();
        (ep, t, frames)
    }

    /// Hand each datagram to the endpoint and the tracker; the reports, in order.
    fn feed(ep: &mut Endpoint, t: &mut Tracker, pkts: &[&Vec<u8>]) -> Vec<FrameReport> {
        let src = SocketAddr::new(DEV.into(), rocelink_wire::hsb::DATA_SOURCE_PORT);
        let dst: SocketAddr = HOST.parse().unwrap();
        let mut got = Vec::new();
        for p in pkts {
            ep.handle_datagram(
                Instant::now(),
                Datagram {
                    src,
                    dst,
                    ip_header: None,
                    payload: p,
                },
            );
            t.drain(ep, None);
            got.extend(t.ready.drain(..));
        }
        got
    }

    #[test]
    fn verdicts_without_sockets() {
        let (mut ep, mut t, f) = setup();
        // frame 0 whole; frame 1 without its second packet; frame 2 whole; frame 0 replayed
        let mut order: Vec<&Vec<u8>> = f[0].iter().collect();
        order.extend(
            f[1].iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, p)| p),
        );
        order.extend(&f[2]);
        order.extend(&f[0]);
        order.extend(&f[3]);
        let got = feed(&mut ep, &mut t, &order);
        let v: Vec<(u64, bool, u64)> = got
            .iter()
            .map(|r| (r.frame_number, r.good(), r.dropped_packets))
            .collect();
        assert_eq!(v, [(0, true, 0), (1, false, 1), (2, true, 0), (3, true, 0)]);
        assert_eq!(got[0].crc_ok, Some(true));
        assert_eq!(got[0].bytes, WINDOW as u64);
        assert_eq!(
            (t.stats.good, t.stats.damaged, t.stats.stale_frames),
            (3, 1, 1)
        );
        assert_eq!(t.stats.dropped_packets, 1);
    }
}
