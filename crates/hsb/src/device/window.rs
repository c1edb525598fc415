//! Sensor RX and the sensor window (seed `000`, "Sensor RX" and "Sensor Window").
//!
//! The sensor delivers AXI-Stream words of `DATAPATH_WIDTH` bits; every valid cycle sends
//! the whole word, and the word carrying TLAST is zero-padded above the last byte (the
//! padding is transmitted). A window ends when it holds the configured byte count, or when
//! TLAST arrives:
//! * TLAST exactly at the count: one normal window end (flags 0);
//! * TLAST before the count: early end, flags bit 0, the window restarts;
//! * the count reached without TLAST: window end with flags bit 1 ("bytes per window only");
//!   if TLAST comes later it ends the next, partial window as an early TLAST.

use rocelink_wire::hsb::metadata::{FLAG_BPW_ONLY, FLAG_EARLY_TLAST};

/// The window state of one virtual port.
#[derive(Debug, Clone)]
pub struct SensorWindow {
    window: usize,
    word: usize,
    filled: usize,
}

impl SensorWindow {
    /// A window of `window` bytes fed by words of `word_bytes` (DATAPATH_WIDTH / 8).
    pub fn new(window: usize, word_bytes: usize) -> SensorWindow {
        SensorWindow {
            window: window.max(1),
            word: word_bytes.max(1),
            filled: 0,
        }
    }

    /// Bytes in the current, unfinished window.
    pub fn filled(&self) -> usize {
        self.filled
    }

    /// Feed one burst of sensor words. `tlast`: the burst's last word carries TLAST (a burst
    /// without it must be whole words). `emit(bytes, end)` receives the bytes in order;
    /// `end = Some(flags)` closes the window after those bytes.
    pub fn feed(&mut self, data: &[u8], tlast: bool, mut emit: impl FnMut(&[u8], Option<u32>)) {
        const ZEROS: [u8; 64] = [0; 64];
        let pad = if tlast {
            (self.word - data.len() % self.word) % self.word
        } else {
            0
        };
        let total = data.len() + pad;
        let mut pos = 0;
        let mut closed_at_end = false;
        while pos < total {
            let take = (self.window - self.filled).min(total - pos);
            let end_pos = pos + take;
            // data part, then padding part, of [pos, end_pos)
            let d_end = end_pos.min(data.len());
            let full = self.filled + take == self.window;
            let last_piece = end_pos == total;
            let flags = full.then_some(if tlast && last_piece {
                0
            } else {
                FLAG_BPW_ONLY
            });
            if pos < d_end {
                let (d_flags, p_len) = if end_pos > data.len() {
                    (None, end_pos - data.len())
                } else {
                    (flags, 0)
                };
                emit(&data[pos..d_end], d_flags);
                if p_len > 0 {
                    emit(&ZEROS[..p_len.min(ZEROS.len())], flags);
                }
            } else {
                let from = pos - data.len();
                emit(
                    &ZEROS[..(end_pos - data.len() - from).min(ZEROS.len())],
                    flags,
                );
            }
            self.filled += take;
            if full {
                self.filled = 0;
                closed_at_end = last_piece;
            }
            pos = end_pos;
        }
        if tlast && !closed_at_end {
            // TLAST before the window filled (or after it ended by count)
            emit(&[], Some(FLAG_EARLY_TLAST));
            self.filled = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(w: &mut SensorWindow, data: &[u8], tlast: bool) -> Vec<(usize, Option<u32>)> {
        let mut out: Vec<(usize, Option<u32>)> = Vec::new();
        w.feed(data, tlast, |b, e| out.push((b.len(), e)));
        out
    }

    /// Collapse emitted pieces into window ends: (bytes in window, flags).
    fn windows(pieces: &[(usize, Option<u32>)]) -> Vec<(usize, u32)> {
        let mut acc = 0;
        let mut v = Vec::new();
        for &(n, e) in pieces {
            acc += n;
            if let Some(f) = e {
                v.push((acc, f));
                acc = 0;
            }
        }
        v
    }

    #[test]
    fn tlast_at_count_is_normal() {
        let mut w = SensorWindow::new(40, 8);
        assert_eq!(windows(&run(&mut w, &[1; 40], true)), vec![(40, 0)]);
        assert_eq!(w.filled(), 0);
    }

    #[test]
    fn seed_example_39_bytes_padded_to_40() {
        // 39 sensor bytes, 64-bit words: the TLAST word is zero-padded, 40 bytes sent
        let mut w = SensorWindow::new(40, 8);
        let p = run(&mut w, &[7; 39], true);
        assert_eq!(windows(&p), vec![(40, 0)]);
    }

    #[test]
    fn early_tlast() {
        let mut w = SensorWindow::new(100, 8);
        assert_eq!(
            windows(&run(&mut w, &[1; 48], true)),
            vec![(48, FLAG_EARLY_TLAST)]
        );
        assert_eq!(w.filled(), 0, "the window restarts");
    }

    #[test]
    fn count_without_tlast_then_late_tlast() {
        let mut w = SensorWindow::new(32, 8);
        // 48 bytes, TLAST at the end: window 1 ends by count (bpw only), window 2 is early
        assert_eq!(
            windows(&run(&mut w, &[1; 48], true)),
            vec![(32, FLAG_BPW_ONLY), (16, FLAG_EARLY_TLAST)]
        );
        // no TLAST at all: count-only ends, the rest stays open
        let mut w = SensorWindow::new(32, 8);
        assert_eq!(
            windows(&run(&mut w, &[1; 72], false)),
            vec![(32, FLAG_BPW_ONLY), (32, FLAG_BPW_ONLY)]
        );
        assert_eq!(w.filled(), 8);
    }

    #[test]
    fn bursts_accumulate() {
        let mut w = SensorWindow::new(64, 8);
        let mut p = run(&mut w, &[1; 32], false);
        assert!(windows(&p).is_empty());
        p.extend(run(&mut w, &[1; 32], true));
        assert_eq!(windows(&p), vec![(64, 0)]);
    }
}
