//! Joining CRC-32 values (zlib's `crc32_combine`), with tables for a dominant length.

use std::sync::{Arc, Mutex};

/// Joins CRC-32 values: `crc(A ‖ B)` from `crc(A)`, `crc(B)` and `len(B)` (zlib's
/// `crc32_combine`), caching `x^(8·len)`. Lets a receiver hash a payload once and use the
/// result both in the ICRC and in a running CRC of the data (e.g. an HSB frame CRC).
///
/// Multiplying by a fixed `x^(8·len)` is linear in the other operand, so once one length
/// dominates (a majority vote reaches [`TABLE_AFTER`]) the combiner builds four 256-entry
/// tables for it
/// and a combine costs four lookups instead of a 32-step multiply. A stream of equal-sized
/// packets with the odd other size (a metadata packet) keeps its table. Combiners of one
/// process share the table of a length (a receiver joins each payload's CRC twice — into
/// the ICRC and into the frame's CRC — and one table stays in cache where two would not).
#[derive(Debug, Clone, Default)]
pub struct Combiner {
    len: usize,
    x: u32,
    cand: usize,
    run: u32,
    pub(super) table: Option<Arc<Table>>,
}

/// A length and its four lookup tables.
type Table = (usize, [[u32; 256]; 4]);

/// The tables built so far in this process, by length (a handful at most).
static TABLES: Mutex<Vec<Arc<Table>>> = Mutex::new(Vec::new());

/// The table for `len` (multiplier `x` = `x^(8·len)`), shared with every other combiner.
fn shared_table(len: usize, x: u32) -> Arc<Table> {
    let mut all = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = all.iter().find(|t| t.0 == len) {
        return t.clone();
    }
    let mut t = Box::new((len, [[0u32; 256]; 4]));
    for (i, row) in t.1.iter_mut().enumerate() {
        for (v, e) in row.iter_mut().enumerate() {
            *e = multmodp(x, (v as u32) << (8 * i));
        }
    }
    let t: Arc<Table> = Arc::from(t);
    if all.len() >= 16 {
        all.remove(0); // sizes come and go: keep the last few
    }
    all.push(t.clone());
    t
}

/// Vote margin of one length after which [`Combiner`] builds its tables.
pub const TABLE_AFTER: u32 = 64;

impl Combiner {
    /// `crc(A ‖ B)`.
    #[inline]
    pub fn combine(&mut self, crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
        if len_b == 0 {
            return crc_a;
        }
        if let Some(t) = &self.table
            && t.0 == len_b
        {
            let [t0, t1, t2, t3] = &t.1;
            let a = crc_a.to_le_bytes();
            return t0[usize::from(a[0])]
                ^ t1[usize::from(a[1])]
                ^ t2[usize::from(a[2])]
                ^ t3[usize::from(a[3])]
                ^ crc_b;
        }
        self.combine_untabled(crc_a, crc_b, len_b)
    }

    /// [`Combiner::combine`] for a length without its table (yet): the multiply, and the
    /// vote that builds the table for a dominant length.
    #[cold]
    #[inline(never)]
    fn combine_untabled(&mut self, crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
        if len_b != self.len || self.x == 0 {
            self.x = x8nmodp(len_b);
            self.len = len_b;
        }
        // majority vote: the dominant length gets the table, odd sizes in between do not
        // stop it from getting there
        if len_b == self.cand {
            self.run += 1;
        } else if self.run == 0 {
            (self.cand, self.run) = (len_b, 1);
        } else {
            self.run -= 1;
        }
        if self.run >= TABLE_AFTER && len_b == self.cand {
            self.run = 0;
            self.table = Some(shared_table(len_b, self.x));
        }
        multmodp(self.x, crc_a) ^ crc_b
    }
}

/// Reflected CRC-32 polynomial.
pub(super) const POLY: u32 = 0xEDB8_8320;

/// `a * b mod P` in the reflected representation (bit 31 is x^0).
pub(super) fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        if m == 0 {
            break;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `x^(8 n) mod P`: the effect of appending `n` zero bytes.
pub(super) fn x8nmodp(mut n: usize) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut sq = 1u32 << 23; // x^8
    while n != 0 {
        if n & 1 != 0 {
            p = multmodp(sq, p);
        }
        sq = multmodp(sq, sq);
        n >>= 1;
    }
    p
}
