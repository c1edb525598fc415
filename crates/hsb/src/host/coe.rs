//! Camera-over-Ethernet frames reassembled and verified, sans I/O: [`CoeAssembler`] takes
//! the bytes after each frame's Ethernet header and reports frames as [`FrameReport`]s, as
//! the RoCE receiver does.
//!
//! Each packet of our channel is placed at its byte offset in a page of a registered
//! memory region — through the region's checked access, so an offset outside the page is
//! refused and counted, never written. A frame is good when it began with a frame-start
//! packet, the 7-bit sequence never skipped, every packet carried the frame's number,
//! the bytes that arrived equal the bytes the device says it wrote, and the CRC over them
//! equals the metadata's. The frame end carries the metadata either as HSB's emulator
//! sends it (the payload's last 128 bytes) or as the IP document describes it (a 48-byte
//! payload); both are accepted. Pages alternate, so a delivered frame's bytes stay put
//! while the next frame lands; a page is filled with 0xFF before a frame lands in it (as
//! HSB's receiver does), so missing bytes are visible.

use super::tracker::{FrameReport, ReceiverStats, extend_frame_number};
use rocelink_transport::{Access, MrTable};
use rocelink_wire::hsb::PAGE_SIZE;
use rocelink_wire::hsb::coe::{self, Packet, Repr};
use rocelink_wire::hsb::metadata::{self, Endian, Metadata};

/// What the assembler counts beyond [`ReceiverStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CoeStats {
    /// CoE packets of other channels or streams (not ours; ignored).
    pub other: u64,
    /// Frame ends whose payload was too short for a metadata record (HSB: a runt).
    pub runts: u64,
    /// Packets whose offset and length fell outside the frame's page (refused, not
    /// written).
    pub out_of_bounds: u64,
}

#[derive(Debug, Default)]
struct Acc {
    page: u32,
    started: bool,
    packets: u32,
    bytes: u64,
    dropped: u64,
    refused: u64,
    number: u8,
    numbers_agree: bool,
}

/// Reassembles one channel's CoE frames (see the module documentation).
#[derive(Debug)]
pub struct CoeAssembler {
    channel: u8,
    frame_size: usize,
    page_size: usize,
    endian: Endian,
    mrs: MrTable,
    key: u32,
    cur: Option<Acc>,
    next_page: u32,
    next_seq: Option<u8>,
    last_frame: Option<u64>,
    ready: std::collections::VecDeque<FrameReport>,
    /// Frame counters.
    pub stats: ReceiverStats,
    /// CoE counters.
    pub coe: CoeStats,
}

/// Pages the assembler alternates between.
const PAGES: u32 = 2;

impl CoeAssembler {
    /// Frames of `frame_size` bytes on `channel` (0..=63); metadata fields in `endian`.
    pub fn new(channel: u8, frame_size: usize, endian: Endian) -> CoeAssembler {
        let page_size = frame_size.next_multiple_of(PAGE_SIZE) + metadata::RECORD_LEN;
        let mut mrs = MrTable::default();
        let mem = vec![0xFFu8; page_size * PAGES as usize].into_boxed_slice();
        let key = mrs
            .register(mem, 0, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .lkey;
        CoeAssembler {
            channel: channel & coe::MAX_CHANNEL,
            frame_size,
            page_size,
            endian,
            mrs,
            key,
            cur: None,
            next_page: 0,
            next_seq: None,
            last_frame: None,
            ready: Default::default(),
            stats: ReceiverStats::default(),
            coe: CoeStats::default(),
        }
    }

    /// Bytes per page: the frame rounded up to 128, then room for the record.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The bytes of a reported frame (valid until the assembler starts the frame after
    /// next in the same page).
    pub fn frame_data(&self, f: &FrameReport) -> &[u8] {
        let len = (f.bytes_expected as usize).min(self.frame_size);
        let va = u64::from(f.page) * self.page_size as u64;
        self.mrs
            .get(self.key)
            .and_then(|r| r.slice(va, len as u64, Access::NONE))
            .unwrap_or(&[])
    }

    fn begin(&mut self, started: bool, number: u8) -> Acc {
        let page = self.next_page;
        self.next_page = (page + 1) % PAGES;
        let va = u64::from(page) * self.page_size as u64;
        if let Ok(r) = self.mrs.get_mut(self.key)
            && let Ok(b) = r.slice_mut(va, self.page_size as u64, Access::LOCAL_WRITE)
        {
            b.fill(0xFF);
        }
        Acc {
            page,
            started,
            number,
            numbers_agree: true,
            ..Acc::default()
        }
    }

    /// The next frame reported, oldest first.
    pub fn poll_frame(&mut self) -> Option<FrameReport> {
        self.ready.pop_front()
    }

    /// Handle one frame's bytes after the Ethernet header. A packet that ends a frame
    /// makes it ready ([`CoeAssembler::poll_frame`]); so does a frame start while a frame
    /// is open — that frame lost its end and is reported damaged.
    pub fn handle(&mut self, packet: &[u8]) {
        let Ok(view) = Packet::new_checked(packet) else {
            self.coe.other += 1;
            return;
        };
        let Ok(h) = Repr::parse(&view) else {
            self.coe.other += 1;
            return;
        };
        if h.channel != self.channel {
            self.coe.other += 1;
            return;
        }
        self.stats.datagrams += 1;
        let gap = match self.next_seq {
            Some(e) => u64::from(h.sequence.wrapping_sub(e) & 0x7F),
            None => 0,
        };
        self.next_seq = Some(h.sequence.wrapping_add(1) & 0x7F);
        let start = h.flags & coe::FRAME_START != 0 && h.offset == 0;
        // a frame start while a frame is open: that frame lost its end (and the packets
        // missing before this start were its); missing before a start with no frame
        // open, they were whole frames — counted, but not against this one
        let mut gap = gap;
        if start {
            match self.cur.take() {
                Some(mut a) => {
                    a.dropped += gap;
                    self.unfinished(a);
                }
                None => self.stats.dropped_packets += gap,
            }
            gap = 0;
        }
        let mut acc = match self.cur.take() {
            Some(a) => a,
            None => self.begin(start, h.frame_number),
        };
        acc.dropped += gap;
        acc.packets += 1;
        acc.numbers_agree &= h.frame_number == acc.number;
        let payload = view.payload();
        let placed = self.place(&mut acc, h.offset, payload);
        if h.flags & coe::FRAME_END == 0 {
            if placed {
                acc.bytes += payload.len() as u64;
            }
            self.cur = Some(acc);
            return;
        }
        let Some(md) = frame_metadata(payload, self.endian) else {
            self.coe.runts += 1;
            self.stats.refused += 1;
            acc.refused += 1;
            self.cur = Some(acc);
            return;
        };
        if placed {
            // the data in this packet: what lies below the bytes written
            let data = md.bytes_written.saturating_sub(u64::from(h.offset));
            acc.bytes += data.min(payload.len() as u64);
        }
        self.finished(acc, Some(&md));
    }

    /// Place a packet's `payload` at `offset` of the frame's page; false (counted) when
    /// it would not lie inside the page and the registered region.
    fn place(&mut self, acc: &mut Acc, offset: u32, payload: &[u8]) -> bool {
        let va = u64::from(acc.page) * self.page_size as u64 + u64::from(offset);
        let in_page = u64::from(offset) + payload.len() as u64 <= self.page_size as u64;
        let placed = in_page
            && match self.mrs.get_mut(self.key) {
                Ok(r) => match r.slice_mut(va, payload.len() as u64, Access::REMOTE_WRITE) {
                    Ok(b) => {
                        b.copy_from_slice(payload);
                        true
                    }
                    Err(_) => false,
                },
                Err(_) => false,
            };
        if !placed {
            self.coe.out_of_bounds += 1;
            self.stats.refused += 1;
            acc.refused += 1;
        }
        placed
    }

    /// Report a frame whose end never came: damaged.
    fn unfinished(&mut self, acc: Acc) {
        self.finished(acc, None);
    }

    /// Verify and report the frame in `acc`, with the device's metadata if it came.
    fn finished(&mut self, acc: Acc, md: Option<&Metadata>) {
        let written = md.map_or(acc.bytes, |m| m.bytes_written);
        let va = u64::from(acc.page) * self.page_size as u64;
        let len = written.min(self.frame_size as u64);
        let crc = self
            .mrs
            .get(self.key)
            .and_then(|r| r.slice(va, len, Access::NONE))
            .map_or(0, metadata::jamcrc);
        let crc_expected = md.map(|m| m.crc);
        let number = match md {
            Some(m) => extend_frame_number(m.frame_number as u16, self.last_frame),
            None => self.last_frame.map_or(0, |l| l + 1),
        };
        self.last_frame = Some(number);
        let complete = md.is_some()
            && acc.started
            && acc.dropped == 0
            && acc.refused == 0
            && acc.numbers_agree
            && md.is_some_and(|m| (m.frame_number & 3) as u8 == acc.number)
            && written <= self.frame_size as u64
            && acc.bytes == written;
        let f = FrameReport {
            frame_number: number,
            page: acc.page,
            bytes: acc.bytes,
            bytes_expected: written,
            crc,
            crc_expected,
            crc_ok: crc_expected.map(|c| c == crc),
            psn: md.map_or(0, |m| m.psn),
            packets: acc.packets,
            dropped_packets: acc.dropped,
            flags: md.map_or(0, |m| m.flags),
            sof: md.map_or((0, 0), |m| (m.sof_s, m.sof_ns)),
            meta: md.map_or((0, 0), |m| (m.meta_s, m.meta_ns)),
            complete,
        };
        let s = &mut self.stats;
        s.frames += 1;
        if f.good() {
            s.good += 1;
        } else {
            s.damaged += 1;
        }
        s.dropped_packets += f.dropped_packets;
        s.bytes += f.bytes;
        self.ready.push_back(f);
    }
}

/// The metadata a frame's last packet carries: a short record of its own, or the whole
/// record closing the packet.
fn frame_metadata(payload: &[u8], endian: Endian) -> Option<Metadata> {
    match payload.len() {
        coe::SHORT_METADATA_LEN => {
            let mut rec = [0u8; metadata::RECORD_LEN];
            rec[..coe::SHORT_METADATA_LEN].copy_from_slice(payload);
            Metadata::parse(&rec, endian).ok()
        }
        n if n >= metadata::RECORD_LEN => {
            Metadata::parse(&payload[n - metadata::RECORD_LEN..], endian).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::coe::CoePacketizer;
    use crate::device::{DeviceConfig, DeviceCore, VpStream};
    use crate::regs::{self, hif, vp};
    use rocelink_wire::hsb::coe::MetadataForm;
    use std::net::Ipv4Addr;

    fn stream(window: u32, channel: u8) -> VpStream {
        let mut d = DeviceCore::new(DeviceConfig::new(Ipv4Addr::new(192, 168, 0, 2)));
        for (off, v) in [
            (vp::QP, coe::qp_register(channel, 9)),
            (vp::BUFFER_LENGTH, window),
            (vp::HOST_MAC_LOW, 0x0304_0506),
        ] {
            d.write(regs::vp_reg(0, off), v);
        }
        d.write(regs::hif_reg(0, hif::PACKET_SIZE), 3);
        d.write(regs::hif_reg(0, hif::VP_MASK), 1);
        d.vp_stream(0).unwrap()
    }

    /// `n` frames of `window` bytes (frame i filled from seed i) as CoE packets.
    fn frames(window: u32, n: usize, form: MetadataForm) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut pk = CoePacketizer::new(stream(window, 7), 1, form, Endian::Big);
        let (mut pkts, mut data) = (Vec::new(), Vec::new());
        for i in 0..n {
            let f: Vec<u8> = (0..window as usize)
                .map(|j| (j * 7 + i * 13) as u8)
                .collect();
            pk.push(&f, Some(0), (9, 9), &mut pkts).unwrap();
            data.push(f);
        }
        (pkts, data)
    }

    fn run(a: &mut CoeAssembler, pkts: &[Vec<u8>]) -> Vec<(FrameReport, Vec<u8>)> {
        let mut out = Vec::new();
        for p in pkts {
            a.handle(p);
            while let Some(f) = a.poll_frame() {
                let d = a.frame_data(&f).to_vec();
                out.push((f, d));
            }
        }
        out
    }

    #[test]
    fn frames_round_trip_in_both_metadata_forms() {
        for form in [MetadataForm::Trailing, MetadataForm::Short] {
            for window in [1000u32, 1152, 300] {
                let (pkts, data) = frames(window, 5, form);
                let mut a = CoeAssembler::new(7, window as usize, Endian::Big);
                let got = run(&mut a, &pkts);
                assert_eq!(got.len(), 5, "{form:?} {window}");
                for (i, (f, bytes)) in got.iter().enumerate() {
                    assert!(f.good(), "{form:?} {window}: {f:?}");
                    assert_eq!(f.frame_number, i as u64);
                    assert_eq!(bytes, &data[i]);
                    assert_eq!(f.crc_ok, Some(true));
                }
                assert_eq!((a.stats.good, a.stats.damaged), (5, 0));
            }
        }
    }

    #[test]
    fn a_lost_packet_damages_its_frame_only() {
        let (mut pkts, data) = frames(1000, 3, MetadataForm::Trailing);
        // frame 1's second packet (3 data packets of 384 + the record per frame)
        let per = pkts.len() / 3;
        pkts.remove(per + 1);
        let mut a = CoeAssembler::new(7, 1000, Endian::Big);
        let got = run(&mut a, &pkts);
        let v: Vec<_> = got
            .iter()
            .map(|(f, _)| (f.frame_number, f.good(), f.dropped_packets))
            .collect();
        assert_eq!(v, vec![(0, true, 0), (1, false, 1), (2, true, 0)]);
        // the hole reads 0xFF, as HSB's receiver leaves it
        assert!(got[1].1[384..768].iter().all(|&b| b == 0xFF));
        assert_eq!(got[2].1, data[2]);
    }

    #[test]
    fn a_lost_frame_end_is_reported_when_the_next_frame_starts() {
        let (mut pkts, _) = frames(1000, 3, MetadataForm::Short);
        let per = pkts.len() / 3;
        pkts.remove(2 * per - 1); // frame 1's end
        let mut a = CoeAssembler::new(7, 1000, Endian::Big);
        let got = run(&mut a, &pkts);
        let v: Vec<_> = got.iter().map(|(f, _)| (f.good(), f.crc_ok)).collect();
        assert_eq!(
            v,
            vec![(true, Some(true)), (false, None), (true, Some(true))]
        );
        assert_eq!(got[2].0.frame_number, 2);
    }

    #[test]
    fn offsets_outside_the_page_are_refused_unwritten() {
        let (pkts, _) = frames(1000, 1, MetadataForm::Trailing);
        let mut a = CoeAssembler::new(7, 1000, Endian::Big);
        let mut bad = pkts[1].clone();
        // offset 1024 + 384 bytes: past the 1152-byte page
        bad[28..32].copy_from_slice(&0x0000_0400u32.to_be_bytes());
        a.handle(&pkts[0]);
        a.handle(&bad);
        for p in &pkts[2..] {
            a.handle(p);
        }
        let f = a.poll_frame().unwrap();
        assert!(!f.good());
        assert_eq!(a.coe.out_of_bounds, 1);
        assert_eq!(a.stats.refused, 1);
        // a wildly large offset too
        bad[28..32].copy_from_slice(&0x0FFF_FF00u32.to_be_bytes());
        a.handle(&bad);
        assert_eq!(a.coe.out_of_bounds, 2);
    }

    #[test]
    fn corruption_other_channels_and_runts() {
        let (pkts, _) = frames(1000, 2, MetadataForm::Trailing);
        let mut a = CoeAssembler::new(7, 1000, Endian::Big);
        let mut flipped = pkts[1].clone();
        flipped[40] ^= 0x10;
        let mut other = pkts[0].clone();
        other[26] = 8; // channel 8
        a.handle(&other);
        a.handle(&[0u8; 10]);
        let per = pkts.len() / 2;
        let got = run(&mut a, &[pkts[0].clone(), flipped]);
        assert!(got.is_empty());
        let got = run(&mut a, &pkts[2..per]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.crc_ok, Some(false), "a flipped bit fails the CRC");
        assert!(!got[0].0.good());
        assert_eq!(a.coe.other, 2);
        // frame 1's end cut short of a record: refused, the frame stays open
        let mut rest = pkts[per..2 * per - 1].to_vec();
        let mut runt = pkts[2 * per - 1].clone();
        runt.truncate(32 + 100);
        rest.push(runt);
        assert!(run(&mut a, &rest).is_empty());
        assert_eq!(a.coe.runts, 1);
    }
}
