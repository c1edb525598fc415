//! rocelink I/O: everything that touches files or sockets.
//!
//! * [`backend`] — the datagram backend trait every role runs over, and the one send loop
//!   ([`backend::Transmitter`]: segmented runs, batches, fallback).
//! * [`udp`] — UDP sockets: `recvmmsg`/`sendmmsg` batches, `UDP_GRO`, gather-GSO, the
//!   options that make the ICRC of a socket send exact.
//! * [`scatter`] — scatter receive: predicted payloads land in the caller's region.
//! * [`tap`] — a pcap tap of a UDP socket's datagrams (raw-IP records).
//! * [`packet`] — AF_PACKET sockets for one EtherType (CoE without XDP).
//! * [`oob`] — rdma-core's out-of-band TCP exchange.
//! * [`file`](mod@file) — disk-space reservation for the recorder's index.
//! * [`mem`] — the machine's memory, to check sizes before allocating them.
//! * [`raw`] — memory another part of the program owns (a verbs application's buffers),
//!   touched only by copies through raw pointers, and the check that it is mapped.
//! * [`event`] — eventfd counters (a verbs completion channel's descriptor).
//! * [`signal`] — SIGPIPE back to its default, for a command-line tool.
//! * [`pcap`] — capture files: a writer (classic pcap) and a reader for classic pcap (µs
//!   and ns, either byte order) and pcapng, with errors that name the byte offset.
//!
//! No dependency on the transport: `rocelink-runtime` runs an endpoint over these.
//!
//! # Sends and their accounting
//!
//! - Only `crates/io` has `unsafe` (recvmmsg/sendmmsg/sendmsg with cmsgs, setsockopt, ppoll,
//!   getifaddrs); every block has a SAFETY note.
//! - Sends: unconnected socket bound to an explicit IP with `IP_PMTUDISC_DO` → DF and IPv4 ID 0,
//!   so the ICRC computed in user space is what any receiver checks.
//! - `EPERM` from a send means a local netfilter rule dropped the datagram; it is counted
//!   (`host_drops`) and treated as a loss. Caveat: `sendmmsg` reports a drop in the middle of a
//!   batch only as a short count, and the retry re-evaluates the rule, so output-hook drops
//!   under-count. Tests inject loss with `netdev` ingress/egress hooks instead, which drop
//!   silently like a wire.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod aligned;
pub mod backend;
pub mod cpu;
pub mod event;
pub mod file;
pub mod mem;
pub mod net;
pub mod netns;
pub mod oob;
pub mod packet;
pub mod pcap;
pub mod perftest;
pub mod ports;
pub mod prefix;
pub mod raw;
pub mod scatter;
pub mod shared;
pub mod signal;
mod sys;
pub mod tap;
pub mod udp;
pub mod xdp;
