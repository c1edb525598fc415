//! Kernel bypass with AF_XDP (work in progress, issue #16).
//!
//! * [`prog`] — the XDP program that steers RoCE v2 (UDP 4791) to AF_XDP sockets, built
//!   as BPF instructions in Rust and loaded with `bpf(2)`, attached through a BPF link.
//!
//! The sockets, UMEM and rings come next (see `docs/xdp.md` for the crate choice).

pub mod prog;
