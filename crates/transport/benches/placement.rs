//! Per-packet receive cost of the generic transport path: a 4 KiB UC RDMA WRITE ONLY
//! through `Endpoint::handle_datagram` (parse, ICRC, QP/R_Key/bounds, one copy into the
//! region), against the two things it cannot avoid measured in the same run: a 4 KiB copy
//! and the ICRC alone.
//!
//! `taskset -c 1 cargo bench -p rocelink-transport --bench placement`

#![allow(clippy::unwrap_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rocelink_transport::*;
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Instant;

const PAYLOAD: usize = 4096;

fn bench(c: &mut Criterion) {
    let a: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();
    let mut ep = Endpoint::new(EndpointConfig::new(b));
    let mr = ep.register_mr(
        vec![0u8; 1 << 20].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let qp = ep.create_qp(QpInit::new(QpType::Uc)).unwrap();
    ep.modify_qp(qp, Modify::Init { qkey: 0 }).unwrap();
    ep.modify_qp(
        qp,
        Modify::Rtr {
            remote: Some(a),
            dest_qpn: 1,
            rq_psn: 0,
            mtu: Mtu::M4096,
            min_rnr_timer: 0,
        },
    )
    .unwrap();
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| i as u8).collect();
    let pkts: Vec<Vec<u8>> = (0..16u32)
        .map(|i| {
            let ib = IbRepr {
                bth: BthRepr {
                    opcode: Opcode::UC_RDMA_WRITE_ONLY,
                    dest_qp: qp,
                    psn: i,
                    ..Default::default()
                },
                reth: Some(RethRepr {
                    va: u64::from(i) * 65_536,
                    rkey: mr.rkey,
                    dma_len: PAYLOAD as u32,
                }),
                payload_len: PAYLOAD,
                ..Default::default()
            };
            let mut buf = vec![0u8; ib.buffer_len()];
            ib.emit(&mut buf, &payload);
            rocelink_wire::icrc::fill_socket(a, b, &mut buf).unwrap();
            buf
        })
        .collect();
    let mut g = c.benchmark_group("placement");
    g.throughput(Throughput::Bytes(PAYLOAD as u64));
    let now = Instant::now();
    let mut i = 0usize;
    g.bench_function("handle_datagram_4k", |bn| {
        bn.iter(|| {
            i = i.wrapping_add(1);
            ep.handle_datagram(
                now,
                Datagram {
                    src: a,
                    dst: b,
                    ip_header: None,
                    payload: black_box(&pkts[i % 16]),
                },
            );
            while ep.poll_event().is_some() {}
        })
    });
    let mut dst = vec![0u8; 1 << 20];
    let mut k = 0usize;
    g.bench_function("memcpy_4k", |bn| {
        bn.iter(|| {
            k = (k + 1) % 16;
            dst[k * 65_536..k * 65_536 + PAYLOAD].copy_from_slice(black_box(&payload));
        })
    });
    g.bench_function("icrc_only_4k", |bn| {
        bn.iter(|| rocelink_wire::icrc::check_socket(a, b, black_box(&pkts[3])).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
