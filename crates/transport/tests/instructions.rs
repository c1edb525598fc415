//! Instruction count of the per-packet receive path, measured with callgrind (valgrind):
//! parse, ICRC check, QP/R_Key/bounds checks and the one copy into the region, for a 4 KiB
//! UC RDMA WRITE ONLY — the generic path every datagram the fast path cannot predict takes.
//!
//! Instructions are counted, not time, so the check is free of timing noise. This test runs
//! itself twice under `valgrind --tool=callgrind` with 1 000 and 3 000 packets; the
//! difference / 2 000 is the cost of one packet (start-up cancels out). It fails when that
//! exceeds the budget, and prints the figure. valgrind must be installed (`.ci/run` does).

#![allow(clippy::unwrap_used)]

use rocelink_transport::*;
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Instant;

const PAYLOAD: usize = 4096;
/// Budget per packet: 7 676 measured here (test profile, rustc 1.95, valgrind 3.19), with
/// room for compiler changes — but not for a second pass over the payload (~+1 000) plus
/// per-packet allocation or hashing creeping back in.
const BUDGET: u64 = 10_000;

fn packets(n: usize) {
    let a: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();
    let mut ep = Endpoint::new(EndpointConfig::new(b));
    let mr = ep.register_mr(
        vec![0u8; 1 << 20].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let qp = ep.create_qp(QpInit::new(QpType::Uc));
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
    let build = |psn: u32, va: u64| {
        let ib = IbRepr {
            bth: BthRepr {
                opcode: Opcode::UC_RDMA_WRITE_ONLY,
                dest_qp: qp,
                psn,
                ..Default::default()
            },
            reth: Some(RethRepr {
                va,
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
    };
    // 16 packets cycled over the region (built outside the measured loop's per-packet cost)
    let pkts: Vec<Vec<u8>> = (0..16).map(|i| build(i, i as u64 * 65_536)).collect();
    let now = Instant::now();
    for i in 0..n {
        ep.handle_datagram(
            now,
            Datagram {
                src: a,
                dst: b,
                ip_header: None,
                payload: &pkts[i % 16],
            },
        );
    }
    let s = ep.qp_stats(qp).unwrap();
    assert_eq!(ep.stats().icrc_errors, 0);
    assert!(s.rx_packets as usize == n, "{s:?}");
}

/// The child: does the work when asked to.
#[test]
fn callgrind_child() {
    if let Ok(n) = std::env::var("ROCELINK_CALLGRIND_PACKETS") {
        packets(n.parse().unwrap());
    }
}

fn instructions(n: usize) -> u64 {
    let exe = std::env::current_exe().unwrap();
    let dir = std::env::temp_dir().join(format!("rocelink-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("cg.{n}"));
    let st = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["--exact", "callgrind_child", "--test-threads=1", "--quiet"])
        .env("ROCELINK_CALLGRIND_PACKETS", n.to_string())
        .output()
        .expect("valgrind must be installed (apt-get install valgrind; .ci/run does)");
    assert!(
        st.status.success(),
        "callgrind run failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // "totals: <Ir>" (or "summary: <Ir>") sums the instructions of the whole run
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("callgrind output has a totals line")
}

#[test]
fn receive_path_instructions_per_packet_within_budget() {
    let a = instructions(1_000);
    let b = instructions(3_000);
    assert!(b > a, "more packets cost more instructions ({a} vs {b})");
    let per = (b - a) / 2_000;
    println!("receive path: {per} instructions per 4 KiB packet (callgrind)");
    // the payload alone is read by the ICRC and copied once: far more than a few hundred
    // instructions, or the work was not done at all
    assert!(
        per > PAYLOAD as u64 / 16,
        "{per}: the packets were not processed"
    );
    assert!(
        per <= BUDGET,
        "{per} instructions per packet, budget {BUDGET}"
    );
}
