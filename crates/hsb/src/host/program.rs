//! Programming a device's data channel for a [`Receiver`]: what HSB's host writes over ECB
//! before a stream starts, and to stop it.

use super::control::{Control, EcbError};
use super::receiver::Receiver;
use crate::regs::{self, hif, vp};
use rocelink_wire::bytes::Mac;
use std::io;
use std::net::IpAddr;

impl Receiver {
    /// Program the device's data channel over ECB as HSB's host does: disable the VP,
    /// set packet size and source port, QP, R_Key, ring base 0, page stride, pages, frame
    /// size, host MAC/IP/port (with `md_disable`), then enable the VP.
    pub fn configure(&self, ctl: &mut Control) -> Result<(), EcbError> {
        let c = self.config();
        let mask = 1u32 << c.vp;
        let local = self.local_addr();
        let IpAddr::V4(host_ip) = local.ip() else {
            return Err(EcbError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "HSB data channels are IPv4",
            )));
        };
        let mac = rocelink_io::net::mac_for_ip(local.ip()).unwrap_or(Mac([0; 6]));
        let m = mac.0;
        let vpr = |off| regs::vp_reg(c.vp, off);
        ctl.and(regs::hif_reg(c.data_plane, hif::VP_MASK), !mask)?;
        let port = u32::from(local.port()) | if c.md_disable { regs::MD_DISABLE } else { 0 };
        ctl.write_block(&[
            (
                regs::hif_reg(c.data_plane, hif::PACKET_SIZE),
                regs::packet_pages_for_mtu(c.mtu),
            ),
            (
                regs::hif_reg(c.data_plane, hif::PACKET_UDP_PORT),
                u32::from(rocelink_wire::hsb::DATA_SOURCE_PORT),
            ),
            (vpr(vp::QP), self.qpn()),
            (vpr(vp::RKEY), self.rkey()),
            (vpr(vp::PAGE_LSB), 0),
            (vpr(vp::PAGE_MSB), 0),
            (vpr(vp::PAGE_INC), (self.page_size() >> 7) as u32),
            (vpr(vp::MAX_BUFF), c.pages - 1),
            (vpr(vp::BUFFER_LENGTH), c.frame_size as u32),
            (
                vpr(vp::HOST_MAC_LOW),
                u32::from_be_bytes([m[2], m[3], m[4], m[5]]),
            ),
            (
                vpr(vp::HOST_MAC_HIGH),
                u32::from_be_bytes([0, 0, m[0], m[1]]),
            ),
            (vpr(vp::HOST_IP), u32::from(host_ip)),
            (vpr(vp::HOST_UDP_PORT), port),
        ])?;
        ctl.or(regs::hif_reg(c.data_plane, hif::VP_MASK), mask)
    }

    /// Stop the device's stream (clear the VP's enable bit).
    pub fn stop(&self, ctl: &mut Control) -> Result<(), EcbError> {
        ctl.and(
            regs::hif_reg(self.config().data_plane, hif::VP_MASK),
            !(1u32 << self.config().vp),
        )
    }
}
