//! A camera stream for tests: what an HSB device's virtual port sends a receiver for
//! frames of [`Sensor::Pattern`], as packets (UC RDMA WRITE ONLY with real ICRCs, and a
//! metadata packet per frame) to deliver however a test likes — whole, with faults, in
//! segmented runs, replayed.

use rocelink_hsb::device::VpStream;
use rocelink_hsb::device::packetizer::{Packetizer, PacketizerOptions};
use rocelink_hsb::sensor::Sensor;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The stream, as plain data: [`Stream::to`] sets what every test must say, the rest are
/// the common test values and may be changed.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The device's address (the packets' source).
    pub dev: Ipv4Addr,
    /// The receiver's address and port.
    pub host: SocketAddrV4,
    /// The receiver's QP and R_Key (0x42, 0x4242).
    pub qp_rkey: (u32, u32),
    /// The distance between the ring's pages (the receiver's page size).
    pub page_stride: u64,
    /// Pages the device cycles through (2).
    pub pages: u32,
    /// Bytes of a frame.
    pub window: usize,
    /// Payload bytes per data packet (1408).
    pub payload: usize,
    /// The device's data source port (HSB's).
    pub src_port: u16,
    /// The first packet's PSN (100).
    pub first_psn: u32,
}

impl Stream {
    /// Frames of `window` bytes from `dev` to `host`, into pages `page_stride` apart.
    pub fn to(dev: Ipv4Addr, host: SocketAddrV4, page_stride: u64, window: usize) -> Stream {
        Stream {
            dev,
            host,
            qp_rkey: (0x42, 0x4242),
            page_stride,
            pages: 2,
            window,
            payload: 1408,
            src_port: rocelink_wire::hsb::DATA_SOURCE_PORT,
            first_psn: 100,
        }
    }

    /// The device's side of it.
    pub fn vp(&self) -> VpStream {
        VpStream {
            vp: 0,
            qp: self.qp_rkey.0,
            rkey: self.qp_rkey.1,
            base: 0,
            page_stride: self.page_stride,
            first_page: 0,
            pages: self.pages,
            window: self.window as u32,
            host: self.host,
            host_mac: rocelink_wire::bytes::Mac([0; 6]),
            md_disable: false,
            payload: self.payload,
            src_port: self.src_port,
            vlan: None,
            camera: None,
            coe: None,
        }
    }

    /// The packets of frames 0..`n`, frame by frame (one packetizer: the PSNs run on).
    pub fn frames(&self, n: u64) -> Vec<Vec<Vec<u8>>> {
        let mut p = Packetizer::new(
            self.vp(),
            self.dev,
            self.first_psn,
            PacketizerOptions::default(),
        );
        let mut buf = Vec::new();
        (0..n)
            .map(|k| {
                Sensor::Pattern.frame(k, self.window, &mut buf);
                let mut out = Vec::new();
                p.push(&buf, Some(0), (0, 0), &mut out);
                out
            })
            .collect()
    }

    /// The packets of frames 0..`n`, in order.
    pub fn packets(&self, n: u64) -> Vec<Vec<u8>> {
        self.frames(n).concat()
    }
}
