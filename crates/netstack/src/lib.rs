//! A sans-IO Ethernet stack for a program that owns its port (an AF_XDP socket, a raw
//! socket, an emulated FPGA's MAC) — what blue-ethernet builds in hardware and what an
//! HSB device answers on its host port:
//!
//! * [`arp_cache`] — blue-ethernet's set-associative ARP cache: pseudo-LRU, any number of
//!   outstanding misses answered in request order, retries and timeouts.
//! * [`iface`] — one port: FCS, 802.1Q, ARP request/reply/gratuitous, ICMP echo, IPv4 header
//!   checksum, UDP up with the headers the ICRC covers; UDP, PFC and ARP frames out.
//! * [`pfc`] — priority flow control: classes from PCP/DSCP, per-class queues, pause frames
//!   on a threshold, round-robin transmit honouring pause quanta.
//!
//! Like the transport, nothing here reads a clock or a socket: time is an argument,
//! frames go in through `handle_*` and come out of `poll_*`.
//!
//! ```
//! use rocelink_netstack::iface::{IfaceConfig, Interface, Rx, Sent, UdpTx};
//! use rocelink_wire::bytes::Mac;
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use std::time::Instant;
//!
//! let now = Instant::now();
//! let a_ip = Ipv4Addr::new(10, 0, 0, 1);
//! let b_ip = Ipv4Addr::new(10, 0, 0, 2);
//! let mut a = Interface::new(IfaceConfig::new(Mac([2, 0, 0, 0, 0, 1]), a_ip)).unwrap();
//! let mut b = Interface::new(IfaceConfig::new(Mac([2, 0, 0, 0, 0, 2]), b_ip)).unwrap();
//! let to = UdpTx { dst: SocketAddrV4::new(b_ip, 4791), src_port: 50000, dscp: 0, pcp: 0 };
//! // the first datagram waits for ARP
//! assert_eq!(a.send_udp(now, to, b"hello").unwrap(), Sent::Held);
//! let mut got = Vec::new();
//! // move frames both ways until both sides are quiet
//! for _ in 0..4 {
//!     while let Some(f) = a.poll_transmit(now) {
//!         if let Some(Rx::Udp(u)) = b.handle_frame(now, &f) {
//!             got.push(u.payload.to_vec());
//!         }
//!     }
//!     while let Some(f) = b.poll_transmit(now) {
//!         a.handle_frame(now, &f);
//!     }
//! }
//! assert_eq!(got, [b"hello".to_vec()]);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp_cache;
pub mod iface;
pub mod pfc;
