//! IMS streaming protocol (seed `001`): the status channel packet, the ACK/NACK packet of
//! the data channel, the 4-bit / 6-bit image mappings with their CRC32C header, and how a
//! sender marks a bad frame or packet on RoCE ([`marks`]).
//!
//! All 32-bit words are big-endian ("the byte order is big endian like on most network
//! protocols", §4.3).

pub mod ack;
pub mod image;
pub mod marks;
pub mod status;

pub use ack::{AckRepr, AckType, Events, SenderAction};
pub use image::{ImageGeometry, PixelDepth};
pub use status::{Method, StatusRepr};
