//! Where an HSB stream's next payloads go, for the landing receive
//! ([`rocelink_runtime::LandingRx`]): the stream is predictable, so the kernel copies each
//! payload straight to its place in the page ring and nothing copies it again.
//!
//! From what has arrived (the packet size, the page being filled and how far it is filled)
//! the next datagrams are RDMA WRITE ONLY packets of the learned size at consecutive
//! addresses, then the metadata packet in the page's metadata slot, then the next page.
//! The landing receive checks each segment against its slot (size, header layout, the VA
//! its RETH names), hands those that fit to the transport as landed — which verifies them
//! as any datagram — and everything else to the transport as a whole datagram. Nothing
//! here writes a region byte or checks a key.
//!
//! A mispredicted segment is still written where the plan put it, so the plan only names
//! bytes no one can still need: slots at or after the high-water mark of the page being
//! filled (the highest byte any packet wrote there since the page's last frame end, by
//! either path — a next frame's packet that overtook the previous frame end counts), never
//! in a page the application holds, never past the end of the ring (no wrap inside one
//! plan, so no byte is named twice), and only when no report of an earlier frame is
//! outstanding (the receiver plans only once its reports are handed out, and a report's
//! bytes are valid only until the next call). For the same reason a data packet shifted by
//! lost packets may be moved forward only within its page's data area. A frame whose
//! packets strayed to another page is checked against a CRC computed over the page itself.

use rocelink_runtime::Plan;
use rocelink_transport::{Holds, Placement};
use rocelink_wire::hsb::metadata;
use std::sync::Arc;

/// Where the stream's bytes go.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// The ring region (VA = byte offset).
    pub(super) lkey: u32,
    pub(super) page_size: u64,
    pub(super) md_offset: u64,
    pub(super) frame_size: u64,
    pub(super) pages: u32,
    pub(super) md_disable: bool,
}

/// What the stream has shown of where its next packets go.
#[derive(Debug)]
pub(super) struct Prediction {
    g: Geometry,
    /// Finds the page of a placed VA.
    pages_of: super::PageFinder,
    /// Payload bytes per data packet, learned from the stream.
    payload: Option<u32>,
    /// Per page: highest end offset written since the page's last frame end.
    hwm: Vec<u64>,
    /// Pages lent to the application: never planned into.
    holds: Option<Arc<Holds>>,
}

impl Prediction {
    pub(super) fn new(g: Geometry) -> Prediction {
        Prediction {
            g,
            pages_of: super::PageFinder::new(g.page_size),
            payload: None,
            hwm: vec![0; g.pages as usize],
            holds: None,
        }
    }

    /// Never plan into a page `holds` says the application holds.
    pub(super) fn with_holds(mut self, holds: Arc<Holds>) -> Prediction {
        self.holds = Some(holds);
        self
    }

    /// Fill `plan` with the next datagrams from `page` (the page being filled) and its
    /// high-water mark; nothing while the packet size is not known yet.
    pub(super) fn fill(&self, plan: &mut Plan, page: Option<u32>) {
        let g = self.g;
        plan.lkey = g.lkey;
        let at = page.and_then(|p| Some((p, *self.hwm.get(p as usize)?)));
        let (Some(p), Some((mut page, mut off))) = (self.payload, at) else {
            return;
        };
        let held = |p: u32| self.holds.as_ref().is_some_and(|h| h.is_held(p as usize));
        let mut more = true;
        while more && page < g.pages && !held(page) {
            let base = u64::from(page) * g.page_size;
            let data_end = (base + g.md_offset) as usize;
            if off < g.frame_size {
                let (p, rest) = (u64::from(p), g.frame_size - off);
                // a frame's last packet carries the immediate when there is no metadata
                let run = if g.md_disable {
                    (rest - 1) / p * p
                } else {
                    rest
                };
                let va = base + off;
                more = plan.expect_run(va as usize, run as usize, p as usize, va, data_end);
                off += run;
                if !g.md_disable {
                    continue;
                }
                if more {
                    let va = base + off;
                    let last = (rest - run) as usize;
                    more = plan.expect_at(va as usize, last, true, va, data_end);
                }
            } else if !g.md_disable {
                let va = base + g.md_offset;
                more = plan.expect_at(va as usize, metadata::RECORD_LEN, true, va, 0);
            } else {
                break;
            }
            // a frame end: the next page, unless that wraps the ring
            page += 1;
            off = 0;
        }
    }

    /// A data write of `len` bytes was placed at `va` (either path): raise its page's
    /// high-water mark, learn the stream's packet size.
    pub(super) fn note_placed(&mut self, va: u64, len: u32) {
        let (page, off) = self.pages_of.locate(va);
        let end = off + u64::from(len);
        if off >= self.g.md_offset {
            return;
        }
        if let Some(h) = self.hwm.get_mut(page as usize) {
            *h = (*h).max(end);
        }
        if len > 0 && end < self.g.frame_size {
            self.payload = Some(len);
        }
    }

    /// [`Prediction::note_placed`] for a run of data writes that follow one another: the
    /// high-water mark from its last, the packet size from its first (a frame's last
    /// packet, shorter, may end a run).
    pub(super) fn note_run(&mut self, run: &[Placement]) {
        if let (Some(first), Some(last)) = (run.first(), run.last()) {
            self.note_placed(first.va, first.len);
            self.note_placed(last.va, last.len);
        }
    }

    /// The frame on `page` ended: the page's next bytes belong to a later frame.
    pub(super) fn note_end(&mut self, page: u32) {
        if let Some(h) = self.hwm.get_mut(page as usize) {
            *h = 0;
        }
    }
}
