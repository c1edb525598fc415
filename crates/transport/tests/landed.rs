//! In-place placement: RDMA WRITEs whose payload a backend already put into a region
//! (`Endpoint::handle_landed`) are verified and accounted exactly as whole datagrams
//! (`handle_datagram`) — checked here against a twin endpoint fed the same datagrams — and
//! every kind of bad packet is refused, counted, and never reported as placed.
#![allow(clippy::unwrap_used)]

mod common;

use common::twins::*;

use rocelink_transport::*;
use rocelink_wire::ib::{IbPacket, Opcode};
use std::time::Instant;

#[test]
fn landed_writes_are_accounted_exactly_like_datagrams() {
    for t in [QpType::Uc, QpType::Rc] {
        let mut w = Twins::new(t);
        // WRITE ONLY, a three-packet WRITE with immediate (PSNs wrap past 2^24 on the
        // receivers' side), a zero-length WRITE with immediate, a small unaligned one
        let msgs: [(u64, u64, u32, Option<u32>); 4] = [
            (0, 0, 4096, None),
            (8192, 100, 3 * 4096 - 5, Some(7)),
            (0, 0, 0, Some(9)),
            (30_001, 3, 13, None),
        ];
        for (va, from, len, imm) in msgs {
            for (k, d) in w.write(va, from, len, imm).iter().enumerate() {
                let dest = va as usize + k * MTU;
                let l = w.feed(d, dest);
                assert!(matches!(l, Landing::InPlace(_)), "{t:?} {va} #{k}: {l:?}");
            }
            w.assert_same(0..REGION);
        }
        let c = w.land.qp_stats(w.qb).unwrap();
        assert_eq!(c.rx_packets, 6);
        assert_eq!(c.psn_gaps + c.drops + c.access_violations, 0);
        // the source bytes arrived
        let got = &w.land.mr(w.dst.lkey).unwrap().bytes()[8192..8192 + 3 * 4096 - 5];
        let want = &w.a.mr(w.src.lkey).unwrap().bytes()[100..100 + 3 * 4096 - 5];
        assert!(got == want, "{t:?}: the source bytes did not arrive");
        let _ = w.recv;
    }
}

#[test]
fn bad_landed_packets_are_refused_counted_and_never_reported() {
    let mut w = Twins::new(QpType::Uc);
    let good = w.write(0, 0, 4096, None).remove(0);
    let base = w.land.stats();
    let qbase = w.land.qp_stats(w.qb).unwrap();
    // wrong R_Key (ICRC recomputed: a well-formed packet for a region we do not have)
    let mut d = good.clone();
    d[20..24].copy_from_slice(&0x0BAD_0000u32.to_be_bytes());
    refill_icrc(&mut d);
    assert_eq!(land(&mut w.land, &d, w.dst.lkey, 0), Landing::Refused);
    assert_eq!(w.land.qp_stats(w.qb).unwrap().access_violations, 1);
    // an address past the region
    let mut d = good.clone();
    d[12..20].copy_from_slice(&(REGION as u64 - 100).to_be_bytes());
    refill_icrc(&mut d);
    assert_eq!(land(&mut w.land, &d, w.dst.lkey, 0), Landing::Refused);
    assert_eq!(w.land.qp_stats(w.qb).unwrap().access_violations, 2);
    // another QP
    let mut d = good.clone();
    d[5..8].copy_from_slice(&[0, 0x77, 0x77]);
    refill_icrc(&mut d);
    assert_eq!(land(&mut w.land, &d, w.dst.lkey, 0), Landing::Refused);
    assert_eq!(w.land.stats().unknown_qp, base.unknown_qp + 1);
    // a payload changed after the ICRC was computed
    let mut d = good.clone();
    d[28 + 2000] ^= 0x10;
    assert_eq!(land(&mut w.land, &d, w.dst.lkey, 0), Landing::Refused);
    assert_eq!(w.land.stats().icrc_errors, base.icrc_errors + 1);
    // the good one, then the same PSN again on RC: a duplicate, not executed
    let ok = land(&mut w.land, &good, w.dst.lkey, 0);
    let p = ok.placement().copied().unwrap();
    assert_eq!((p.va, p.len, p.rkey), (0, 4096, w.dst.rkey));
    assert_eq!(p.crc, crc32fast::hash(&good[28..28 + 4096]));
    let mut r = Twins::new(QpType::Rc);
    let d = r.write(0, 0, 4096, None).remove(0);
    assert!(matches!(
        land(&mut r.land, &d, r.dst.lkey, 0),
        Landing::InPlace(Some(_))
    ));
    assert_eq!(land(&mut r.land, &d, r.dst.lkey, 0), Landing::Refused);
    assert_eq!(r.land.qp_stats(r.qb).unwrap().duplicates, 1);
    // UC: a MIDDLE packet after a gap (its FIRST lost) is dropped
    let pk = w.write(0, 0, 3 * 4096, None);
    assert_eq!(
        land(&mut w.land, &pk[1], w.dst.lkey, 4096),
        Landing::Refused
    );
    let q = w.land.qp_stats(w.qb).unwrap();
    assert_eq!(q.drops, qbase.drops + 3, "R_Key, bounds and the MIDDLE");
    // no refused packet was reported placed (the good one's placement came back above)
    while let Some(e) = w.land.poll_event() {
        assert!(!matches!(e, Event::Placed { .. }), "{e:?}");
    }
}

#[test]
fn landed_payloads_are_never_read_outside_their_region() {
    let mut w = Twins::new(QpType::Uc);
    let d = w.write(0, 0, 4096, None).remove(0);
    let p = IbPacket::new_checked(&d[..]).unwrap();
    let (h, n) = (p.header_len(), p.payload_len());
    let before = w.land.stats().malformed;
    let mk = |offset: usize, len: usize, lkey: u32, hl: usize| Landed {
        src: addr("10.0.0.1:4791"),
        dst: addr("10.0.0.2:4791"),
        headers: &d[..hl],
        lkey,
        offset,
        len,
        tail: &d[h + n..],
    };
    let now = Instant::now();
    for l in [
        mk(REGION - 100, n, w.dst.lkey, h),    // past the region's end
        mk(usize::MAX - 10, n, w.dst.lkey, h), // offset + len overflows
        mk(0, n, 0x00DE_AD00, h),              // no such region
        mk(0, n, w.dst.lkey, h - 4),           // headers cut short
        mk(0, n, w.dst.lkey, 12),              // a BTH alone
    ] {
        assert_eq!(w.land.handle_landed(now, l), Landing::Refused);
    }
    assert_eq!(w.land.stats().malformed, before + 5);
    // neither a WRITE nor a SEND: the WRITE's headers relabelled as a READ request (BTH and
    // RETH too)
    let mut read = d[..h].to_vec();
    read[0] = Opcode::RC_RDMA_READ_REQUEST.0;
    let l = Landed {
        headers: &read,
        ..mk(0, n, w.dst.lkey, h)
    };
    assert_eq!(w.land.handle_landed(now, l), Landing::Refused);
    assert_eq!(w.land.stats().malformed, before + 6);
    assert!(w.land.poll_completion().is_none());
}

#[test]
fn a_payload_landed_elsewhere_is_copied_to_its_place() {
    let mut w = Twins::new(QpType::Uc);
    let pk = w.write(4096, 0, 4096, Some(1));
    // landed 100 bytes early in the same region, then in another region
    assert!(matches!(w.feed(&pk[0], 4096 - 100), Landing::Copied(_)));
    w.assert_same(4096..REGION);
    let pk = w.write(12_288, 50, 2000, None);
    let c = land(&mut w.land, &pk[0], w.recv.lkey, 512);
    assert!(matches!(c, Landing::Copied(p) if (p.va, p.len) == (12_288, 2000)));
    let got = &w.land.mr(w.dst.lkey).unwrap().bytes()[12_288..12_288 + 2000];
    assert!(got == &w.a.mr(w.src.lkey).unwrap().bytes()[50..2050]);
}

#[test]
fn moving_landed_bytes_stays_inside_the_region() {
    let mut w = Twins::new(QpType::Uc);
    let lkey = w.dst.lkey;
    w.land.landing_zone(lkey).unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
    w.land.move_landed(lkey, 0, 10, 4).unwrap();
    assert_eq!(&w.land.mr(lkey).unwrap().bytes()[10..14], &[1, 2, 3, 4]);
    assert!(w.land.move_landed(lkey, 0, REGION - 3, 4).is_err());
    assert!(w.land.move_landed(lkey, REGION - 3, 0, 4).is_err());
    assert!(w.land.move_landed(lkey, usize::MAX, 0, 4).is_err());
    // a region without local write access lends nothing
    let ro = w.land.register_mr(vec![0u8; 64], 0, Access::REMOTE_READ);
    assert_eq!(
        w.land.landing_zone(ro.lkey).unwrap_err(),
        AccessError::Denied
    );
}

/// The common case of a landed payload — a UC WRITE ONLY without immediate, in order —
/// takes a lane of its own in the endpoint; anything else, or anything off, falls back to
/// the general path. Over seeded random streams of good packets mixed with every way one
/// can be off (lost, replayed, wrong R_Key or P_Key or QP, past the region, a damaged
/// payload, pad bytes, landed elsewhere, a WRITE with immediate, a message left open), the
/// landing twin stays identical to the copying twin after every packet.
#[test]
fn the_landed_lane_and_the_general_path_agree_on_random_streams() {
    use rocelink_transport::sim::Rng;
    let seeds: u64 = std::env::var("ROCELINK_LANE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let mut w = Twins::new(QpType::Uc);
        let mut sent: Vec<Vec<u8>> = Vec::new();
        let (mut in_place, mut refused) = (0, 0);
        for step in 0..300 {
            let len = [4096, 1408, 64, 4, 13][rng.below(5) as usize];
            let va = rng.below((REGION - 4096) as u64) & !3;
            let kind = rng.below(14);
            let imm = (kind == 9).then_some(step as u32);
            let mut pk = if kind == 10 {
                // a two-packet message whose LAST never comes (or comes later, as a replay)
                w.write(0, 0, 4096 + 8, None)
            } else {
                w.write(va, 0, len, imm)
            };
            let mut d = pk.remove(0);
            let mut dest = va as usize;
            match kind {
                0 => continue, // lost: the next one shows a PSN gap
                1 if !sent.is_empty() => {
                    d = sent[rng.below(sent.len() as u64) as usize].clone(); // replayed
                    // where it says, if that is inside the zone (a backend lands nothing
                    // outside it)
                    let at = u64::from_be_bytes(d[12..20].try_into().unwrap()) as usize;
                    dest = if at + d.len() <= REGION { at } else { 0 };
                }
                2 => d[20] ^= 0x40, // another R_Key
                3 => d[2] ^= 0x01,  // another P_Key
                4 => d[7] ^= 0x02,  // another QP
                5 => d[12..20].copy_from_slice(&(REGION as u64 - 2).to_be_bytes()), // past it
                6 => dest = (dest + 4) % (REGION - 4096), // landed elsewhere: copied
                7 => d[1] |= 0x01,  // transport version 1
                _ => {}
            }
            if matches!(kind, 2..=5 | 7) {
                refill_icrc(&mut d);
            }
            if kind == 8 && d.len() > 40 {
                d[30] ^= 0x01; // the payload damaged after the ICRC
            }
            match w.feed_mirrored(&d, dest) {
                Landing::InPlace(_) => in_place += 1,
                Landing::Refused => refused += 1,
                _ => {}
            }
            w.assert_same(0..REGION);
            sent.push(d);
            if kind == 10 && rng.chance(0.5) {
                let last = pk.remove(0);
                let _ = w.feed_mirrored(&last, 4096);
                w.assert_same(0..REGION);
            }
        }
        assert!(in_place > 50, "seed {seed}: {in_place} in place");
        assert!(refused > 10, "seed {seed}: {refused} refused");
    }
}

#[test]
fn a_held_page_is_written_by_neither_path_until_it_is_given_back() {
    let mut w = Twins::new(QpType::Uc);
    let holds = std::sync::Arc::new(Holds::new(16_384, REGION / 16_384).unwrap());
    for b in [&mut w.copy, &mut w.land] {
        b.set_holds(w.dst.lkey, holds.clone()).unwrap();
    }
    assert!(holds.hold(1)); // bytes 16 384..32 768
    // a write into the held page, one across its start: refused by both, nothing written
    // (a backend never lands a payload in a held page: these landed in a free one)
    for (va, len) in [(16_384 + 4096, 4096), (16_384 - 100, 200)] {
        let pk = w.write(va, 0, len, None);
        let l = w.feed_mirrored(&pk[0], 49_152);
        assert!(matches!(l, Landing::Refused), "{va}: {l:?}");
        w.assert_same(0..REGION);
    }
    let bytes = |w: &Twins| w.land.mr(w.dst.lkey).unwrap().bytes()[16_284..32_768].to_vec();
    assert!(
        bytes(&w).iter().all(|&b| b == 0),
        "the held page was written"
    );
    let c = w.land.qp_stats(w.qb).unwrap();
    assert_eq!((c.held_refusals, c.access_violations), (2, 0), "{c:?}");
    // a backend may not move landed bytes into it either
    let lkey = w.dst.lkey;
    assert!(matches!(
        w.land.move_landed(lkey, 0, 16_384, 4),
        Err(AccessError::Held { .. })
    ));
    // other pages take writes; given back, the page does too
    let pk = w.write(40_000, 0, 100, None);
    assert!(matches!(w.feed(&pk[0], 40_000), Landing::InPlace(_)));
    holds.release(1);
    let pk = w.write(16_384 + 4096, 0, 4096, None);
    assert!(matches!(w.feed(&pk[0], 16_384 + 4096), Landing::InPlace(_)));
    w.assert_same(0..REGION);
    assert!(bytes(&w).iter().any(|&b| b != 0));
}

#[test]
fn a_write_under_way_names_exactly_its_own_remaining_bytes() {
    for t in [QpType::Uc, QpType::Rc] {
        let mut w = Twins::new(t);
        let under = |w: &Twins| w.copy.write_under_way(w.qb);
        assert_eq!(under(&w), None, "{t:?}: nothing under way yet");
        // FIRST, MIDDLE, MIDDLE, LAST of 100 bytes, to VA 0x1000
        let pkts = w.write(0x1000, 0, 3 * MTU as u32 + 100, None);
        assert_eq!(pkts.len(), 4);
        for (k, d) in pkts.iter().enumerate() {
            let l = w.feed(d, 0x1000 + k * MTU);
            assert!(matches!(l, Landing::InPlace(Some(_))), "{t:?}: {l:?}");
            let want = (k + 1 < pkts.len()).then(|| WriteUnderWay {
                lkey: w.dst.lkey,
                offset: 0x1000 + (k + 1) * MTU,
                va: 0x1000 + ((k + 1) * MTU) as u64,
                len: (2 - k) * MTU + 100,
                mtu: MTU,
                psn: 100 + k as u32 + 1,
            });
            assert_eq!(under(&w), want, "{t:?}: after packet {k}");
        }
        // a WRITE ONLY leaves nothing under way; a message whose MIDDLE is lost leaves
        // nothing on UC (dropped to the next message) and the same bytes on RC (it waits
        // for the resend)
        let only = w.write(0x9000, 0, 64, None);
        assert!(matches!(w.feed(&only[0], 0x9000), Landing::InPlace(_)));
        assert_eq!(under(&w), None);
        let pkts = w.write(0x2000, 0, 3 * MTU as u32, None);
        assert!(matches!(w.feed(&pkts[0], 0x2000), Landing::InPlace(_)));
        let after_first = under(&w);
        assert_eq!(
            after_first.map(|u| (u.offset, u.len)),
            Some((0x2000 + MTU, 2 * MTU))
        );
        // (the third packet, where the backend expected the second: refused)
        assert_eq!(w.feed(&pkts[2], 0x2000 + MTU), Landing::Refused);
        match t {
            QpType::Uc => assert_eq!(under(&w), None, "UC drops the message"),
            _ => assert_eq!(under(&w), after_first, "RC waits for the lost packet"),
        }
        // a QP that does not exist has nothing under way
        assert_eq!(w.copy.write_under_way(w.qb ^ 0x55), None);
    }
}

#[test]
fn landed_sends_go_to_their_receive_in_place_or_copied() {
    for t in [QpType::Uc, QpType::Rc] {
        let mut w = Twins::new(t);
        let under = |w: &Twins, k| w.land.recv_under_way(w.qb, k).map(|u| (u.offset, u.len));
        // the posted receives: 1024 bytes each at offsets 0, 1024, …
        assert_eq!(under(&w, 0), Some((0, 1024)), "{t:?}");
        assert_eq!(under(&w, 3), Some((3 * 1024, 1024)), "{t:?}");
        assert_eq!(under(&w, 8), None, "{t:?}: only eight are posted");
        // where its receive puts it: left there
        let one = w.send(0, 700);
        assert_eq!(one.len(), 1);
        let l = w.feed_send(&one[0], 0);
        assert_eq!(l, Landing::Received { in_place: true }, "{t:?}");
        assert_eq!(under(&w, 0), Some((1024, 1024)), "{t:?}: the next receive");
        // landed in another place: copied to its receive
        let two = w.send(3000, 900);
        let l = w.feed_send(&two[0], 5 * 1024);
        assert_eq!(l, Landing::Received { in_place: false }, "{t:?}");
        let (c, l) = (
            w.copy.mr(w.recv.lkey).unwrap().bytes()[..2048].to_vec(),
            w.land.mr(w.recv.lkey).unwrap().bytes()[..2048].to_vec(),
        );
        assert!(c == l, "{t:?}: the receives' bytes");
        assert_eq!(
            &l[1024..1924],
            &(3000..3900)
                .map(|i| (i * 7 + i / 251) as u8)
                .collect::<Vec<_>>()[..]
        );
        // a corrupted one is refused, and completes nothing
        let mut bad = w.send(0, 100);
        bad[0][20] ^= 1;
        assert_eq!(w.feed_send(&bad[0], 2 * 1024), Landing::Refused, "{t:?}");
        w.assert_same(0..REGION);
    }
}
