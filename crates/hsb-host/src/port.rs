//! A virtual port's receiver as the session sees it: RoCE (a UDP socket or AF_XDP) or
//! Camera over Ethernet (an AF_PACKET socket or AF_XDP steered EtherType 0x22F0). Both
//! are told over ECB where to send, are stopped the same way, and hand frames to the
//! same loop; only the counters they keep differ.

use rocelink_hsb::host::FrameReceiver;
use rocelink_hsb::host::coe_receiver::CoeReceiver;
use rocelink_hsb::host::control::{Control, EcbError};
use rocelink_hsb::host::receiver::FrameReport;
use rocelink_hsb::host::receiver::{Receiver, ReceiverStats};
use rocelink_runtime::counters::{Board, Link};
use std::io;
use std::time::Duration;

/// Camera over Ethernet instead of RoCE: the device is told to send raw IEEE 1722B frames
/// to this host's interface, as HSB's `configure_coe` does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Coe {
    /// The interface the frames arrive on (its MAC is where the device sends).
    pub ifname: String,
    /// The CoE channel, 0..=63 (HSB's examples use 1); other channels are ignored.
    pub channel: u8,
    /// Bytes per sensor line: the device marks a line end each time the next power of two
    /// is crossed (HSB passes the pixel width).
    pub line_bytes: u32,
}

impl Coe {
    /// Channel 1 on `ifname`, lines of 4096 bytes.
    pub fn on(ifname: &str) -> Coe {
        Coe {
            ifname: ifname.to_owned(),
            channel: 1,
            line_bytes: 4096,
        }
    }
}

/// What a CoE port counted beyond the frame counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CoeCounts {
    /// Packets of other channels or streams (ignored).
    pub other: u64,
    /// Frame ends too short for a metadata record.
    pub runts: u64,
    /// Packets whose offset and length fell outside the frame (refused, not written).
    pub out_of_bounds: u64,
    /// Frames the kernel dropped for want of buffer.
    pub kernel_drops: u64,
}

/// One virtual port's receiver.
#[derive(Debug)]
pub(crate) enum PortReceiver {
    Roce(Box<Receiver>),
    Coe(Box<CoeReceiver>),
}

impl PortReceiver {
    /// What setting up its socket noticed.
    pub(crate) fn notes(&self) -> &[String] {
        match self {
            PortReceiver::Roce(r) => r.notes(),
            PortReceiver::Coe(_) => &[],
        }
    }

    /// Publish its counters to `board` as link `name` (RoCE keeps them current while it
    /// runs; CoE has no transport counters and is published when it ends).
    pub(crate) fn publish(&mut self, board: Board, name: &str) {
        match self {
            PortReceiver::Roce(r) => r.publish_as(board, name),
            PortReceiver::Coe(_) => board.set_link(self.link(name)),
        }
    }

    /// Tell the device to send this port's frames here.
    pub(crate) fn configure(&self, ctl: &mut Control) -> Result<(), EcbError> {
        match self {
            PortReceiver::Roce(r) => r.configure(ctl),
            PortReceiver::Coe(r) => r.configure(ctl),
        }
    }

    /// Tell the device to stop this port's stream.
    pub(crate) fn stop(&self, ctl: &mut Control) -> Result<(), EcbError> {
        match self {
            PortReceiver::Roce(r) => r.stop(ctl),
            PortReceiver::Coe(r) => r.stop(ctl),
        }
    }

    /// Its counters as the counters table shows them.
    pub(crate) fn link(&self, name: &str) -> Link {
        match self {
            PortReceiver::Roce(r) => r.link(name),
            PortReceiver::Coe(r) => {
                let mut l = Link::named(name, r.ifname());
                l.set("rx_packets", r.stats.datagrams);
                l
            }
        }
    }

    /// The CoE counters (`None` for RoCE).
    pub(crate) fn coe(&self) -> Option<CoeCounts> {
        let PortReceiver::Coe(r) = self else {
            return None;
        };
        let c = r.coe_stats();
        Some(CoeCounts {
            other: c.other,
            runts: c.runts,
            out_of_bounds: c.out_of_bounds,
            kernel_drops: r.kernel_drops,
        })
    }
}

impl FrameReceiver for PortReceiver {
    fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>> {
        match self {
            PortReceiver::Roce(r) => r.next_frame(timeout),
            PortReceiver::Coe(r) => r.next_frame(timeout),
        }
    }
    fn frame_data(&self, f: &FrameReport) -> &[u8] {
        match self {
            PortReceiver::Roce(r) => r.frame_data(f),
            PortReceiver::Coe(r) => r.frame_data(f),
        }
    }
    fn stats(&self) -> ReceiverStats {
        match self {
            PortReceiver::Roce(r) => r.stats,
            PortReceiver::Coe(r) => r.stats,
        }
    }
    fn refusals(&self) -> String {
        match self {
            PortReceiver::Roce(r) => FrameReceiver::refusals(&**r),
            PortReceiver::Coe(r) => r.refusals(),
        }
    }
    fn lend(&self, f: &FrameReport) -> Option<rocelink_hsb::host::LentFrame> {
        match self {
            PortReceiver::Roce(r) => r.lend(f),
            PortReceiver::Coe(_) => None,
        }
    }
}
