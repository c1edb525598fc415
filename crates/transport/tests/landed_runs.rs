//! Runs of landed packets (`Endpoint::handle_landed_run`): a run takes its packets up to the
//! first that differs from what the one before predicts — lost, duplicated, reordered,
//! damaged, foreign, for another key, QP or P_Key, landed elsewhere, a flag changed — and
//! not one more; the rest goes packet by packet, as a landing receive does. Through it all
//! the landing twin stays identical to a twin fed the same packets as whole datagrams:
//! same counters, placements, events, completions, responses and bytes.
#![allow(clippy::unwrap_used)]

mod common;

use common::twins::*;
use rocelink_transport::sim::Rng;
use rocelink_transport::*;
use rocelink_wire::ib::IbPacket;
use std::net::SocketAddr;
use std::time::Instant;

/// The region's top, where runs do not go: a payload landed elsewhere lands there.
const SPARE: usize = REGION - 8192;

/// One packet of a run: the datagram, where the backend landed its payload, its sender.
type Pkt = (Vec<u8>, usize, SocketAddr);

/// The faults a run may carry, one per run, at a random place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Lost,
    Duplicated,
    Reordered,
    PayloadDamaged,
    IcrcDamaged,
    Foreign,
    OtherRkey,
    OtherPkey,
    OtherQp,
    LandedElsewhere,
    AckRequested,
    OtherLength,
}

const FAULTS: [Fault; 13] = [
    Fault::None,
    Fault::Lost,
    Fault::Duplicated,
    Fault::Reordered,
    Fault::PayloadDamaged,
    Fault::IcrcDamaged,
    Fault::Foreign,
    Fault::OtherRkey,
    Fault::OtherPkey,
    Fault::OtherQp,
    Fault::LandedElsewhere,
    Fault::AckRequested,
    Fault::OtherLength,
];

/// Plant `f` at packet `at` of `run`.
fn plant(run: &mut Vec<Pkt>, f: Fault, at: usize) {
    match f {
        Fault::Lost => {
            run.remove(at);
            return;
        }
        Fault::Duplicated => {
            let p = run[at].clone();
            run.insert(at + 1, p);
            return;
        }
        Fault::Reordered if at + 1 < run.len() => run.swap(at, at + 1),
        Fault::Foreign => run[at].2 = addr("10.0.0.9:4791"),
        // in the spare top of the region, where no other payload lands
        Fault::LandedElsewhere => run[at].1 = SPARE + 4,
        _ => {}
    }
    let d = &mut run[at].0;
    match f {
        Fault::PayloadDamaged => d[28 + 3] ^= 0x20,
        Fault::IcrcDamaged => *d.last_mut().unwrap() ^= 0x01,
        // well-formed packets (their ICRC recomputed) that say something else
        Fault::OtherRkey => d[20] ^= 0x40,
        Fault::OtherPkey => d[2] ^= 0x01,
        Fault::OtherQp => d[7] ^= 0x02,
        Fault::AckRequested => d[8] |= 0x80,
        Fault::OtherLength => {
            // a shorter DMA length than the payload: malformed
            let n = u32::from_be_bytes(d[24..28].try_into().unwrap()) - 4;
            d[24..28].copy_from_slice(&n.to_be_bytes());
        }
        _ => return,
    }
    if !matches!(f, Fault::PayloadDamaged | Fault::IcrcDamaged) {
        refill_icrc(d);
    }
}

/// How many packets the first run attempt must take when `f` sits at `at`: all of them
/// without a fault, else those before it (an acknowledgement request on the first packet
/// passes the lane, and the second packet then differs from it). Packets with pad bytes
/// (`len` not a multiple of 4) are never taken by a run.
fn expected_first_take(f: Fault, at: usize, n: usize, len: u64) -> usize {
    match f {
        _ if !len.is_multiple_of(4) => 0,
        Fault::None => n,
        Fault::Reordered if at + 1 >= n => n,
        Fault::Duplicated => at + 1,
        Fault::AckRequested if at == 0 => 1.min(n),
        _ => at,
    }
}

/// Packet `p` as a run's part (its payload landed at its offset).
fn part(p: &Pkt) -> LandedPart<'_> {
    let (d, dest, _) = p;
    let ib = IbPacket::new_checked(&d[..]).unwrap();
    let (h, n) = (ib.header_len(), ib.payload_len());
    LandedPart {
        headers: &d[..h],
        offset: *dest,
        len: n,
        tail: &d[h + n..],
    }
}

/// Packet `p`, its payload landed in region `lkey`.
fn landed(p: &Pkt, lkey: u32) -> Landed<'_> {
    let flow = LandedFlow {
        src: p.2,
        dst: addr("10.0.0.2:4791"),
        lkey,
    };
    flow.landed(part(p))
}

impl Twins {
    /// Land every payload of `run` (on both twins, so their regions stay alike), then give
    /// the copying twin each datagram and the landing twin the run as a landing receive
    /// does: by runs, a packet by itself where a run stops, and whole datagrams after a
    /// payload that had to be copied. Returns what each run attempt took.
    fn feed_run(&mut self, run: &[Pkt]) -> Vec<usize> {
        let dst = addr("10.0.0.2:4791");
        let split = |d: &[u8]| {
            let p = IbPacket::new_checked(d).unwrap();
            (p.header_len(), p.payload_len())
        };
        for (d, dest, _) in run {
            let (h, n) = split(d);
            for ep in [&mut self.copy, &mut self.land] {
                let zone = ep.landing_zone(self.dst.lkey).unwrap();
                if dest + n <= zone.len() {
                    zone[*dest..dest + n].copy_from_slice(&d[h..h + n]);
                }
            }
        }
        for (d, _, src) in run {
            let g = Datagram {
                src: *src,
                dst,
                ip_header: None,
                payload: d,
            };
            self.copy.handle_datagram(self.now, g);
        }
        let lkey = self.dst.lkey;
        let (mut takes, mut placed) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < run.len() {
            // one run: the packets from one sender, as one GRO message brings them
            let src = run[i].2;
            let flow = LandedFlow {
                src,
                dst: addr("10.0.0.2:4791"),
                lkey,
            };
            let parts = run[i..].iter().take_while(|p| p.2 == src).map(part);
            let k = self.land.handle_landed_run(flow, parts, &mut placed);
            takes.push(k);
            i += k;
            let Some(p) = run.get(i) else { break };
            let l = self.land.handle_landed(self.now, landed(p, lkey));
            placed.extend(l.placement());
            i += 1;
            if !matches!(l, Landing::InPlace(_) | Landing::Refused) {
                // copied: the later payloads go as whole datagrams
                for (d, _, src) in &run[i..] {
                    let g = Datagram {
                        src: *src,
                        dst,
                        ip_header: None,
                        payload: d,
                    };
                    self.land.handle_datagram(self.now, g);
                }
                break;
            }
        }
        let qpn = self.qb;
        self.returned.extend(placed.iter().map(|p| Event::Placed {
            qpn,
            psn: p.psn,
            rkey: p.rkey,
            va: p.va,
            len: p.len,
            crc: p.crc,
        }));
        takes
    }
}

#[test]
fn a_run_takes_its_packets_up_to_the_first_surprise_and_the_twins_agree() {
    let seeds: u64 = std::env::var("ROCELINK_LANE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut seen = [0usize; FAULTS.len()];
    let mut taken_by_runs = 0;
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let mut w = Twins::new(QpType::Uc);
        let mut va = 0u64;
        for round in 0..60 {
            let len = [1408u64, 4096, 64, 13][rng.below(4) as usize];
            // (a run fits below the spare top)
            let n = 1 + rng.below(16.min(SPARE as u64 / len)) as usize;
            if va + n as u64 * len > SPARE as u64 {
                va = 0;
            }
            // a WRITE by itself first: whatever the last run left, the QP is in step again
            let sync = w.write(SPARE as u64, 0, 64, None).remove(0);
            assert!(matches!(w.feed_mirrored(&sync, SPARE), Landing::InPlace(_)));
            let mut run: Vec<Pkt> = (0..n as u64)
                .map(|i| {
                    let at = va + i * len;
                    let d = w.write(at, 0, len as u32, None).remove(0);
                    (d, at as usize, addr("10.0.0.1:4791"))
                })
                .collect();
            va += n as u64 * len;
            let fi = rng.below(FAULTS.len() as u64) as usize;
            let (f, at) = (FAULTS[fi], rng.below(n as u64) as usize);
            plant(&mut run, f, at);
            seen[fi] += 1;
            let takes = w.feed_run(&run);
            let want = expected_first_take(f, at, n, len);
            assert_eq!(
                takes.first().copied().unwrap_or(0),
                want,
                "seed {seed} round {round}: {f:?} at {at} of {n}: takes {takes:?}"
            );
            taken_by_runs += takes.iter().sum::<usize>();
            w.assert_same(0..REGION);
        }
    }
    assert!(seen.iter().all(|&k| k > 0), "every fault planted: {seen:?}");
    assert!(taken_by_runs > 1000, "{taken_by_runs} taken by runs");
}

#[test]
fn a_run_is_taken_whole_and_its_placements_name_every_packet() {
    let mut w = Twins::new(QpType::Uc);
    let run: Vec<Pkt> = (0..16u64)
        .map(|i| {
            let d = w.write(i * 1408, 0, 1408, None).remove(0);
            (d, (i * 1408) as usize, addr("10.0.0.1:4791"))
        })
        .collect();
    assert_eq!(w.feed_run(&run), vec![16]);
    let vas: Vec<u64> = w
        .returned
        .iter()
        .map(|e| match e {
            Event::Placed { va, len: 1408, .. } => *va,
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(vas, (0..16).map(|i| i * 1408).collect::<Vec<_>>());
    w.assert_same(0..REGION);
    assert_eq!(w.land.qp_stats(w.qb).unwrap().rx_packets, 16);
    assert_eq!(w.land.stats().rx_datagrams, 16);
}

#[test]
fn a_run_stops_at_a_held_page_and_goes_on_after_it() {
    let mut w = Twins::new(QpType::Uc);
    let holds = std::sync::Arc::new(Holds::new(4096, REGION / 4096).unwrap());
    for b in [&mut w.copy, &mut w.land] {
        b.set_holds(w.dst.lkey, holds.clone()).unwrap();
    }
    assert!(holds.hold(3)); // bytes 12 288..16 384: packets 12 to 15 of 1 KiB
    let run: Vec<Pkt> = (0..24u64)
        .map(|i| {
            let d = w.write(i * 1024, 0, 1024, None).remove(0);
            (d, (i * 1024) as usize, addr("10.0.0.1:4791"))
        })
        .collect();
    let takes = w.feed_run(&run);
    // the run stops at the held page; each packet into it is refused by itself (the lane
    // refuses it too), the first after it is taken by itself too (its PSN follows a
    // refused one, so it is no longer the one expected), and a run goes on after that
    assert_eq!(takes, vec![12, 0, 0, 0, 0, 7], "{takes:?}");
    w.assert_same(0..REGION);
    let c = w.land.qp_stats(w.qb).unwrap();
    assert_eq!((c.held_refusals, c.rx_packets), (4, 24), "{c:?}");
}

#[test]
fn a_run_into_a_ring_stops_at_the_end_of_its_window() {
    const RING: usize = 64 * 1024;
    const START: u64 = 0x1_0000_0000;
    const WINDOW: u64 = 8 * 1024;
    let (aa, ba) = (addr("10.0.0.1:4791"), addr("10.0.0.2:4791"));
    // a sender each (the same connection twice), the two receivers alike: a ring whose
    // window is the first 8 KiB from START
    let mut ends = Vec::new();
    for _ in 0..2 {
        let mut a = Endpoint::new(EndpointConfig::new(aa));
        let data: Vec<u8> = (0..16 * 1024).map(|i| (i * 7) as u8).collect();
        let src = a.register_mr(data.into_boxed_slice(), 0, Access::NONE);
        let qa = a.create_qp(QpInit::new(QpType::Uc)).unwrap();
        let mut b = Endpoint::new(EndpointConfig::new(ba));
        let access = Access::REMOTE_WRITE | Access::LOCAL_WRITE;
        let ring = b
            .register_ring_mr(vec![0u8; RING], access, START, WINDOW)
            .unwrap();
        let init = QpInit {
            report_writes: true,
            ..QpInit::new(QpType::Uc)
        };
        let qb = b.create_qp(init).unwrap();
        rocelink_transport::sim::connect(&mut a, qa, &mut b, qb, Mtu::M4096, 7, 7, 0).unwrap();
        ends.push((a, src, qa, b, ring, qb));
    }
    let (mut a, src, qa, mut land, ring, qb) = ends.pop().unwrap();
    let (_, _, _, mut copy, _, _) = ends.pop().unwrap();
    // twelve writes of 1 KiB from START: the last four past the window
    let now = Instant::now();
    let mut run: Vec<Pkt> = Vec::new();
    let mut buf = Vec::new();
    for i in 0..12u64 {
        let wr = SendWr::new(
            i,
            SendOp::Write {
                va: START + i * 1024,
                rkey: ring.rkey,
            },
            Sge {
                lkey: src.lkey,
                va: i * 1024,
                len: 1024,
            },
        );
        a.post_send(qa, wr).unwrap();
        let t = a.poll_transmit(now, &mut buf).unwrap();
        run.push((buf[..t.len].to_vec(), (i * 1024) as usize, aa));
    }
    for (d, dest, _) in &run {
        let (h, n) = (28, 1024);
        for ep in [&mut copy, &mut land] {
            ep.landing_zone(ring.lkey).unwrap()[*dest..dest + n].copy_from_slice(&d[h..h + n]);
        }
        let g = Datagram {
            src: aa,
            dst: ba,
            ip_header: None,
            payload: d,
        };
        copy.handle_datagram(now, g);
    }
    let flow = LandedFlow {
        src: aa,
        dst: ba,
        lkey: ring.lkey,
    };
    let mut placed = Vec::new();
    let taken = land.handle_landed_run(flow, run.iter().map(part), &mut placed);
    assert_eq!(taken, 8, "the window's 8 KiB");
    for p in &run[taken..] {
        let l = land.handle_landed(now, flow.landed(part(p)));
        assert_eq!(l, Landing::Refused, "past the window");
    }
    assert_eq!(copy.stats(), land.stats());
    assert_eq!(copy.qp_stats(qb), land.qp_stats(qb));
    let copied: Vec<u64> = std::iter::from_fn(|| copy.poll_event())
        .filter_map(|e| match e {
            Event::Placed { va, .. } => Some(va),
            _ => None,
        })
        .collect();
    assert_eq!(copied, placed.iter().map(|p| p.va).collect::<Vec<_>>());
    let (c, l) = (
        copy.mr(ring.lkey).unwrap().bytes(),
        land.mr(ring.lkey).unwrap().bytes(),
    );
    assert!(c == l, "the rings differ");
}
