//! Board-level operations of HSB's host: reset, PTP set-up and the synchronisation check,
//! and the packet size for a link MTU.

use super::control::{Control, EcbError};
use super::enumerate;
use crate::regs;
use std::net::{IpAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Why a board operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BoardError {
    /// PTP did not report synchronised in time.
    #[error(
        "PTP is not synchronised after {waited:?} (register 0x188 = {stat:#x}, wants the low \
         four bits set): is a PTP master (ptp4l) running on the device's network?"
    )]
    NotSynchronised {
        /// Last value of the sync status register.
        stat: u32,
        /// How long the host polled.
        waited: Duration,
    },
    /// The device did not announce itself after a reset.
    #[error("{device} did not announce itself (BOOTP) within {waited:?} after the reset")]
    NotBack {
        /// Device.
        device: IpAddr,
        /// How long the host listened.
        waited: Duration,
    },
    /// A register access failed.
    #[error(transparent)]
    Ecb(#[from] EcbError),
    /// A socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The PTP writes of HSB's start of session (`configure_hsb`): 0x110←2, 0x114←2, 0x118←3,
/// delay asymmetry 0x10C←0x33 ns, then 0x104←3 (enable).
pub fn configure_ptp(ctl: &mut Control) -> Result<(), EcbError> {
    for (a, v) in [
        (0x110, 2),
        (0x114, 2),
        (0x118, 3),
        (0x10C, 0x33),
        (0x104, 3),
    ] {
        ctl.write(a, v)?;
    }
    Ok(())
}

/// Poll the sync status (0x188) every 100 ms until its low four bits are set (HSB's
/// `ptp_synchronize`), for at most `timeout`.
pub fn ptp_synchronize(ctl: &mut Control, timeout: Duration) -> Result<(), BoardError> {
    let start = Instant::now();
    loop {
        let stat = ctl.read(regs::PTP_SYNC_STAT)?;
        if stat & 0xF == 0xF {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(BoardError::NotSynchronised {
                stat,
                waited: start.elapsed(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reset the board as HSB's host does (0x8←0, 100 ms, 0x8←3, then 0x4←0x8 without an
/// acknowledgement), then wait on `bootp` (a listener on UDP 12267) until the device
/// announces itself again. Returns how long it took to come back.
pub fn reset(
    ctl: &mut Control,
    bootp: &UdpSocket,
    timeout: Duration,
) -> Result<Duration, BoardError> {
    let device = ctl.peer().ip();
    ctl.write(regs::RESET_AUX, 0)?;
    std::thread::sleep(Duration::from_millis(100));
    ctl.write(regs::RESET_AUX, 3)?;
    // announcements sent before the reset do not count
    bootp.set_nonblocking(true)?;
    let mut buf = [0u8; 2048];
    while bootp.recv_from(&mut buf).is_ok() {}
    bootp.set_nonblocking(false)?;
    let start = Instant::now();
    ctl.write_unacknowledged(regs::RESET_CTRL, 0x8)?;
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(BoardError::NotBack {
                device,
                waited: start.elapsed(),
            });
        }
        let found = enumerate::listen(bootp, left, Some(1))?;
        if found.iter().any(|f| f.ip() == device) {
            return Ok(start.elapsed());
        }
    }
}

/// Payload bytes per packet for a link MTU, HSB's rule: `MTU − 74` (Ethernet, IPv4, UDP,
/// BTH, RETH, ICRC) rounded down to a multiple of 128. 1500 → 1408, 4096 → 3968,
/// 9000 → 8832.
pub const fn payload_for_mtu(mtu: u32) -> u32 {
    regs::packet_pages_for_mtu(mtu) * 128
}

#[cfg(test)]
mod tests {
    #[test]
    fn payload_follows_hsbs_rule() {
        assert_eq!(super::payload_for_mtu(1500), 1408);
        assert_eq!(super::payload_for_mtu(4096), 3968);
        assert_eq!(super::payload_for_mtu(9000), 8832);
    }
}
