//! The host side of HSB.
//!
//! * [`control::Control`] — the ECB client with HSB's timing: 0.5 s per transaction, a resend
//!   every 0.1 s with the same sequence number and SEQUENCE_CHECK cleared, sequence numbers
//!   from 0x100, the first transaction unchecked (which resets the device's latch).
//! * [`enumerate`] — listening for BOOTP enumeration on 12267 and assigning IPs.
//! * [`receiver::Receiver`] — the verified frame receiver over rocelink's transport.

pub mod control;
pub mod enumerate;
pub mod receiver;
