//! Holoscan Sensor Bridge (HSB) formats, byte-compatible with deployed devices
//! (HSB IP 0x2602+, and the older 0x2510 immediate layout where selected).
//!
//! * [`metadata`] — the 128-byte frame-end record (big-endian as devices send it; the
//!   little-endian layout of the dataplane document selectable), both immediate layouts,
//!   and the frame CRC (CRC-32/JAMCRC).
//! * [`ecb`] — Ethernet Control Bus requests and responses (UDP 8192).
//! * [`bootp`] — BOOTP v2 enumeration requests (12268 → 12267) and the set-IP reply.
//! * [`event`] — async event messages (from UDP 8432).
//! * [`coe`] — Camera over Ethernet (IEEE 1722B, EtherType 0x22F0) headers and the
//!   `DP_QP` value that selects it.
//! * [`stx`] — sensor TX: which packets reach a sensor's transmit port, and HSB's Linux
//!   audio player's packet.

pub mod bootp;
pub mod coe;
pub mod ecb;
pub mod event;
pub mod metadata;
pub mod stx;

/// Device ECB (control) port.
pub const CONTROL_PORT: u16 = 8192;
/// Host port that listens for BOOTP enumeration.
pub const BOOTP_HOST_PORT: u16 = 12267;
/// Device port BOOTP is sent from (and replies are sent to).
pub const BOOTP_DEVICE_PORT: u16 = 12268;
/// Device UDP source port of data packets (`DATA_SOURCE_UDP_PORT`).
pub const DATA_SOURCE_PORT: u16 = 12288;
/// Device UDP source port of async event messages.
pub const EVENT_SOURCE_PORT: u16 = 8432;
/// Sensor data is packetised in units of this many bytes.
pub const PAGE_SIZE: usize = 128;
