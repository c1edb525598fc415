//! rocelink I/O: everything that touches files or sockets.
//!
//! * [`pcap`] — capture files: a writer (classic pcap) and a reader for classic pcap (µs
//!   and ns, either byte order) and pcapng, with errors that name the byte offset.
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod pcap;
