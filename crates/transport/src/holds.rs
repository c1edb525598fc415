//! Pages of a region the application still reads: remote writes into them are refused.
//!
//! A receiver that lends a frame's bytes to its application (a numpy array, say) without
//! copying them must keep the next frame out of those bytes until they are given back. The
//! application holds the frame's page ([`Holds::hold`]) and releases it when done, from any
//! thread; while it is held every remote write that touches the page is refused as outside
//! the region's window ([`crate::AccessError::Held`], counted as a window cut) — the same
//! rule as an IMS ring whose consumer has not freed the space yet. A backend that puts
//! payloads straight into a region must not name a held page ([`Holds::overlaps`]).

use std::sync::atomic::{AtomicU32, Ordering};

/// Hold counts of a region's pages (of `page_size` bytes each, from the region's first byte).
#[derive(Debug)]
pub struct Holds {
    page_size: u64,
    count: Box<[AtomicU32]>,
}

impl Holds {
    /// `pages` pages of `page_size` bytes, none held. `None` if `page_size` is 0.
    pub fn new(page_size: u64, pages: usize) -> Option<Holds> {
        (page_size > 0).then(|| Holds {
            page_size,
            count: (0..pages).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Hold page `page` once more; false if there is no such page.
    pub fn hold(&self, page: usize) -> bool {
        match self.count.get(page) {
            Some(c) => {
                c.fetch_add(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }

    /// Give one hold of page `page` back. What the holder read happens before any later
    /// write into the page.
    pub fn release(&self, page: usize) {
        if let Some(c) = self.count.get(page) {
            let _ = c.fetch_update(Ordering::Release, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Whether page `page` is held.
    pub fn is_held(&self, page: usize) -> bool {
        self.count
            .get(page)
            .is_some_and(|c| c.load(Ordering::Acquire) > 0)
    }

    /// Pages held now.
    pub fn held(&self) -> usize {
        (0..self.count.len()).filter(|&p| self.is_held(p)).count()
    }

    /// The end of the bytes from `offset` on, at most `max` of them, that touch no held
    /// page: `offset + max`, or the start of the first held page before that.
    pub fn clear_until(&self, offset: u64, max: u64) -> u64 {
        let end = offset.saturating_add(max);
        let first = offset / self.page_size;
        let last = end.saturating_sub(1) / self.page_size;
        (first..=last.min(self.count.len() as u64))
            .find(|&p| self.is_held(p as usize))
            .map_or(end, |p| (p * self.page_size).max(offset))
    }

    /// Whether bytes `[offset, offset + len)` of the region touch a held page.
    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let first = offset / self.page_size;
        let last = offset.saturating_add(len - 1) / self.page_size;
        (first..=last.min(self.count.len() as u64)).any(|p| self.is_held(p as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_span_ends_at_the_first_held_page() {
        let h = Holds::new(100, 4).unwrap();
        // nothing held: as far as asked, past the last page too
        assert_eq!(h.clear_until(30, 1_000), 1_030);
        assert!(h.hold(2)); // bytes 200..300
        assert_eq!(h.clear_until(0, 400), 200);
        assert_eq!(h.clear_until(120, 50), 170, "short of the held page");
        assert_eq!(h.clear_until(199, 10), 200);
        assert_eq!(h.clear_until(250, 100), 250, "inside it: nothing");
        assert_eq!(h.clear_until(300, 500), 800, "after it");
        h.release(2);
        assert_eq!(h.clear_until(0, 400), 400);
    }

    #[test]
    fn a_held_page_is_refused_until_every_hold_is_given_back() {
        let h = Holds::new(100, 4).unwrap();
        assert!(!h.overlaps(0, 400));
        assert!(h.hold(2) && h.hold(2));
        assert!(!h.hold(4), "no fifth page");
        assert!(h.overlaps(250, 1) && h.overlaps(199, 2) && h.overlaps(0, 400));
        assert!(!h.overlaps(199, 1) && !h.overlaps(300, 100) && !h.overlaps(250, 0));
        h.release(2);
        assert!(h.is_held(2), "held twice, released once");
        h.release(2);
        h.release(2); // one too many: no underflow
        assert!(!h.is_held(2) && h.held() == 0);
        assert!(Holds::new(0, 4).is_none());
    }
}
