//! Holoscan Sensor Bridge, in software.
//!
//! * [`catalogue`] — every sensor name `--sensor` takes, typed ([`catalogue::SensorSpec`]).
//! * [`device`] — a CUDA-free HSB device, sans-IO: the register map, an ECB server with the
//!   FPGA's sequence-check semantics, BOOTP v2 enumeration and set-IP, the sensor window
//!   (TLAST rules, word padding) and the RoCE packetizer (0x2A data, 0x2B metadata).
//! * [`sensor`] — frame sources: a deterministic test pattern, IMX274 CSI RAW10/RAW12 frame
//!   layouts, an ultrasound-like ADC stream, file replay.
//! * [`emulator`] — the device on real sockets (`rocelink emulate`).
//! * [`host`] — the host side: ECB client with HSB's retry and sequence behaviour, BOOTP
//!   enumeration and set-IP, and the verified frame receiver over rocelink's transport.
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod audio;
pub mod catalogue;
pub mod device;
pub mod emulator;
pub mod host;
pub mod imx274;
pub mod regs;
pub mod sensor;
pub mod sequencer;
