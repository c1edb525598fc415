//! The host side of HSB.
//!
//! * [`control::Control`] — the ECB client with HSB's timing: 0.5 s per transaction, a resend
//!   every 0.1 s with the same sequence number and SEQUENCE_CHECK cleared, sequence numbers
//!   from 0x100, the first transaction unchecked (which resets the device's latch).
//! * [`board`] — reset, PTP set-up and sync check, payload for an MTU.
//! * [`enumerate`] — listening for BOOTP enumeration on 12267 and assigning IPs.
//! * [`i2c::I2c`] — I2C through the device's sequencer, as HSB's host drives it.
//! * [`imx274::Camera`] — the IMX274 driver: HSB's three modes, start and stop.
//! * [`receiver::Receiver`] — the verified frame receiver over rocelink's transport.
//! * [`coe::CoeAssembler`], [`coe_receiver::CoeReceiver`] — Camera-over-Ethernet frames
//!   reassembled and verified, from an AF_PACKET socket.
//! * [`FrameReceiver`] — what both receivers offer a frame pipeline.
//! * [`sensor_tx::SensorTx`] — data to a sensor's transmit port (HSB's audio players).

pub mod board;
pub mod bring_up;
pub mod coe;
pub mod coe_receiver;
pub mod control;
pub mod enumerate;
mod frame_receiver;
pub mod i2c;
pub mod imx274;
mod lent;
mod predict;
mod program;
pub mod receiver;
pub mod sensor_tx;
mod tracker;

/// What the landing receive did with the stream's segments.
pub use rocelink_runtime::LandingStats as FastStats;

pub use frame_receiver::FrameReceiver;
pub use lent::LentFrame;

/// Which ring page a VA is on, and where in it: the last page found is kept, so a stream
/// of packets into one page costs no division (a 64-bit divide per packet showed in the
/// receive profile; the page size is the frame rounded up, rarely a power of two).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageFinder {
    size: u64,
    base: u64,
    page: u64,
}

impl PageFinder {
    pub(crate) fn new(page_size: u64) -> PageFinder {
        PageFinder {
            size: page_size.max(1),
            base: 0,
            page: 0,
        }
    }

    /// `(va / page_size, va % page_size)`.
    #[inline]
    pub(crate) fn locate(&mut self, va: u64) -> (u64, u64) {
        let off = va.wrapping_sub(self.base);
        if off < self.size {
            return (self.page, off);
        }
        self.page = va / self.size;
        self.base = self.page * self.size;
        (self.page, va - self.base)
    }
}

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

#[cfg(test)]
mod tests {
    use super::PageFinder;

    #[test]
    fn page_finder_agrees_with_division() {
        let size = 10_406_576u64.next_multiple_of(128) + 128;
        let mut f = PageFinder::new(size);
        let mut rng = rocelink_transport::sim::Rng::new(7);
        for i in 0..10_000u64 {
            // runs within a page, jumps between pages, and page edges
            let x = rng.next_u64();
            let va = match i % 4 {
                0 => x % (size * 8),
                1 => (x % 8) * size,
                2 => (x % 8 + 1) * size - 1,
                _ => (x % (size * 8)) / 2,
            };
            assert_eq!(f.locate(va), (va / size, va % size), "va {va}");
        }
    }
}
