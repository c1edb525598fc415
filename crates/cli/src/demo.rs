//! `rocelink demo`: an HSB camera stream built with the wire crate, captured to a pcap,
//! read back and checked packet by packet (ICRC, QP, R_Key, VA bounds, PSN continuity) and
//! frame by frame (byte count and the frame CRC carried in the metadata).

use anyhow::{Context, Result, bail};
use rocelink_io::pcap::{LINKTYPE_ETHERNET, PcapReader, PcapWriter};
use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::metadata::{self, Endian, FrameCrc, ImmLayout, Metadata};
use rocelink_wire::hsb::{self, PAGE_SIZE};
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr, psn};
use rocelink_wire::roce::{IpParams, RocePacket, RoceRepr};
use rocelink_wire::{ROCE_V2_PORT, ethernet};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;

const QP: u32 = 0xCAF0;
const RKEY: u32 = 0xBEEF;
const FRAME: usize = 2_611_376; // IMX274 1080p RAW10 CSI frame
const PAYLOAD: usize = 11 * PAGE_SIZE; // MTU 1500: (1500 - 74) / 128 = 11 pages
const PAGES: u32 = 2;

fn page_size() -> usize {
    FRAME.next_multiple_of(PAGE_SIZE) + PAGE_SIZE
}

/// Device side: packetise `frame` into page `page` as HSB does (0x2A per packet, then 0x2B).
fn packetize(
    frame: &[u8],
    page: u32,
    frame_number: u32,
    psn0: &mut u32,
    out: &mut PcapWriter<std::fs::File>,
) -> Result<()> {
    let eth = ethernet::Repr {
        dst: Mac([0x02, 0, 0, 0, 0, 0x65]),
        src: Mac([0x02, 0, 0, 0, 0, 0x02]),
        vlan: None,
        ethertype: ethernet::ethertype::IPV4,
    };
    let ip = IpParams::v4(
        Ipv4Addr::new(192, 168, 0, 2),
        Ipv4Addr::new(192, 168, 0, 101),
    );
    let base = u64::from(page) * page_size() as u64;
    let mut buf = vec![0u8; 14 + 20 + 8 + 12 + 16 + 4 + PAYLOAD + 4 + 128];
    let mut emit =
        |opcode: Opcode, va: u64, imm: Option<u32>, payload: &[u8], psn: u32| -> Result<()> {
            let repr = RoceRepr {
                ip,
                src_port: hsb::DATA_SOURCE_PORT,
                dst_port: ROCE_V2_PORT,
                ib: IbRepr {
                    bth: BthRepr {
                        opcode,
                        dest_qp: QP,
                        psn,
                        ..Default::default()
                    },
                    reth: Some(RethRepr {
                        va,
                        rkey: RKEY,
                        dma_len: payload.len() as u32,
                    }),
                    immdt: imm,
                    payload_len: payload.len(),
                    ..Default::default()
                },
            };
            let n = 14 + repr.buffer_len();
            eth.emit(&mut buf);
            repr.emit(&mut buf[14..n], payload)?;
            out.write(u64::from(psn) * 1000, &buf[..n])?;
            Ok(())
        };
    for (i, chunk) in frame.chunks(PAYLOAD).enumerate() {
        emit(
            Opcode::UC_RDMA_WRITE_ONLY,
            base + (i * PAYLOAD) as u64,
            None,
            chunk,
            *psn0,
        )?;
        *psn0 = psn::add(*psn0, 1);
    }
    let md = Metadata {
        psn: *psn0,
        crc: metadata::jamcrc(frame),
        bytes_written: frame.len() as u64,
        frame_number,
        ..Default::default()
    };
    let mut rec = [0u8; metadata::RECORD_LEN];
    md.emit(&mut rec, Endian::Big);
    let imm = ImmLayout::Psn20Page12.encode(*psn0, page);
    emit(
        Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        base + FRAME.next_multiple_of(PAGE_SIZE) as u64,
        Some(imm),
        &rec,
        *psn0,
    )?;
    *psn0 = psn::add(*psn0, 1);
    Ok(())
}

pub(crate) fn run(path: &Path, frames: u32) -> Result<ExitCode> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = PcapWriter::new(file, LINKTYPE_ETHERNET)?;
    let mut psn0 = 0xFF_FFF0; // crosses the 24-bit wrap on purpose
    for n in 0..frames {
        let frame: Vec<u8> = (0..FRAME)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(n) as u8)
            .collect();
        packetize(&frame, n % PAGES, n, &mut psn0, &mut w)?;
    }
    w.into_inner()?;
    println!(
        "wrote {frames} frames of {FRAME} bytes to {}",
        path.display()
    );

    // Host side: a region of PAGES pages at VA 0, every packet checked before a byte lands.
    let mut region = vec![0u8; page_size() * PAGES as usize];
    let (mut expected_psn, mut crc, mut bytes, mut dropped) =
        (None::<u32>, FrameCrc::new(), 0u64, 0u64);
    let mut bad = 0;
    let reader = PcapReader::new(std::io::BufReader::new(std::fs::File::open(path)?))?;
    for rec in reader {
        let rec = rec?;
        let pkt = RocePacket::parse(&rec.data[14..]).context("not RoCE")?;
        let ib = IbRepr::parse(&pkt.ib);
        let icrc_ok = pkt.icrc_check()?.ok();
        let reth = ib.reth.unwrap_or_default();
        let va = reth.va as usize;
        let payload = pkt.ib.payload();
        if !icrc_ok
            || ib.bth.dest_qp != QP
            || reth.rkey != RKEY
            || va
                .checked_add(payload.len())
                .is_none_or(|e| e > region.len())
        {
            bad += 1;
            continue;
        }
        if let Some(e) = expected_psn {
            dropped += u64::from(psn::diff(ib.bth.psn, e).max(0) as u32);
        }
        expected_psn = Some(psn::add(ib.bth.psn, 1));
        region[va..va + payload.len()].copy_from_slice(payload);
        if ib.bth.opcode == Opcode::UC_RDMA_WRITE_ONLY {
            crc.update(payload);
            bytes += payload.len() as u64;
            continue;
        }
        let md = Metadata::parse(payload, Endian::Big)?;
        let (imm_psn, page) = ImmLayout::Psn20Page12.decode(ib.immdt.unwrap_or(0));
        let frame_crc = std::mem::take(&mut crc).finalize();
        let good = frame_crc == md.crc
            && bytes == md.bytes_written
            && dropped == 0
            && imm_psn == ib.bth.psn & 0xF_FFFF;
        println!(
            "frame {:>3} page {page} bytes {bytes} crc {frame_crc:#010x} {} psn {:#08x} dropped {dropped} icrc-failures {bad} -> {}",
            md.frame_number,
            if frame_crc == md.crc {
                "ok"
            } else {
                "MISMATCH"
            },
            md.psn,
            if good { "good" } else { "DAMAGED" }
        );
        if !good || bad > 0 {
            bail!("frame {} failed its checks", md.frame_number);
        }
        bytes = 0;
    }
    println!(
        "all {frames} frames verified; decode the capture with: rocelink decode --hsb {}",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
