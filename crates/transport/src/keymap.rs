//! Maps keyed by 32-bit R_Keys and QP numbers, hashed with one multiply.
//!
//! The keys come from packets, but only the endpoint inserts: a peer can make lookups, not
//! collisions, so SipHash's flood resistance buys nothing on this per-packet path.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Fibonacci hashing of a `u32` key.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, k: u32) {
        self.0 = u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A `HashMap` keyed by `u32` with [`KeyHasher`].
pub(crate) type KeyMap<V> = HashMap<u32, V, BuildHasherDefault<KeyHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_stay_distinct() {
        let mut m: KeyMap<u32> = KeyMap::default();
        for k in (0..10_000u32).map(|i| i << 8) {
            m.insert(k, k ^ 1);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u32).all(|i| m[&(i << 8)] == (i << 8) ^ 1));
        assert!(!m.contains_key(&1));
    }
}
