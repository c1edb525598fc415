//! Runnable examples of rocelink as a library (this crate has no code of its own):
//!
//! * `receive_frames` — receive HSB frames into memory the application allocated and hand
//!   each verified frame to the application's code. Against the emulator:
//!
//!   ```text
//!   cargo run --release -- emulate &
//!   cargo run --release -p rocelink-examples --example receive_frames -- 127.0.0.2 127.0.0.1 10
//!   ```
//!
//!   `tests/against_emulate.rs` runs it that way.
//! * `hsb_session` — an HSB device emulated from code and a host receiving two virtual
//!   ports as a session (`rocelink_hsb_host::session`), every frame handed to a closure.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example hsb_session -- 50
//!   ```
//! * `perf_write_bw` — perftest's `ib_write_bw`, server and client each a session
//!   (`rocelink_perftest::perf::session`) on its own loopback address.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example perf_write_bw -- 2000
//!   ```
//! * `ultrasound_shots` — an ultrasound probe and a host in one program
//!   (`rocelink_ultrasound::session`): the host triggers the probe and checks every shot
//!   against its echoes.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example ultrasound_shots -- 200
//!   ```
//! * `ims_stream` — an IMS buffer unit and a worker in one program
//!   (`rocelink_ims::session`): every frame ACKed is consumed and checked.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example ims_stream -- 2000
//!   ```
//! * `pingpong` — rdma-core's `ibv_rc_pingpong`, server and client each a session
//!   (`rocelink_perftest::pingpong::session`).
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example pingpong -- 1000
//!   ```
//! * `trigger_rtt` — the ultrasound trigger round trip (`rocelink_ultrasound::session::
//!   round_trip`) against a probe session in the same program, a row per shot size.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example trigger_rtt -- 200
//!   ```
//!
//! Every role is driven the same way (`rocelink_runtime::Session`): started from its
//! plain-data config, its events followed (`rocelink_runtime::follow`), stopped by its
//! limits or its stopper, and its summary printed as one JSON line by [`summary_line`] —
//! the serialisation the CLI's `--json` and Python's dicts are made of.

#![forbid(unsafe_code)]

/// `summary` as the JSON line each example ends a role with: `{"role": …, "summary": …}`.
pub fn summary_line<T: serde::Serialize>(role: &str, summary: &T) -> String {
    serde_json::json!({ "role": role, "summary": summary }).to_string()
}
