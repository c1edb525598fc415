//! The host side of HSB.
//!
//! * [`control::Control`] — the ECB client with HSB's timing: 0.5 s per transaction, a resend
//!   every 0.1 s with the same sequence number and SEQUENCE_CHECK cleared, sequence numbers
//!   from 0x100, the first transaction unchecked (which resets the device's latch).
//! * [`enumerate`] — listening for BOOTP enumeration on 12267 and assigning IPs.
//! * [`receiver::Receiver`] — the verified frame receiver over rocelink's transport.

pub mod control;
pub mod enumerate;
mod fast;
pub mod receiver;
mod tracker;

pub use fast::FastStats;

/// Receive one datagram on `sock`, waiting at most until `deadline`; `None` when it passes.
pub(crate) fn recv_until(
    sock: &std::net::UdpSocket,
    deadline: std::time::Instant,
    buf: &mut [u8],
) -> std::io::Result<Option<(usize, std::net::SocketAddr)>> {
    let wait = deadline.saturating_duration_since(std::time::Instant::now());
    sock.set_read_timeout(Some(wait.max(std::time::Duration::from_millis(1))))?;
    match sock.recv_from(buf) {
        Ok(x) => Ok(Some(x)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
