//! `librocelink_verbs.so`: the libibverbs API over rocelink's user-space RoCE v2, so that
//! unmodified RDMA programs — perftest, rdma-core's pingpongs, anything written against
//! `<infiniband/verbs.h>` — run on any Linux host that can open a UDP socket, with no RDMA
//! NIC and no kernel module, and talk to RNICs and Linux rxe on the wire.
//!
//! It is loaded with `LD_PRELOAD` (`rocelink verbs -- PROGRAM`): libibverbs finds devices
//! only through the kernel, so instead of a provider this library defines the `ibv_*` entry
//! points themselves, and the stock libibverbs stays loaded for what other libraries bind
//! at load time. Devices are addresses (`ROCELINK_VERBS=127.0.0.2`, see [`devices`]); each
//! opened device runs a [`rocelink_transport::Endpoint`] over a UDP socket on port 4791
//! ([`nic`]), progressed by the program's own calls and by a thread of its own
//! ([`progress`]). The structures programs read are laid out as verbs.h says ([`abi`]);
//! registered memory stays the program's and is only ever copied through raw pointers
//! (`rocelink_io::raw`). `docs/verbs.md` lists what is implemented and what answers
//! EOPNOTSUPP.
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod abi;
pub mod api;
pub mod attrs;
pub mod channel;
pub mod convert;
pub mod core;
pub mod devices;
pub mod diag;
pub mod nic;
pub mod objects;
pub mod progress;
pub mod transitions;
