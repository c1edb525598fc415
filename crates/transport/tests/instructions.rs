//! Instruction count of the per-packet receive path, measured with callgrind (valgrind):
//! parse, ICRC check, QP/R_Key/bounds checks and the one copy into the region, for a 4 KiB
//! UC RDMA WRITE ONLY — the generic path every datagram the fast path cannot predict takes.
//! Also WRITEs landed in place in runs (the HSB fast path), a UD SEND landed in its posted
//! receive (the ultrasound host's) and, on the send side, a UD SEND built from a region
//! (the probe's).
//!
//! Instructions are counted, not time, so the check is free of timing noise. This test runs
//! itself twice under `valgrind --tool=callgrind` with 1 000 and 3 000 packets, counting
//! only the handling (the `measured_*` functions, not the packets' making); the difference
//! / 2 000 is the cost of one packet (start-up cancels out). It fails when that exceeds the
//! budget of the profile it was built in, and prints the figure. valgrind must be installed
//! (`.ci/run` does, and runs it in the release profile too).

#![allow(clippy::unwrap_used)]

// the kit's callgrind runner (std only), by path: the kit depends on this crate
#[path = "../../testkit/src/callgrind.rs"]
#[allow(unreachable_pub)]
mod callgrind;
mod common;

use rocelink_transport::*;
use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
use std::net::SocketAddr;
use std::time::Instant;

const PAYLOAD: usize = 4096;

/// Instructions per packet besides the ICRC's CRC-32 (measured alone the same way and
/// subtracted, so the check does not depend on which CRC code the CPU under valgrind gets),
/// in the release profile they are set for (`.ci/run` runs them) and in the test profile
/// (`cargo test`). Each leaves room for compiler changes, not for a second pass over the
/// payload or for lookups and allocations per packet creeping back in. Measured (rustc
/// 1.95, valgrind 3.19), release / test profile:
/// - a 4 KiB UC WRITE ONLY as a whole datagram, the general path (16 cycled, so every 16th
///   shows a PSN gap): 1 654 / 2 141;
/// - the same landed in place, in runs of 16 ([`Endpoint::handle_landed_run`]): 219 / 410
///   (779 release, one by one, before runs);
/// - a 4 KiB UD SEND landed in its posted receive (the UD lane), the receive posted again
///   and its completion polled: 918 / 1 454 (2 113 / 3 487 through the general path);
/// - a 4 KiB UD SEND sent from a region by the UD send lane (headers kept per destination,
///   PSN and immediate patched, the ICRC continued from the fixed bytes), the payload
///   gathered, posted 16 at a time, completions polled: 779 / 1 259 (1 833 / 3 132 through
///   the general path, posted one at a time). The region offset checked at posting is
///   used at sending while the region table has not changed since.
///
/// QPs and regions are found through a slab that tries the entry found last first (a
/// stream looks up the same one packet after packet).
const BUDGET: u64 = if cfg!(debug_assertions) { 2_800 } else { 2_000 };
const LANDED_BUDGET: u64 = if cfg!(debug_assertions) { 600 } else { 350 };
const UD_BUDGET: u64 = if cfg!(debug_assertions) { 2_000 } else { 1_000 };
const SEND_BUDGET: u64 = if cfg!(debug_assertions) { 1_400 } else { 800 };

/// An endpoint at `b` with a 1 MiB region and a UC QP ready to receive from `a` (4 KiB
/// MTU, PSNs from 0), reporting writes if `landed`: (endpoint, region keys, CQ, QPN).
fn uc_end(a: SocketAddr, b: SocketAddr, landed: bool) -> (Endpoint, MrKeys, CqId, u32) {
    let mut ep = Endpoint::new(EndpointConfig::new(b));
    let mr = ep.register_mr(
        vec![0u8; 1 << 20].into_boxed_slice(),
        0,
        Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    );
    let cq = ep.create_cq();
    let init = QpInit {
        send_cq: cq,
        recv_cq: cq,
        report_writes: landed,
        ..QpInit::new(QpType::Uc)
    };
    let qp = ep.create_qp(init).unwrap();
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
    (ep, mr, cq, qp)
}

/// A UC RDMA WRITE ONLY of the test payload from `a` to `b`, QP `qp`, region `rkey`.
fn write_only(a: SocketAddr, b: SocketAddr, qp: u32, rkey: u32, psn: u32, va: u64) -> Vec<u8> {
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| i as u8).collect();
    let ib = IbRepr {
        bth: BthRepr {
            opcode: Opcode::UC_RDMA_WRITE_ONLY,
            dest_qp: qp,
            psn,
            ..Default::default()
        },
        reth: Some(RethRepr {
            va,
            rkey,
            dma_len: PAYLOAD as u32,
        }),
        payload_len: PAYLOAD,
        ..Default::default()
    };
    let mut buf = vec![0u8; ib.buffer_len()];
    ib.emit(&mut buf, &payload);
    rocelink_wire::icrc::fill_socket(a, b, &mut buf).unwrap();
    buf
}

/// Packets in runs of this many (a GRO message's worth).
const RUN: usize = 16;

/// `n` UC WRITE ONLY packets, whole datagrams (16 cycled over the region, so that every
/// 16th shows a PSN gap): the general path.
fn packets(n: usize) {
    let (a, b) = (addr(1), addr(2));
    let (mut ep, mr, _, qp) = uc_end(a, b, false);
    let pkts: Vec<Vec<u8>> = (0..16)
        .map(|i| write_only(a, b, qp, mr.rkey, i, u64::from(i) * 65_536))
        .collect();
    measured_datagrams(&mut ep, (a, b), &pkts, n);
    let s = ep.qp_stats(qp).unwrap();
    assert_eq!(ep.stats().icrc_errors, 0);
    assert!(s.rx_packets as usize == n, "{s:?}");
}

#[inline(never)]
fn measured_datagrams(
    ep: &mut Endpoint,
    (a, b): (SocketAddr, SocketAddr),
    pkts: &[Vec<u8>],
    n: usize,
) {
    let now = Instant::now();
    for i in 0..n {
        let d = Datagram {
            src: a,
            dst: b,
            ip_header: None,
            payload: &pkts[i % pkts.len()],
        };
        ep.handle_datagram(now, d);
    }
}

/// `n` UC WRITE ONLY packets in PSN order at consecutive VAs (cycling over the region),
/// their payloads already where their RETH points (as the HSB fast path's scatter receive
/// puts them), handed over in runs of [`RUN`] with [`Endpoint::handle_landed_run`].
fn landed_packets(n: usize) {
    let (a, b) = (addr(1), addr(2));
    let (mut ep, mr, _, qp) = uc_end(a, b, true);
    let slots = (1 << 20) / PAYLOAD;
    let pkts: Vec<Vec<u8>> = (0..n)
        .map(|i| write_only(a, b, qp, mr.rkey, i as u32, ((i % slots) * PAYLOAD) as u64))
        .collect();
    let h = pkts[0].len() - PAYLOAD - 4;
    for (i, p) in pkts.iter().take(slots).enumerate() {
        let at = i * PAYLOAD;
        ep.landing_zone(mr.lkey).unwrap()[at..at + PAYLOAD].copy_from_slice(&p[h..h + PAYLOAD]);
    }
    let placed = measured_landed(&mut ep, (a, b), mr.lkey, &pkts);
    assert_eq!(placed, n);
    // nothing queued: the placements came back with the calls
    assert!(ep.poll_qp_event(qp).is_none());
    assert_eq!(ep.stats().icrc_errors, 0);
    assert_eq!(ep.qp_stats(qp).unwrap().rx_packets as usize, n);
}

/// Hand `pkts` over in runs; how many were placed whole.
#[inline(never)]
fn measured_landed(
    ep: &mut Endpoint,
    ab: (SocketAddr, SocketAddr),
    lkey: u32,
    pkts: &[Vec<u8>],
) -> usize {
    let slots = (1 << 20) / PAYLOAD;
    let h = pkts[0].len() - PAYLOAD - 4;
    let mut out = Vec::with_capacity(RUN);
    let mut placed = 0;
    for (r, run) in pkts.chunks(RUN).enumerate() {
        let flow = LandedFlow {
            src: ab.0,
            dst: ab.1,
            lkey,
        };
        let parts = run.iter().enumerate().map(|(k, p)| LandedPart {
            headers: &p[..h],
            offset: ((r * RUN + k) % slots) * PAYLOAD,
            len: PAYLOAD,
            tail: &p[h + PAYLOAD..],
        });
        out.clear();
        let taken = ep.handle_landed_run(flow, parts, &mut out);
        assert_eq!(taken, run.len());
        placed += out.iter().filter(|p| p.len as usize == PAYLOAD).count();
    }
    placed
}

/// Address `10.0.0.<i>`, port 4791.
fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, i], 4791))
}

/// Packet `p` (its headers `h` bytes long) from `a` to `b`, its payload landed at `offset`
/// of region `lkey`.
fn landed_at(
    p: &[u8],
    h: usize,
    (a, b): (SocketAddr, SocketAddr),
    lkey: u32,
    offset: usize,
) -> Landed<'_> {
    Landed {
        src: a,
        dst: b,
        headers: &p[..h],
        lkey,
        offset,
        len: PAYLOAD,
        tail: &p[h + PAYLOAD..],
    }
}

/// Bytes between the UD receives' buffers.
const STRIDE: usize = 8192;

/// The Q_Key of the UD cases.
const QKEY: u32 = 0x1234;

/// [`common::ud_end`] with the Q_Key of these cases, its region's local key.
fn ud_end(addr: SocketAddr, mem: Vec<u8>, access: Access) -> (Endpoint, u32, CqId, u32) {
    let (ep, mr, cq, qp) = common::ud_end(addr, mem, access, QKEY);
    (ep, mr.lkey, cq, qp)
}

/// A UD SEND of the `PAYLOAD` bytes at `va` of region `lkey` to QP `qpn` at `to`, with
/// immediate `imm`.
fn ud_send(imm: u32, to: SocketAddr, qpn: u32, lkey: u32, va: u64, signaled: bool) -> SendWr {
    SendWr {
        wr_id: u64::from(imm),
        op: SendOp::UdSend {
            dest: UdDest {
                addr: to,
                qpn,
                qkey: QKEY,
            },
            imm: Some(imm),
        },
        sg_list: Sge {
            lkey,
            va,
            len: PAYLOAD as u32,
        }
        .into(),
        signaled,
        solicited: false,
        marks: 0,
    }
}

/// UD SENDs with immediate, each landed in place in a posted receive (a discarded GRH slot,
/// then its place in the region), the receive posted again and its completion polled.
fn ud_packets(n: usize) {
    let a: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();
    // the sender: one UD QP sending the same payload with a new immediate each time
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 3) as u8).collect();
    let (mut tx, src, _, tqp) = ud_end(a, payload, Access::NONE);
    // the receiver
    let (mut ep, lkey, cq, qp) = ud_end(b, vec![0u8; 16 * STRIDE], Access::LOCAL_WRITE);
    let now = Instant::now();
    let mut buf = Vec::new();
    let pkts: Vec<Vec<u8>> = (0..16u32)
        .map(|i| {
            tx.post_send(tqp, ud_send(i, b, qp, src, 0, false)).unwrap();
            let t = tx.poll_transmit(now, &mut buf).unwrap();
            buf[..t.len].to_vec()
        })
        .collect();
    let h = pkts[0].len() - PAYLOAD - 4;
    let post = |ep: &mut Endpoint, k: usize| {
        let sges = [
            Sge::discard(40),
            Sge {
                lkey,
                va: (k * STRIDE) as u64,
                len: PAYLOAD as u32,
            },
        ];
        ep.post_recv(qp, RecvWr::scatter(k as u64, &sges).unwrap())
            .unwrap();
    };
    for (k, p) in pkts.iter().enumerate() {
        let at = k * STRIDE;
        ep.landing_zone(lkey).unwrap()[at..at + PAYLOAD].copy_from_slice(&p[h..h + PAYLOAD]);
        post(&mut ep, k);
    }
    let done = measured_ud(&mut ep, (a, b), (lkey, cq), &pkts, n, &post);
    assert_eq!(done, n);
    assert_eq!(ep.stats().icrc_errors, 0);
}

/// Hand `n` of `pkts` (cycled) over, each landed in its receive, posted again; how many
/// completed whole.
#[inline(never)]
fn measured_ud(
    ep: &mut Endpoint,
    ab: (SocketAddr, SocketAddr),
    (lkey, cq): (u32, CqId),
    pkts: &[Vec<u8>],
    n: usize,
    post: &dyn Fn(&mut Endpoint, usize),
) -> usize {
    let now = Instant::now();
    let h = pkts[0].len() - PAYLOAD - 4;
    let mut done = 0;
    for i in 0..n {
        let k = i % 16;
        let l = ep.handle_landed(now, landed_at(&pkts[k], h, ab, lkey, k * STRIDE));
        assert_eq!(l, Landing::Received { in_place: true });
        while let Some(wc) = ep.poll_cq(cq) {
            assert_eq!(
                (wc.status, wc.byte_len),
                (WcStatus::Success, 40 + PAYLOAD as u32)
            );
            done += 1;
        }
        post(ep, k);
    }
    done
}

/// UD SENDs with immediate of 4 KiB from a region, as the ultrasound probe sends them:
/// posted 16 at a time (the last signaled; the probe posts until its send slots are
/// taken, then its driver flushes), built by `poll_transmit_gather` (headers and ICRC; the
/// payload stays in the region), completions polled.
fn ud_sends(n: usize) {
    let a: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:4791".parse().unwrap();
    let payload: Vec<u8> = (0..16 * PAYLOAD).map(|i| (i * 3) as u8).collect();
    let (mut tx, src, cq, qp) = ud_end(a, payload, Access::NONE);
    let (sent, done) = measured_sends(&mut tx, (qp, cq), b, src, n);
    assert_eq!((sent, done), (n, n.div_ceil(16)));
}

/// Post and build `n` sends to `b` from region `src`; (datagrams built, completions).
#[inline(never)]
fn measured_sends(
    tx: &mut Endpoint,
    (qp, cq): (u32, CqId),
    b: SocketAddr,
    src: u32,
    n: usize,
) -> (usize, usize) {
    let now = Instant::now();
    let mut buf = Vec::new();
    let (mut sent, mut done) = (0, 0);
    for i in 0..n {
        let signaled = i % 16 == 15 || i + 1 == n;
        let va = ((i % 16) * PAYLOAD) as u64;
        let wr = ud_send(i as u32, b, 0x11, src, va, signaled);
        tx.post_send(qp, wr).unwrap();
        if !signaled {
            continue;
        }
        while let Some(t) = tx.poll_transmit_gather(now, &mut buf) {
            assert!(t.gather.is_some());
            sent += 1;
        }
        while tx.poll_cq(cq).is_some() {
            done += 1;
        }
    }
    (sent, done)
}

/// The CRC-32 alone over the bytes an ICRC of one such packet covers.
#[inline(never)]
fn measured_crc(n: usize) {
    let bytes: Vec<u8> = (0..8 + 20 + 8 + 12 + 16 + PAYLOAD)
        .map(|i| i as u8)
        .collect();
    let mut acc = 0u32;
    for _ in 0..n {
        acc ^= crc32fast::hash(std::hint::black_box(&bytes));
    }
    std::hint::black_box(acc);
}

/// The child: does the work when asked to.
#[test]
fn callgrind_child() {
    if let Ok(n) = std::env::var("ROCELINK_CALLGRIND_PACKETS") {
        let n = n.parse().unwrap();
        match std::env::var("ROCELINK_CALLGRIND_MODE").as_deref() {
            Ok("crc") => measured_crc(n),
            Ok("landed") => landed_packets(n),
            Ok("ud") => ud_packets(n),
            Ok("send") => ud_sends(n),
            _ => packets(n),
        }
    }
}

/// What a run measures.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Datagram,
    Landed,
    Ud,
    Send,
    Crc,
}

fn instructions(n: usize, mode: Mode) -> u64 {
    let mode = match mode {
        Mode::Datagram => "datagram",
        Mode::Landed => "landed",
        Mode::Ud => "ud",
        Mode::Send => "send",
        Mode::Crc => "crc",
    };
    let env = [
        ("ROCELINK_CALLGRIND_PACKETS", n.to_string()),
        ("ROCELINK_CALLGRIND_MODE", mode.to_string()),
    ];
    // only the handling (or the CRC) is counted: not the packets' making
    callgrind::instructions("callgrind_child", &env, Some("*measured_*"))
}

fn per_packet(mode: Mode) -> u64 {
    let a = instructions(1_000, mode);
    let b = instructions(3_000, mode);
    assert!(b > a, "more packets cost more instructions ({a} vs {b})");
    (b - a) / 2_000
}

/// Fail unless `what` took at most `budget` instructions per packet besides the CRC.
fn within(what: &str, rest: u64, budget: u64) {
    assert!(
        rest <= budget,
        "{what}: {rest} instructions per packet besides the CRC, budget {budget}"
    );
}

#[test]
fn receive_path_instructions_per_packet_within_budget() {
    if !callgrind::available() {
        return;
    }
    let per = per_packet(Mode::Datagram);
    let crc = per_packet(Mode::Crc);
    let landed = per_packet(Mode::Landed);
    let ud = per_packet(Mode::Ud);
    let send = per_packet(Mode::Send);
    println!(
        "receive path: {per} instructions per 4 KiB packet (callgrind), of which the CRC-32 \
         of the ICRC {crc}, the rest {}",
        per.saturating_sub(crc)
    );
    println!(
        "landed (in place, event and completion drained): {landed} per packet, the rest {}",
        landed.saturating_sub(crc)
    );
    println!(
        "UD SEND landed in its receive (posted again, completion drained): {ud} per packet, \
         the rest {}",
        ud.saturating_sub(crc)
    );
    println!(
        "UD SEND sent from a region (gathered, completion polled): {send} per packet, the rest {}",
        send.saturating_sub(crc)
    );
    // the payload is read by the ICRC and copied once: more than the CRC alone, or the work
    // was not done at all
    assert!(
        per > crc + PAYLOAD as u64 / 64,
        "{per}: the packets were not processed"
    );
    within("the general path", per - crc, BUDGET);
    // in place: the ICRC reads the payload where it landed; nothing copies it
    assert!(
        landed > crc,
        "{landed}: the landed packets were not checked"
    );
    within("landed", landed - crc, LANDED_BUDGET);
    assert!(ud > crc, "{ud}: the UD packets were not checked");
    within("UD landed", ud - crc, UD_BUDGET);
    // the ICRC covers the payload: the send read it
    assert!(send > crc, "{send}: the sends were not built");
    within("UD send", send - crc, SEND_BUDGET);
}
