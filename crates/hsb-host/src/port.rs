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
use rocelink_runtime::driver::PUBLISH_EVERY;
use std::io;
use std::time::{Duration, Instant};

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
    Coe(Box<CoePort>),
}

/// A CoE receiver, and where its counters go while it runs (the RoCE receiver publishes
/// its own).
#[derive(Debug)]
pub(crate) struct CoePort {
    pub(crate) rx: CoeReceiver,
    /// The board, the link's name, and when the counters are next due there.
    publish: Option<(Board, String, Instant)>,
}

impl CoePort {
    pub(crate) fn new(rx: CoeReceiver) -> CoePort {
        CoePort { rx, publish: None }
    }

    fn link(&self, name: &str) -> Link {
        let mut l = Link::named(name, self.rx.ifname());
        l.set("rx_packets", self.rx.stats.datagrams);
        l
    }

    /// The counters to the board, about every [`PUBLISH_EVERY`] while frames are taken.
    fn publish_due(&mut self) {
        let now = Instant::now();
        if let Some((board, name, next)) = self.publish.as_mut()
            && now >= *next
        {
            *next = now + PUBLISH_EVERY;
            let (board, name) = (board.clone(), name.clone());
            board.set_link(self.link(&name));
        }
    }
}

impl PortReceiver {
    /// What setting up its socket noticed.
    pub(crate) fn notes(&self) -> &[String] {
        match self {
            PortReceiver::Roce(r) => r.notes(),
            PortReceiver::Coe(_) => &[],
        }
    }

    /// Publish its counters to `board` as link `name`, now and about every
    /// [`PUBLISH_EVERY`] while frames are taken.
    pub(crate) fn publish(&mut self, board: Board, name: &str) {
        match self {
            PortReceiver::Roce(r) => r.publish_as(board, name),
            PortReceiver::Coe(c) => {
                board.set_link(c.link(name));
                c.publish = Some((board, name.to_owned(), Instant::now() + PUBLISH_EVERY));
            }
        }
    }

    /// Tell the device to send this port's frames here.
    pub(crate) fn configure(&self, ctl: &mut Control) -> Result<(), EcbError> {
        match self {
            PortReceiver::Roce(r) => r.configure(ctl),
            PortReceiver::Coe(c) => c.rx.configure(ctl),
        }
    }

    /// Tell the device to stop this port's stream.
    pub(crate) fn stop(&self, ctl: &mut Control) -> Result<(), EcbError> {
        match self {
            PortReceiver::Roce(r) => r.stop(ctl),
            PortReceiver::Coe(c) => c.rx.stop(ctl),
        }
    }

    /// Its counters as the counters table shows them.
    pub(crate) fn link(&self, name: &str) -> Link {
        match self {
            PortReceiver::Roce(r) => r.link(name),
            PortReceiver::Coe(c) => c.link(name),
        }
    }

    /// The CoE counters (`None` for RoCE).
    pub(crate) fn coe(&self) -> Option<CoeCounts> {
        let PortReceiver::Coe(p) = self else {
            return None;
        };
        let (r, c) = (&p.rx, p.rx.coe_stats());
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
            PortReceiver::Coe(c) => {
                let f = c.rx.next_frame(timeout);
                c.publish_due();
                f
            }
        }
    }
    fn frame_data(&self, f: &FrameReport) -> &[u8] {
        match self {
            PortReceiver::Roce(r) => r.frame_data(f),
            PortReceiver::Coe(c) => c.rx.frame_data(f),
        }
    }
    fn stats(&self) -> ReceiverStats {
        match self {
            PortReceiver::Roce(r) => r.stats,
            PortReceiver::Coe(c) => c.rx.stats,
        }
    }
    fn refusals(&self) -> String {
        match self {
            PortReceiver::Roce(r) => FrameReceiver::refusals(&**r),
            PortReceiver::Coe(c) => c.rx.refusals(),
        }
    }
    fn lend(&self, f: &FrameReport) -> Option<rocelink_hsb::host::LentFrame> {
        match self {
            PortReceiver::Roce(r) => r.lend(f),
            PortReceiver::Coe(_) => None,
        }
    }
}
