//! ICRC throughput against raw crc32fast over the same bytes.
//!
//! `cargo bench -p rocelink-wire --bench icrc`. The ratio icrc/raw is what matters (issue
//! goal ≥ 0.8 on 4 KiB payloads); both are measured in the same run.

#![allow(clippy::unwrap_used)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
use rocelink_wire::icrc;
use rocelink_wire::roce::{IpParams, RocePacket, RoceRepr};
use std::hint::black_box;
use std::net::Ipv4Addr;

fn packet(payload_len: usize) -> Vec<u8> {
    let r = RoceRepr {
        ip: IpParams::v4(
            Ipv4Addr::new(192, 168, 0, 2),
            Ipv4Addr::new(192, 168, 0, 101),
        ),
        src_port: 12288,
        dst_port: 4791,
        ib: IbRepr {
            bth: BthRepr {
                opcode: Opcode::UC_RDMA_WRITE_ONLY,
                dest_qp: 0xCAF0,
                psn: 1,
                ..Default::default()
            },
            reth: Some(RethRepr {
                va: 0,
                rkey: 0xBEEF,
                dma_len: payload_len as u32,
            }),
            payload_len,
            ..Default::default()
        },
    };
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b, &payload).unwrap();
    b
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("icrc");
    for size in [1024usize, 4096] {
        let pkt = packet(size);
        let p = RocePacket::parse(&pkt).unwrap();
        // bytes the ICRC hashes: 8 (LRH) + 20 (IPv4) + 8 (UDP) + BTH..pad
        let covered = 8 + 20 + 8 + p.ib.icrc_covered().len();
        g.throughput(Throughput::Bytes(covered as u64));
        let raw = vec![0x5Au8; covered];
        g.bench_with_input(BenchmarkId::new("raw_crc32fast", size), &raw, |b, raw| {
            b.iter(|| black_box(crc32fast::hash(black_box(raw))))
        });
        g.bench_with_input(BenchmarkId::new("raw_crc_fast", size), &raw, |b, raw| {
            b.iter(|| {
                black_box(crc_fast::checksum(
                    crc_fast::CrcAlgorithm::Crc32IsoHdlc,
                    black_box(raw),
                ))
            })
        });
        g.bench_with_input(BenchmarkId::new("icrc_compute", size), &p, |b, p| {
            b.iter(|| {
                black_box(
                    icrc::compute(p.ip_header, p.udp_header, black_box(p.ib.icrc_covered()))
                        .unwrap(),
                )
            })
        });
        g.bench_with_input(
            BenchmarkId::new("parse_and_verify", size),
            &pkt,
            |b, pkt| {
                b.iter(|| {
                    black_box(
                        RocePacket::parse(black_box(pkt))
                            .unwrap()
                            .icrc_check()
                            .unwrap()
                            .ok(),
                    )
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
