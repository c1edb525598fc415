//! What a host session tells its front end on the way up.

use std::fmt;
use std::net::SocketAddr;

/// What the session did on the way up, for the front end to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// A virtual port's data channel, as the device is told.
    Port {
        /// The device's HSB IP version.
        version: u32,
        /// The virtual port.
        vp: u32,
        /// Its QP.
        qpn: u32,
        /// Its R_Key.
        rkey: u32,
        /// Where it receives.
        local: SocketAddr,
    },
    /// A virtual port's Camera over Ethernet channel, as the device is told.
    CoePort {
        /// The device's HSB IP version.
        version: u32,
        /// The virtual port.
        vp: u32,
        /// The CoE channel.
        channel: u8,
        /// The interface the frames arrive on.
        ifname: String,
        /// Its MAC, where the device sends.
        mac: [u8; 6],
    },
    /// What a virtual port's socket setup noticed (a buffer capped below what was asked,
    /// with the setting that raises it).
    Socket {
        /// The virtual port.
        vp: u32,
        /// What was noticed.
        note: String,
    },
    /// PTP reported synchronised.
    PtpSynchronised,
    /// A camera is streaming.
    Camera {
        /// Which.
        index: usize,
        /// In which mode.
        sensor: String,
        /// The I2C transactions its bring-up took.
        transactions: u64,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Port {
                version,
                vp,
                qpn,
                rkey,
                local,
            } => write!(
                f,
                "HSB IP {:#06x}; vp {vp} QP {qpn:#x} R_Key {rkey:#x} at {local}",
                version & 0xFFFF
            ),
            Note::CoePort {
                version,
                vp,
                channel,
                ifname,
                mac,
            } => write!(
                f,
                "HSB IP {:#06x}; vp {vp} CoE channel {channel} to {ifname} ({})",
                version & 0xFFFF,
                rocelink_wire::bytes::Mac(*mac)
            ),
            Note::Socket { vp, note } => write!(f, "note: vp {vp}: {note}"),
            Note::PtpSynchronised => write!(f, "PTP synchronised"),
            Note::Camera {
                index,
                sensor,
                transactions,
            } => write!(
                f,
                "IMX274 {index} streaming {sensor} ({transactions} I2C transactions)"
            ),
        }
    }
}
