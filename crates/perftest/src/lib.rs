//! The tools RDMA users measure a link with, on rocelink's transport, each interoperable
//! with the real one over Linux rxe or a NIC:
//!
//! * [`perf`] — perftest's six tests (`ib_write_bw` … `ib_send_lat`): the out-of-band
//!   exchange, QP attributes, buffer layout and measurements, as client or server.
//! * [`pingpong`] — rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong`.
//!
//! `rocelink perf` and `rocelink pingpong` are these plus the tools' printing; `rocelink
//! bench perf` holds [`perf`] against the UDP figures of the same run.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod perf;
pub mod pingpong;
