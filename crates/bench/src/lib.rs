//! rocelink's benchmarks. [`stream`](mod@stream) is `rocelink bench stream`: one sender, three
//! receivers, one run, same packets.
//!
//! The sender replays a set of HSB frames (UC RDMA WRITE ONLY packets of `payload` bytes and
//! one metadata packet per frame, real ICRCs) from a UDP socket bound to the "device" IP,
//! with `sendmmsg` or gather-GSO, unpaced or at a target rate. Receivers:
//!
//! * **sink** — the baseline: `recvmmsg` (optionally `UDP_GRO`) and count bytes, nothing else.
//! * **sink-ring** — the sink, but the kernel copies each datagram to the next place of a
//!   ring as large as rocelink's (in huge pages, as rocelink's): what landing payloads in
//!   memory that is not in the cache costs by itself, with nothing checked.
//! * **recv1** — today's HSB Linux receiver path: one `recv()` per packet, a clock read per
//!   packet, BTH/RETH parse, range check, `memcpy` into the frame buffer, PSN drop counting,
//!   frame publish on the metadata packet (no ICRC, no QP/R_Key check).
//! * **rocelink** — rocelink's full HSB receive path (`rocelink_hsb::host::receiver`): ICRC
//!   of every packet, QP/R_Key/bounds before placement, PSN continuity, frame CRC checked
//!   against the metadata.
//!
//! * **generic** — rocelink's receiver with the fast path off.
//! * **xdp** — rocelink's receiver over AF_XDP (`rocelink_runtime::xdp`): every ICRC exact
//!   with the real IPv4 header. Needs [`StreamConfig::veth`]: a veth pair between two
//!   namespaces ([`veth`]), the sender in one, the receivers in the other.
//!
//! Each receiver thread's CPU time comes from `getrusage(RUSAGE_THREAD)`; over veth the
//! machine's softirq time is measured too (the kernel's receive work runs there).
//!
//! [`perf`] holds `rocelink bench perf` (perftest's tests against the UDP figures that bound
//! them), [`record`] `rocelink bench record` (recorder against `dd oflag=direct`), [`shots`]
//! `rocelink bench shots` (ultrasound shots over RoCE UD and over plain UDP), [`scale`]
//! `rocelink bench scale` (N streams at once, each on CPUs of its own), [`verbs`]
//! `rocelink bench verbs` (perftest over `librocelink_verbs.so` against `rocelink perf`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod baseline;
mod error;
pub mod perf;
pub mod record;
pub mod scale;
pub mod shots;
pub mod stats;
pub mod stream;
pub mod verbs;
pub mod veth;

pub use error::{BenchError, Result};
pub use stats::{Spread, median};
pub use stream::no_loss::{NoLoss, no_loss, no_loss_rate};
pub use stream::report::StreamReport;
pub use stream::{
    ALL_RECEIVERS, RECEIVERS, StreamConfig, StreamResult, medians, stream, stream_rounds,
};
