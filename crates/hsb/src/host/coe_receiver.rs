//! The CoE receiver: an AF_PACKET socket for EtherType 0x22F0 on one interface (as HSB's
//! `LinuxCoeReceiver` takes them), the frames reassembled and verified by
//! [`CoeAssembler`], and the device's data channel programmed for CoE over ECB as HSB's
//! `configure_coe` does.

use super::FrameReceiver;
use super::coe::{CoeAssembler, CoeStats};
use super::control::{Control, EcbError};
use super::tracker::{FrameReport, ReceiverStats};
use crate::regs::{self, hif, vp};
use rocelink_io::packet::PacketSocket;
use rocelink_wire::ethernet::{self, ethertype};
use rocelink_wire::hsb::coe;
use rocelink_wire::hsb::metadata::Endian;
use std::io;
use std::time::{Duration, Instant};

/// CoE receiver settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CoeReceiverConfig {
    /// The interface the device's frames arrive on.
    pub ifname: String,
    /// CoE channel (0..=63) the device is told to send on; other channels are ignored.
    pub channel: u8,
    /// Frame (sensor window) size in bytes.
    pub frame_size: usize,
    /// Bytes per sensor line: the device flags a line end each time the next power of
    /// two is crossed (HSB passes the pixel width).
    pub line_bytes: u32,
    /// Link MTU used to size packets: `(mtu − 46) / 128` pages of payload.
    pub mtu: u32,
    /// Virtual port.
    pub vp: u32,
    /// Data plane (Ethernet port) of the device.
    pub data_plane: u32,
    /// Metadata byte order.
    pub endian: Endian,
    /// Socket receive buffer.
    pub recv_buffer: usize,
    /// Take the frames from this AF_XDP port (opened with `XdpRole::Raw(0x22F0)` on the
    /// interface) instead of an AF_PACKET socket: in place, without the kernel's skb path.
    pub xdp: Option<rocelink_runtime::xdp::XdpPort>,
}

impl CoeReceiverConfig {
    /// Receive `frame_size`-byte frames on `ifname`, channel 1 (HSB's examples), MTU 1500.
    pub fn new(ifname: &str, frame_size: usize) -> CoeReceiverConfig {
        CoeReceiverConfig {
            ifname: ifname.to_owned(),
            channel: 1,
            frame_size,
            line_bytes: 4096,
            mtu: 1500,
            vp: 0,
            data_plane: 0,
            endian: Endian::Big,
            recv_buffer: 32 << 20,
            xdp: None,
        }
    }
}

/// Payload pages per CoE packet for a link MTU (HSB: overhead 46).
pub const fn coe_pages_for_mtu(mtu: u32) -> u32 {
    mtu.saturating_sub(coe::OVERHEAD as u32) / 128
}

/// Where the frames come from.
#[derive(Debug)]
enum Source {
    Packet(PacketSocket),
    Xdp(rocelink_runtime::xdp::XdpPort),
}

/// The receiver (see the module documentation).
#[derive(Debug)]
pub struct CoeReceiver {
    cfg: CoeReceiverConfig,
    sock: Source,
    mac: [u8; 6],
    asm: CoeAssembler,
    buf: Vec<u8>,
    /// Frames the kernel dropped for want of socket buffer.
    pub kernel_drops: u64,
    /// Counters.
    pub stats: ReceiverStats,
}

impl CoeReceiver {
    /// Open the socket on the interface. Errors name the interface and what is missing.
    pub fn new(cfg: CoeReceiverConfig) -> io::Result<CoeReceiver> {
        if cfg.channel > coe::MAX_CHANNEL {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CoE channel {} is above 63", cfg.channel),
            ));
        }
        if coe_pages_for_mtu(cfg.mtu) == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} leaves no room for CoE payload", cfg.mtu),
            ));
        }
        let mac = rocelink_io::xdp::iface_mac(&cfg.ifname)?;
        let sock = match &cfg.xdp {
            Some(port) => Source::Xdp(port.clone()),
            None => Source::Packet(PacketSocket::open(
                &cfg.ifname,
                ethertype::IEEE1722,
                cfg.recv_buffer,
            )?),
        };
        Ok(CoeReceiver {
            asm: CoeAssembler::new(cfg.channel, cfg.frame_size, cfg.endian),
            buf: vec![0u8; 16 << 10],
            cfg,
            sock,
            mac,
            kernel_drops: 0,
            stats: ReceiverStats::default(),
        })
    }

    /// The interface's MAC (where the device is told to send).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The CoE channel it takes.
    pub fn channel(&self) -> u8 {
        self.cfg.channel
    }

    /// The interface it receives on.
    pub fn ifname(&self) -> &str {
        &self.cfg.ifname
    }

    /// The CoE counters (other channels, runts, refused offsets).
    pub fn coe_stats(&self) -> CoeStats {
        self.asm.coe
    }

    /// Program the device's data channel for CoE as HSB's `configure_coe` does: disable
    /// the VP, packet size for the MTU, frame size, host MAC, `DP_QP` with CoE enabled,
    /// the channel and the line threshold, then enable the VP.
    pub fn configure(&self, ctl: &mut Control) -> Result<(), EcbError> {
        let c = &self.cfg;
        let mask = 1u32 << c.vp;
        let m = self.mac;
        let vpr = |off| regs::vp_reg(c.vp, off);
        ctl.and(regs::hif_reg(c.data_plane, hif::VP_MASK), !mask)?;
        ctl.write_block(&[
            (
                regs::hif_reg(c.data_plane, hif::PACKET_SIZE),
                coe_pages_for_mtu(c.mtu),
            ),
            (
                regs::hif_reg(c.data_plane, hif::PACKET_UDP_PORT),
                u32::from(rocelink_wire::hsb::DATA_SOURCE_PORT),
            ),
            (vpr(vp::BUFFER_LENGTH), c.frame_size as u32),
            (
                vpr(vp::HOST_MAC_LOW),
                u32::from_be_bytes([m[2], m[3], m[4], m[5]]),
            ),
            (
                vpr(vp::HOST_MAC_HIGH),
                u32::from_be_bytes([0, 0, m[0], m[1]]),
            ),
            (
                vpr(vp::QP),
                coe::qp_register(c.channel, coe::line_threshold_log2(c.line_bytes)),
            ),
        ])?;
        ctl.or(regs::hif_reg(c.data_plane, hif::VP_MASK), mask)
    }

    /// Stop the device's stream (clear the VP's enable bit).
    pub fn stop(&self, ctl: &mut Control) -> Result<(), EcbError> {
        ctl.and(
            regs::hif_reg(self.cfg.data_plane, hif::VP_MASK),
            !(1u32 << self.cfg.vp),
        )
    }

    /// Wait up to `timeout` for the next frame.
    pub fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>> {
        let deadline = Instant::now() + timeout;
        let f = loop {
            if let Some(f) = self.asm.poll_frame() {
                break Some(f);
            }
            let got = match &self.sock {
                Source::Packet(sock) => match sock.recv(&mut self.buf)? {
                    Some(n) => {
                        let n = n.min(self.buf.len());
                        if n > ethernet::HEADER_LEN
                            && self.buf[12..14] == ethertype::IEEE1722.to_be_bytes()
                        {
                            self.asm.handle(&self.buf[ethernet::HEADER_LEN..n]);
                        }
                        1
                    }
                    None => 0,
                },
                Source::Xdp(port) => {
                    let asm = &mut self.asm;
                    // one at a time: a frame that completes is reported before the next lands
                    port.recv_other_with(1, &mut |et, payload| {
                        if et == ethertype::IEEE1722 {
                            asm.handle(payload);
                        }
                    })?
                }
            };
            if got == 0 {
                let now = Instant::now();
                if now >= deadline {
                    break None;
                }
                match &self.sock {
                    Source::Packet(sock) => sock.wait_readable(Some(deadline - now))?,
                    Source::Xdp(port) => port.wait_readable(Some(deadline - now))?,
                };
            }
        };
        self.kernel_drops = match &self.sock {
            Source::Packet(sock) => self.kernel_drops + sock.drops().unwrap_or(0),
            Source::Xdp(port) => port.xsk_stats().1.map_or(self.kernel_drops, |k| {
                k.rx_dropped + k.rx_ring_full + k.rx_fill_ring_empty_descs
            }),
        };
        self.stats = self.asm.stats;
        Ok(f)
    }

    /// The bytes of a reported frame (valid until the next call of `next_frame`).
    pub fn frame_data(&self, f: &FrameReport) -> &[u8] {
        self.asm.frame_data(f)
    }

    /// Why nothing arrived: what was received and refused.
    pub fn refusals(&self) -> String {
        let s = &self.asm.stats;
        let c = &self.asm.coe;
        if s.datagrams == 0 && c.other == 0 {
            return format!("no CoE frame arrived on {}", self.cfg.ifname);
        }
        format!(
            "{} CoE packets for channel {} arrived ({} for other channels or streams, {} outside the frame, {} runt frame ends, {} dropped by the kernel)",
            s.datagrams, self.cfg.channel, c.other, c.out_of_bounds, c.runts, self.kernel_drops
        )
    }
}

impl FrameReceiver for CoeReceiver {
    fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>> {
        CoeReceiver::next_frame(self, timeout)
    }
    fn frame_data(&self, f: &FrameReport) -> &[u8] {
        CoeReceiver::frame_data(self, f)
    }
    fn stats(&self) -> ReceiverStats {
        self.stats
    }
    fn refusals(&self) -> String {
        CoeReceiver::refusals(self)
    }
}
