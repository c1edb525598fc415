//! Maps keyed by 32-bit R_Keys and QP numbers: entries in a slab, found through an index
//! hashed with one multiply, the last one found remembered.
//!
//! The keys come from packets, but only the endpoint inserts: a peer can make lookups, not
//! collisions, so SipHash's flood resistance buys nothing on this per-packet path. A stream
//! looks the same QP or region up packet after packet, so the entry found last is tried
//! first: a key compare instead of a hash probe.

use std::cell::Cell;
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

/// A map from `u32` keys to values kept in a slab; iteration is in slot order.
#[derive(Debug)]
pub(crate) struct KeyMap<V> {
    /// Occupied slots hold their key beside the value; freed ones are reused.
    slots: Vec<Option<(u32, V)>>,
    free: Vec<usize>,
    index: HashMap<u32, usize, BuildHasherDefault<KeyHasher>>,
    /// The slot found last: tried first (its key is compared, so a stale one only misses).
    last: Cell<usize>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
            last: Cell::new(0),
        }
    }
}

impl<V> KeyMap<V> {
    /// Whether the slot found last holds `key`.
    #[inline]
    fn last_holds(&self, key: u32) -> bool {
        matches!(self.slots.get(self.last.get()), Some(Some((k, _))) if *k == key)
    }

    /// The slot holding `key`, through the index (remembered for the next lookup).
    #[inline(never)]
    fn find(&self, key: u32) -> Option<usize> {
        let i = *self.index.get(&key)?;
        self.last.set(i);
        Some(i)
    }

    #[inline]
    pub(crate) fn get(&self, key: &u32) -> Option<&V> {
        let i = self.last.get();
        if let Some(Some((k, v))) = self.slots.get(i)
            && k == key
        {
            return Some(v);
        }
        let i = self.find(*key)?;
        self.slots.get(i)?.as_ref().map(|(_, v)| v)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: &u32) -> Option<&mut V> {
        let i = if self.last_holds(*key) {
            self.last.get()
        } else {
            self.find(*key)?
        };
        self.slots.get_mut(i)?.as_mut().map(|(_, v)| v)
    }

    pub(crate) fn contains_key(&self, key: &u32) -> bool {
        self.index.contains_key(key)
    }

    /// Insert `value` under `key`; the value it replaces, if any.
    pub(crate) fn insert(&mut self, key: u32, value: V) -> Option<V> {
        if let Some(&i) = self.index.get(&key) {
            let old = self.slots[i].replace((key, value));
            return old.map(|(_, v)| v);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((key, value));
                i
            }
            None => {
                self.slots.push(Some((key, value)));
                self.slots.len() - 1
            }
        };
        self.index.insert(key, i);
        None
    }

    pub(crate) fn remove(&mut self, key: &u32) -> Option<V> {
        let i = self.index.remove(key)?;
        let (_, v) = self.slots.get_mut(i)?.take()?;
        self.free.push(i);
        Some(v)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().flatten().map(|(_, v)| v)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots.iter_mut().flatten().map(|(_, v)| v)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_stay_distinct() {
        let mut m: KeyMap<u32> = KeyMap::default();
        for k in (0..10_000u32).map(|i| i << 8) {
            assert_eq!(m.insert(k, k ^ 1), None);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u32).all(|i| m.get(&(i << 8)) == Some(&((i << 8) ^ 1))));
        assert!(!m.contains_key(&1));
        assert_eq!(m.get(&1), None);
    }

    #[test]
    fn a_removed_key_is_gone_even_where_it_was_found_last() {
        let mut m: KeyMap<&str> = KeyMap::default();
        m.insert(7, "seven");
        m.insert(9, "nine");
        assert_eq!(m.get(&7), Some(&"seven"));
        assert_eq!(m.remove(&7), Some("seven"));
        assert_eq!(m.get(&7), None, "the remembered slot was freed");
        // its slot is reused by another key: the old key still finds nothing
        m.insert(11, "eleven");
        assert_eq!(m.get(&11), Some(&"eleven"));
        assert_eq!(m.get(&7), None);
        assert_eq!(m.get(&9), Some(&"nine"));
        assert_eq!(m.insert(9, "NINE"), Some("nine"));
        *m.get_mut(&9).unwrap() = "nein";
        assert_eq!(m.values().copied().collect::<Vec<_>>(), ["eleven", "nein"]);
        assert_eq!(m.remove(&7), None);
        assert_eq!(m.len(), 2);
    }
}
