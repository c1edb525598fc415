//! rocelink I/O: everything that touches files or sockets.
//!
//! * [`udp`] — UDP sockets: `recvmmsg`/`sendmmsg` batches, `UDP_GRO`, gather-GSO, the
//!   options that make the ICRC of a socket send exact.
//! * [`scatter`] — scatter receive: predicted payloads land in the caller's region.
//! * [`driver`] — runs a sans-IO transport endpoint over a UDP socket, with a pcap tap.
//! * [`file`] — disk-space reservation for the recorder's index.
//! * [`pcap`] — capture files: a writer (classic pcap) and a reader for classic pcap (µs
//!   and ns, either byte order) and pcapng, with errors that name the byte offset.
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod aligned;
pub mod driver;
pub mod file;
pub mod net;
pub mod oob;
pub mod pcap;
pub mod scatter;
pub mod udp;
