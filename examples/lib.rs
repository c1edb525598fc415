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
//! * `ultrasound_shots` — an ultrasound probe and a host in one program
//!   (`rocelink_ultrasound::session`): the host triggers the probe and checks every shot
//!   against its echoes.
//!
//!   ```text
//!   cargo run --release -p rocelink-examples --example ultrasound_shots -- 200
//!   ```

#![forbid(unsafe_code)]
