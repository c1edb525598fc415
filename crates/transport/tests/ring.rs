//! Ring-window regions (the IMS ring buffer): the whole 64-bit VA space onto a ring, writes
//! accepted only inside a movable window; a write across the ring's end wraps to its start.
#![allow(clippy::unwrap_used)]

mod common;

use common::ring::{RING, RingPair};
use proptest::prelude::*;
use rocelink_transport::*;

type Setup = RingPair;

fn setup(start: u64, window: u64) -> Setup {
    RingPair::new(0xAB, start, window, false, Mtu::M1024, 4)
}

/// UC WRITE of `len` bytes of 0xAB to `va`; run the link; B's access violations after.
fn write(s: &mut Setup, va: u64, len: u32) -> u64 {
    s.write(va, s.ring.rkey, len);
    s.pair.b.qp_stats(s.qb).unwrap().access_violations
}

fn ring_bytes(s: &Setup) -> Vec<u8> {
    s.ring_bytes().to_vec()
}

#[test]
fn writes_land_at_va_mod_ring_inside_the_window_only() {
    let base = 7u64 << 40; // far into the 64-bit space
    let mut s = setup(base, 32 * 1024);
    assert_eq!(write(&mut s, base + 4096, 2000), 0);
    let off = ((base + 4096) % RING as u64) as usize;
    let r = ring_bytes(&s);
    assert!(r[off..off + 2000].iter().all(|&b| b == 0xAB));
    assert_eq!(r.iter().filter(|&&b| b != 0).count(), 2000);
    // past the window: refused with the right R_Key, nothing written
    let v = write(&mut s, base + 32 * 1024 - 100, 200);
    assert_eq!(v, 1);
    assert_eq!(ring_bytes(&s).iter().filter(|&&b| b != 0).count(), 2000);
    // the consumer moves the window on: the same address is now fine
    s.pair
        .b
        .set_ring_window(s.ring.lkey, base + 16 * 1024, 32 * 1024)
        .unwrap();
    assert_eq!(
        write(&mut s, base + 32 * 1024 - 100, 200),
        1,
        "no new violation"
    );
    // a write across the ring's end inside the window wraps to its start, as the ring
    // memory of a buffer unit does
    s.pair
        .b
        .set_ring_window(s.ring.lkey, base + 60 * 1024, 8 * 1024)
        .unwrap();
    let before = ring_bytes(&s);
    assert_eq!(write(&mut s, base + RING as u64 - 100, 200), 1, "accepted");
    let after = ring_bytes(&s);
    let at = ((base + RING as u64 - 100) % RING as u64) as usize;
    let changed: Vec<usize> = (0..RING).filter(|&i| before[i] != after[i]).collect();
    let want: Vec<usize> = (0..200).map(|i| (at + i) % RING).collect();
    let mut want_sorted = want.clone();
    want_sorted.sort_unstable();
    let written: Vec<usize> = want_sorted
        .iter()
        .copied()
        .filter(|&i| before[i] == 0)
        .collect();
    assert_eq!(
        changed, written,
        "exactly the 200 bytes from the VA on, modulo the ring"
    );
    assert!(want.iter().all(|&i| after[i] == 0xAB));
    assert!(
        want.contains(&(RING - 1)) && want.contains(&0),
        "it does wrap"
    );
    // the application reads it back in two pieces: the ring's tail, then its head
    let [a, b] = s
        .pair
        .b
        .mr(s.ring.lkey)
        .unwrap()
        .pieces(base + RING as u64 - 100, 200)
        .unwrap();
    assert_eq!((a.len(), b.len()), (RING - at, 200 - (RING - at)));
    assert!(a.iter().chain(b).all(|&x| x == 0xAB));
    // windows longer than the ring, and windows on linear regions, are refused
    assert!(
        s.pair
            .b
            .set_ring_window(s.ring.lkey, 0, RING as u64 + 1)
            .is_err()
    );
}

#[test]
fn a_window_across_the_top_of_the_va_space() {
    // the window wraps from 2^64 - 1 to 0
    let mut s = setup(u64::MAX - 4095, 8192);
    assert_eq!(write(&mut s, u64::MAX - 4095, 4096), 0);
    assert_eq!(write(&mut s, 0, 4096), 0);
    assert_eq!(write(&mut s, 4096, 1), 1);
    assert_eq!(ring_bytes(&s).iter().filter(|&&b| b != 0).count(), 8192);
}

proptest! {
    /// Whatever the window and the access, an accepted access lies inside the window
    /// (modulo 2^64) and inside the ring without wrapping.
    #[test]
    fn accepted_accesses_are_in_window_and_in_ring(
        start in any::<u64>(), window in 0u64..=RING as u64,
        va in any::<u64>(), near in any::<bool>(), delta in 0u64..70_000, len in 0u64..5000,
    ) {
        let mut t = MrTable::default();
        let k = t.register_ring(vec![0u8; RING], Access::REMOTE_WRITE, start, window).unwrap();
        let va = if near { start.wrapping_add(delta) } else { va };
        let r = t.get(k.lkey).unwrap();
        if let Ok(off) = r.offset_of(va, len) {
            prop_assert!(va.wrapping_sub(start) + len <= window);
            prop_assert_eq!(off as u64, va % RING as u64);
            prop_assert!(off as u64 + len <= RING as u64);
        }
    }
}
