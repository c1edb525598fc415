//! The CoE packetizer: sensor-window bytes → Camera-over-Ethernet packets (the bytes after
//! the Ethernet header; see [`rocelink_wire::hsb::coe`]) of `DP_PACKET_SIZE` pages at byte
//! offsets from 0, the first flagged frame start, a line-end flag each time the line
//! threshold is crossed, the sequence counting packets; then the frame end with the
//! metadata record, in the [`MetadataForm`] chosen: by default as HSB's emulator sends it
//! (zero pad to the frame size rounded up to 128, then the 128-byte record, in the last
//! data packet when it fits, else in a packet of its own at that offset), or as the IP
//! document describes it (a packet of its own with the record's first 48 bytes).

use super::VpStream;
use super::packetizer::{Ptp, WindowSummary};
use rocelink_wire::hsb::PAGE_SIZE;
use rocelink_wire::hsb::coe::{self, MetadataForm};
use rocelink_wire::hsb::metadata::{self, Endian, FrameCrc, Metadata};

/// Turns windows into CoE packets for one virtual port.
#[derive(Debug)]
pub struct CoePacketizer {
    s: VpStream,
    channel: u8,
    line_threshold: u64,
    form: MetadataForm,
    endian: Endian,
    psn: u32,
    frame_number: u16,
    offset: u64,
    line_offset: u64,
    staged: Vec<u8>,
    crc: FrameCrc,
    sof: Option<Ptp>,
    packets: u32,
}

impl CoePacketizer {
    /// Start a CoE stream (the channel and line threshold from `s.coe`) with first
    /// sequence number `psn0`.
    pub fn new(s: VpStream, psn0: u32, form: MetadataForm, endian: Endian) -> CoePacketizer {
        let (channel, lsh) = s.coe.unwrap_or((0, 31));
        CoePacketizer {
            s,
            channel,
            line_threshold: 1u64 << lsh.min(40),
            form,
            endian,
            psn: psn0 & 0xFF_FFFF,
            frame_number: 0,
            offset: 0,
            line_offset: 0,
            staged: Vec::with_capacity(s.payload),
            crc: FrameCrc::new(),
            sof: None,
            packets: 0,
        }
    }

    /// The stream configuration.
    pub fn stream(&self) -> &VpStream {
        &self.s
    }

    /// Next sequence number (24 bits; the header carries its low 7).
    pub fn psn(&self) -> u32 {
        self.psn
    }

    /// Where the frame-end record goes: the window size rounded up to 128.
    fn metadata_offset(&self) -> u64 {
        u64::from(self.s.window).next_multiple_of(PAGE_SIZE as u64)
    }

    /// Append one packet to `out`: header for `offset` and `flags`, then `parts`, of which
    /// the first `data` bytes are sensor data.
    fn emit(
        &mut self,
        offset: u64,
        mut flags: u8,
        parts: &[&[u8]],
        data: usize,
        now: Ptp,
        out: &mut Vec<Vec<u8>>,
    ) {
        if offset == 0 && data > 0 {
            flags |= coe::FRAME_START;
        }
        self.line_offset += data as u64;
        if data > 0 && self.line_offset >= self.line_threshold {
            flags |= coe::LINE_END;
            self.line_offset = 0;
        }
        let h = coe::Repr {
            sensor: self.s.vp as u8,
            ptp: (now.0 as u32, now.1),
            sequence: (self.psn & 0x7F) as u8,
            channel: self.channel,
            flags,
            frame_number: (self.frame_number & 3) as u8,
            offset: offset as u32,
        };
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        let mut p = vec![0u8; coe::HEADER_LEN + len];
        h.emit(&mut p);
        let mut at = coe::HEADER_LEN;
        for part in parts {
            p[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        out.push(p);
        self.psn = (self.psn + 1) & 0xFF_FFFF;
        self.packets += 1;
    }

    /// Send what is staged as a data packet.
    fn flush_staged(&mut self, now: Ptp, out: &mut Vec<Vec<u8>>) {
        if self.staged.is_empty() {
            return;
        }
        let staged = std::mem::take(&mut self.staged);
        self.emit(self.offset, 0, &[&staged], staged.len(), now, out);
        self.offset += staged.len() as u64;
        self.staged = staged;
        self.staged.clear();
    }

    /// Feed window bytes; `end = Some(flags)` closes the window (see `SensorWindow`).
    /// Packets (the bytes after the Ethernet header) are appended to `out`; a closed
    /// window returns its summary.
    pub fn push(
        &mut self,
        bytes: &[u8],
        end: Option<u32>,
        now: Ptp,
        out: &mut Vec<Vec<u8>>,
    ) -> Option<WindowSummary> {
        if !bytes.is_empty() && self.sof.is_none() {
            self.sof = Some(now);
        }
        let p = self.s.payload.max(1);
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.staged.len() == p {
                self.flush_staged(now, out);
            }
            let take = (p - self.staged.len()).min(rest.len());
            self.staged.extend_from_slice(&rest[..take]);
            self.crc.update(&rest[..take]);
            rest = &rest[take..];
        }
        let flags = end?;
        Some(self.close_window(flags, now, out))
    }

    /// Close the window: its metadata (closing the last data packet, or a packet of its
    /// own), its summary, and the counts reset for the next.
    fn close_window(&mut self, flags: u32, now: Ptp, out: &mut Vec<Vec<u8>>) -> WindowSummary {
        let p = self.s.payload.max(1);
        let data_end = self.offset + self.staged.len() as u64;
        let md_at = self
            .metadata_offset()
            .max(data_end.next_multiple_of(PAGE_SIZE as u64));
        let crc = std::mem::take(&mut self.crc).finalize();
        let sof = self.sof.take().unwrap_or(now);
        let mut md = Metadata {
            flags,
            psn: self.psn,
            crc,
            sof_s: sof.0,
            sof_ns: sof.1,
            bytes_written: data_end,
            frame_number: u32::from(self.frame_number),
            meta_s: now.0,
            meta_ns: now.1,
        };
        let mut rec = [0u8; metadata::RECORD_LEN];
        let pad = (md_at - data_end) as usize;
        match self.form {
            MetadataForm::Trailing if self.staged.len() + pad + metadata::RECORD_LEN <= p => {
                // the record closes the last data packet
                md.emit(&mut rec, self.endian);
                let staged = std::mem::take(&mut self.staged);
                let zeros = vec![0u8; pad];
                let n = staged.len();
                self.emit(
                    self.offset,
                    coe::FRAME_END,
                    &[&staged, &zeros, &rec],
                    n,
                    now,
                    out,
                );
                self.staged = staged;
                self.staged.clear();
            }
            form => {
                self.flush_staged(now, out);
                md.psn = self.psn;
                md.emit(&mut rec, self.endian);
                let len = match form {
                    MetadataForm::Short => coe::SHORT_METADATA_LEN,
                    MetadataForm::Trailing => metadata::RECORD_LEN,
                };
                self.emit(md_at, coe::FRAME_END, &[&rec[..len]], 0, now, out);
            }
        }
        let summary = WindowSummary {
            frame_number: self.frame_number,
            page: 0,
            bytes: data_end,
            crc,
            flags,
            packets: self.packets,
        };
        self.frame_number = self.frame_number.wrapping_add(1);
        self.offset = 0;
        self.line_offset = 0;
        self.packets = 0;
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceConfig, DeviceCore};
    use crate::regs::{self, hif, vp};
    use rocelink_wire::hsb::coe::Packet;
    use std::net::Ipv4Addr;

    /// A CoE stream as HSB's `configure_coe` programs it: channel 1, line threshold 2^8.
    fn stream(window: u32, pages_per_packet: u32) -> VpStream {
        let mut d = DeviceCore::new(DeviceConfig::new(Ipv4Addr::new(192, 168, 0, 2)));
        for (off, v) in [
            (vp::QP, coe::qp_register(1, 8)),
            (vp::BUFFER_LENGTH, window),
            (vp::HOST_MAC_HIGH, 0x0002),
            (vp::HOST_MAC_LOW, 0x0304_0506),
        ] {
            assert!(d.write(regs::vp_reg(0, off), v));
        }
        d.write(regs::hif_reg(0, hif::PACKET_SIZE), pages_per_packet);
        d.write(regs::hif_reg(0, hif::VP_MASK), 1);
        d.vp_stream(0)
            .expect("a CoE stream needs no host IP or UDP port")
    }

    fn headers(out: &[Vec<u8>]) -> Vec<(u8, u32, u8, usize)> {
        out.iter()
            .map(|p| {
                let v = Packet::new_checked(&p[..]).unwrap();
                (v.sequence(), v.offset(), v.flags(), v.payload().len())
            })
            .collect()
    }

    #[test]
    fn record_in_its_own_packet_when_the_last_has_no_room() {
        let s = stream(1000, 2);
        assert_eq!(s.coe, Some((1, 8)));
        let mut pk = CoePacketizer::new(s, 0x7E, MetadataForm::Trailing, Endian::Big);
        let frame: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        let sum = pk.push(&frame, Some(0), (5, 6), &mut out).unwrap();
        use coe::{FRAME_END as E, FRAME_START as S, LINE_END as L};
        assert_eq!(
            headers(&out),
            vec![
                (0x7E, 0, S | L, 256),
                (0x7F, 256, L, 256),
                (0x00, 512, L, 256),
                (0x01, 768, 0, 232),
                (0x02, 1024, E, 128),
            ],
            "7-bit sequence wraps; a line end every 256 bytes; the record at 1000 → 1024"
        );
        let md = Metadata::parse(&out[4][32..], Endian::Big).unwrap();
        assert_eq!(md.bytes_written, 1000);
        assert_eq!(md.crc, metadata::jamcrc(&frame));
        assert_eq!(md.psn, 0x82);
        assert_eq!((sum.bytes, sum.packets), (1000, 5));
        // the next frame: number 1, offsets from 0 again
        out.clear();
        pk.push(&frame, Some(0), (5, 6), &mut out).unwrap();
        assert_eq!(Packet::new_checked(&out[0][..]).unwrap().frame_number(), 1);
        assert_eq!(Packet::new_checked(&out[0][..]).unwrap().offset(), 0);
    }

    #[test]
    fn record_closes_the_last_packet_when_it_fits_or_is_short() {
        let s = stream(600, 8);
        let frame = vec![0x5Au8; 600];
        let mut out = Vec::new();
        let mut pk = CoePacketizer::new(s, 0, MetadataForm::Trailing, Endian::Big);
        pk.push(&frame[..100], None, (1, 0), &mut out);
        pk.push(&frame[100..], Some(0), (1, 0), &mut out).unwrap();
        // 600 bytes, pad to 640, record: 768 ≤ 1024 in one packet
        assert_eq!(
            headers(&out),
            vec![(0, 0, coe::FRAME_START | coe::LINE_END | coe::FRAME_END, 768)]
        );
        assert!(out[0][32 + 600..32 + 640].iter().all(|&b| b == 0));
        let md = Metadata::parse(&out[0][32 + 640..], Endian::Big).unwrap();
        assert_eq!(md.bytes_written, 600);
        // the IP document's form: a 48-byte record at 640 in a packet of its own
        out.clear();
        let mut pk = CoePacketizer::new(s, 0, MetadataForm::Short, Endian::Big);
        pk.push(&frame, Some(0), (1, 0), &mut out).unwrap();
        assert_eq!(
            headers(&out),
            vec![
                (0, 0, coe::FRAME_START | coe::LINE_END, 600),
                (1, 640, coe::FRAME_END, 48)
            ]
        );
    }
}
