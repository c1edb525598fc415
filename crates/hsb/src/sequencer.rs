//! HSB's APB sequencer: the small programs a host writes into the device's APB RAM and the
//! device runs when an event fires (`docs/reference/hsb.md`, "Session start and the
//! sequencer"). The host drives I2C this way: it writes a program that fills the I2C
//! controller's buffer, starts it, polls its status and copies the result back into the
//! program, then fires the software event and reads the copied status.
//!
//! Layout, as HSB's host writes it: a *command word* holds sixteen 2-bit opcodes (first op
//! in bits 1:0); the operands of those ops follow it; after sixteen ops a new command word
//! begins. `WR addr value`, `RD addr slot` (the device stores the value it read in `slot`),
//! `POLL addr match mask` (wait until `reg & mask == match`). An operand of `0xFFFF_FFFF`
//! where an op's first operand is due ends the program.
//!
//! [`Program`] builds programs (host); [`run`] interprets them (device) over any [`Bus`].
//!
//! ```
//! use rocelink_hsb::sequencer::{Bus, Program, run};
//! use std::collections::HashMap;
//! struct Regs(HashMap<u32, u32>);
//! impl Bus for Regs {
//!     fn read(&mut self, a: u32) -> u32 { self.0.get(&a).copied().unwrap_or(0) }
//!     fn write(&mut self, a: u32, v: u32) { self.0.insert(a, v); }
//! }
//! let mut p = Program::new();
//! p.write(0x100, 7);
//! let slot = p.read(0x100);
//! let words = p.finish();
//! let mut regs = Regs(HashMap::new());
//! for (i, w) in words.iter().enumerate() { regs.write(0x2800 + 4 * i as u32, *w); }
//! run(&mut regs, 0x2800, 0x3000).unwrap();
//! assert_eq!(regs.read(0x2800 + 4 * slot as u32), 7);
//! ```

/// The word that ends a program.
pub const DONE: u32 = 0xFFFF_FFFF;

/// Sequencer opcodes (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// Wait until `reg & mask == match`.
    Poll = 0,
    /// Write a register.
    Write = 1,
    /// Read a register into the program.
    Read = 2,
}

/// A program under construction (HSB's `Hololink::Sequencer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    words: Vec<u32>,
    command: usize,
    bit: u32,
}

impl Default for Program {
    fn default() -> Self {
        Program::new()
    }
}

impl Program {
    /// An empty program (one command word).
    pub fn new() -> Program {
        Program {
            words: vec![0],
            command: 0,
            bit: 0,
        }
    }

    fn op(&mut self, op: Op) {
        if self.bit == 32 {
            self.command = self.words.len();
            self.words.push(0);
            self.bit = 0;
        }
        self.words[self.command] |= (op as u32) << self.bit;
        self.bit += 2;
    }

    /// `addr ← value`; returns the index of the value word.
    pub fn write(&mut self, addr: u32, value: u32) -> usize {
        self.op(Op::Write);
        self.words.push(addr);
        self.words.push(value);
        self.words.len() - 1
    }

    /// Read `addr` into the program; returns the index of the word that will hold it.
    pub fn read(&mut self, addr: u32) -> usize {
        self.op(Op::Read);
        self.words.push(addr);
        self.words.push(0);
        self.words.len() - 1
    }

    /// Wait until `reg & mask == want` (operands in HSB's order: address, match, mask).
    pub fn poll(&mut self, addr: u32, mask: u32, want: u32) -> usize {
        self.op(Op::Poll);
        self.words.push(addr);
        self.words.push(want);
        self.words.push(mask);
        self.words.len() - 2
    }

    /// End the program and return its words. As HSB does, a last (ignored) op is
    /// declared so a program that filled its command word still has one for the DONE.
    pub fn finish(mut self) -> Vec<u32> {
        self.op(Op::Read);
        self.words.push(DONE);
        self.words
    }

    /// Words so far.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether nothing but the first command word is there.
    pub fn is_empty(&self) -> bool {
        self.words.len() == 1
    }
}

/// Registers a program runs against.
pub trait Bus {
    /// Read a register (or program word).
    fn read(&mut self, addr: u32) -> u32;
    /// Write a register (or program word).
    fn write(&mut self, addr: u32, value: u32);
}

/// Why a program stopped before its DONE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A POLL did not match (the device's model has no time passing inside a program, so
    /// this is the APB timeout).
    #[error("poll of {addr:#010x} for {want:#x} under mask {mask:#x} timed out (read {got:#x})")]
    PollTimeout {
        /// Register polled.
        addr: u32,
        /// Mask.
        mask: u32,
        /// Wanted value.
        want: u32,
        /// Last value read.
        got: u32,
    },
    /// The program ran past `end` without a DONE.
    #[error("program ran past {end:#x} without DONE")]
    Runaway {
        /// End of program memory.
        end: u32,
    },
    /// Opcode 3 is not defined.
    #[error("undefined opcode 3 at {at:#x}")]
    BadOp {
        /// Address of the operand.
        at: u32,
    },
}

/// Run the program at `start` (words below `end`) against `bus`. Returns the number of
/// ops executed.
pub fn run(bus: &mut impl Bus, start: u32, end: u32) -> Result<usize, RunError> {
    let mut ip = start;
    // the next program word and its address
    let mut next = |bus: &mut dyn Bus| -> Result<(u32, u32), RunError> {
        if !(start..end).contains(&ip) {
            return Err(RunError::Runaway { end });
        }
        let at = ip;
        ip = ip.wrapping_add(4);
        Ok((at, bus.read(at)))
    };
    let mut ops = 0;
    loop {
        let (_, command) = next(bus)?;
        for slot in 0..16 {
            let (at, first) = next(bus)?;
            if first == DONE {
                return Ok(ops);
            }
            match (command >> (2 * slot)) & 3 {
                0 => {
                    let (_, want) = next(bus)?;
                    let (_, mask) = next(bus)?;
                    let got = bus.read(first);
                    if got & mask != want {
                        return Err(RunError::PollTimeout {
                            addr: first,
                            mask,
                            want,
                            got,
                        });
                    }
                }
                1 => {
                    let (_, value) = next(bus)?;
                    bus.write(first, value);
                }
                2 => {
                    let (into, _) = next(bus)?;
                    let v = bus.read(first);
                    bus.write(into, v);
                }
                _ => return Err(RunError::BadOp { at }),
            }
            ops += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Regs(HashMap<u32, u32>, Vec<(u32, u32)>);
    impl Bus for Regs {
        fn read(&mut self, a: u32) -> u32 {
            self.0.get(&a).copied().unwrap_or(0)
        }
        fn write(&mut self, a: u32, v: u32) {
            self.1.push((a, v));
            self.0.insert(a, v);
        }
    }

    fn load(r: &mut Regs, at: u32, words: &[u32]) {
        for (i, w) in words.iter().enumerate() {
            r.0.insert(at + 4 * i as u32, *w);
        }
    }

    #[test]
    fn layout_is_hsbs() {
        // WR, RD, POLL: ops 1, 2, 0 in bits 1:0, 3:2, 5:4; then the finishing RD (2) and DONE
        let mut p = Program::new();
        assert_eq!(p.write(0x0300_0200, 0), 2);
        assert_eq!(p.read(0x0300_0280), 4);
        assert_eq!(p.poll(0x0300_0280, 0x10, 0x10), 6);
        let w = p.finish();
        assert_eq!(
            w,
            vec![
                0b10_00_10_01,
                0x0300_0200,
                0,
                0x0300_0280,
                0,
                0x0300_0280,
                0x10,
                0x10,
                DONE
            ]
        );
        // HSB's null sequence: a command word with one RD, then DONE
        assert_eq!(Program::new().finish(), vec![2, DONE]);
    }

    #[test]
    fn a_seventeenth_op_opens_a_command_word() {
        let mut p = Program::new();
        for i in 0..16 {
            p.write(0x100 + 4 * i, i);
        }
        assert_eq!(p.len(), 1 + 32);
        p.write(0x200, 99);
        let w = p.finish();
        assert_eq!(w[0], 0x5555_5555);
        assert_eq!(w[33], 0b10_01); // WR then the finishing RD
        let mut r = Regs::default();
        load(&mut r, 0x2800, &w);
        assert_eq!(run(&mut r, 0x2800, 0x3000), Ok(17));
        assert_eq!(r.read(0x200), 99);
        assert_eq!(r.read(0x13C), 15);
    }

    #[test]
    fn reads_land_in_the_program_and_polls_check() {
        let mut p = Program::new();
        p.write(0x10, 0xAB);
        p.poll(0x10, 0xF0, 0xA0);
        let slot = p.read(0x10);
        let w = p.finish();
        let mut r = Regs::default();
        load(&mut r, 0x2800, &w);
        run(&mut r, 0x2800, 0x3000).unwrap();
        assert_eq!(r.read(0x2800 + 4 * slot as u32), 0xAB);
        // the same program against a value the poll refuses stops there
        let mut p = Program::new();
        p.poll(0x10, 0xFF, 0x01);
        p.write(0x20, 1);
        let w = p.finish();
        let mut r = Regs::default();
        load(&mut r, 0x2800, &w);
        assert_eq!(
            run(&mut r, 0x2800, 0x3000),
            Err(RunError::PollTimeout {
                addr: 0x10,
                mask: 0xFF,
                want: 1,
                got: 0
            })
        );
        assert_eq!(r.read(0x20), 0, "nothing after a failed poll runs");
    }

    #[test]
    fn garbage_cannot_run_away() {
        // no DONE before the end of program memory
        let mut r = Regs::default();
        load(&mut r, 0x2800, &[0x5555_5555, 0x100, 1, 0x104, 2]);
        assert_eq!(
            run(&mut r, 0x2800, 0x2814),
            Err(RunError::Runaway { end: 0x2814 })
        );
        load(&mut r, 0x2800, &[0b11, 0x100, 1]);
        assert_eq!(
            run(&mut r, 0x2800, 0x3000),
            Err(RunError::BadOp { at: 0x2804 })
        );
        // zeroed program memory is POLL 0 for 0 under mask 0 (always true) over and over,
        // until the end of the memory
        let mut r = Regs::default();
        assert_eq!(
            run(&mut r, 0x2800, 0x3000),
            Err(RunError::Runaway { end: 0x3000 })
        );
    }
}
