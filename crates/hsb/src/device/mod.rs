//! The emulated device, sans-IO: register file, ECB server with the FPGA's sequence-check
//! semantics, BOOTP enumeration and set-IP, and the streaming configuration the host
//! programs. [`crate::emulator`] puts sockets and a clock around it.

mod apb;
pub mod coe;
pub mod i2c;
pub mod imx274;
pub mod packetizer;
pub mod sensor_tx;
pub mod window;

use crate::regs::{self, hif, vp};
use crate::sensor::Imx274Mode;
use apb::i2c_offset;
use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::bootp::{self, EnumerationRepr, SetIpRepr, VendorV2};
use rocelink_wire::hsb::ecb::{self, Command, Status};
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceConfig {
    /// Current IP (the BOOTP set-IP reply changes it).
    pub ip: Ipv4Addr,
    /// MAC address.
    pub mac: Mac,
    /// HSB IP version reported at 0x80 and in BOOTP (0x2602+ layout).
    pub hsb_ip_version: u16,
    /// FPGA build date at 0x84.
    pub fpga_date: u32,
    /// Board UUID (BOOTP).
    pub uuid: [u8; 16],
    /// Serial number (BOOTP).
    pub serial: [u8; 7],
    /// FPGA CRC (BOOTP).
    pub fpga_crc: u16,
    /// Ethernet port index (BOOTP `data_plane`).
    pub data_plane: u8,
    /// Virtual ports (sensor streams) this device has.
    pub virtual_ports: u32,
    /// Latched-sequence trailer of ECB replies (FPGA: 2 bytes).
    pub trailer: ecb::Trailer,
    /// Whether to honour SEQUENCE_CHECK (the FPGA does; HSB's own emulator does not).
    pub sequence_check: bool,
    /// The largest sensor window (BUFFER_LENGTH) the device streams, in bytes: a virtual
    /// port programmed with a larger one stays idle, so no register value makes the
    /// device allocate without bound.
    pub max_window: u32,
    /// IMX274 cameras on the camera I2C bus (behind HSB's expander; camera `i` feeds
    /// virtual port `i`). With cameras, a virtual port streams only while its camera does,
    /// frames of the camera's mode; with none (the default), an enabled and configured
    /// virtual port streams the emulator's sensor at once.
    pub cameras: usize,
}

/// The largest payload per packet the device sends: that of a 9000-byte MTU (8832 bytes,
/// HSB's rule), whatever DP_PACKET_SIZE says.
pub const MAX_PAYLOAD: usize = 8832;

/// Default [`DeviceConfig::max_window`]: 256 MiB, twenty times a 4K RAW12 frame.
pub const MAX_WINDOW: u32 = 256 << 20;

impl DeviceConfig {
    /// An HSB 0x2606 device at `ip` with HSB's emulator identity (UUID, serial, CRC).
    pub fn new(ip: Ipv4Addr) -> DeviceConfig {
        let o = ip.octets();
        DeviceConfig {
            ip,
            mac: Mac([0x02, 0x48, o[0], o[1], o[2], o[3]]),
            hsb_ip_version: 0x2606,
            fpga_date: 0x2026_0722,
            uuid: [
                0x16, 0xaf, 0x13, 0x9b, 0x9d, 0x14, 0x48, 0x2f, 0x98, 0x05, 0x3f, 0xeb, 0x72, 0xae,
                0x0c, 0xec,
            ],
            serial: [3, 1, 4, 1, 5, 9, 3],
            fpga_crc: 0x5AA5,
            data_plane: 0,
            virtual_ports: 2,
            trailer: ecb::Trailer::Two,
            sequence_check: true,
            max_window: MAX_WINDOW,
            cameras: 0,
        }
    }
}

/// ECB counters of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EcbStats {
    /// Requests handled.
    pub requests: u64,
    /// Replies sent.
    pub replies: u64,
    /// Requests refused with a non-zero status.
    pub errors: u64,
    /// Requests too short to answer (dropped).
    pub runts: u64,
    /// SEQUENCE_CHECK failures.
    pub sequence_failures: u64,
    /// BOOTP packets ignored (garbage, other MAC).
    pub bootp_ignored: u64,
    /// Sequencer programs run to their DONE.
    pub programs: u64,
    /// Sequencer programs stopped early (poll timeout, no DONE, bad opcode).
    pub program_errors: u64,
    /// Resets taken.
    pub resets: u64,
}

/// The streaming configuration of one enabled virtual port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VpStream {
    /// Virtual port.
    pub vp: u32,
    /// Destination QP.
    pub qp: u32,
    /// R_Key.
    pub rkey: u32,
    /// Buffer base VA (page 0).
    pub base: u64,
    /// Bytes between frame buffers.
    pub page_stride: u64,
    /// First page.
    pub first_page: u32,
    /// Number of pages in the ring.
    pub pages: u32,
    /// Sensor window (frame) size in bytes.
    pub window: u32,
    /// Where packets go.
    pub host: SocketAddrV4,
    /// Host MAC (for raw-Ethernet senders).
    pub host_mac: Mac,
    /// No separate metadata packet: the last data packet carries the immediate.
    pub md_disable: bool,
    /// Payload bytes per data packet.
    pub payload: usize,
    /// UDP source port of data packets.
    pub src_port: u16,
    /// 802.1Q tag, if enabled: (PCP, DEI, VID).
    pub vlan: Option<(u8, bool, u16)>,
    /// The mode of the camera feeding this port, on a device with cameras.
    pub camera: Option<Imx274Mode>,
    /// Camera over Ethernet selected (`DP_QP` bit 24): (channel, log2 of the line
    /// threshold). Packets then go to `host_mac` as raw Ethernet.
    pub coe: Option<(u8, u8)>,
}

/// The device.
#[derive(Debug)]
pub struct DeviceCore {
    cfg: DeviceConfig,
    regs: HashMap<u32, u32>,
    latched: u16,
    /// ECB counters.
    pub stats: EcbStats,
    bootp_seq: u16,
    /// Data packets sent (BOOTP's packet counter, 24 bits).
    pub tx_packets: u32,
    levels: u32,
    events: Vec<(Vec<u8>, SocketAddrV4)>,
    /// The I2C controller and the cameras on it.
    pub i2c: i2c::I2cController,
    programs: VecDeque<u32>,
    running: bool,
    ptp_synced: bool,
    reset_taken: bool,
}

impl DeviceCore {
    /// A device in its reset state.
    pub fn new(cfg: DeviceConfig) -> DeviceCore {
        let cameras = cfg.cameras;
        let mut d = DeviceCore {
            cfg,
            regs: HashMap::new(),
            latched: 0,
            stats: EcbStats::default(),
            bootp_seq: 0,
            tx_packets: 0,
            levels: 0,
            events: Vec::new(),
            i2c: i2c::I2cController::new(cameras),
            programs: VecDeque::new(),
            running: false,
            ptp_synced: true,
            reset_taken: false,
        };
        d.reset_registers();
        d
    }

    fn reset_registers(&mut self) {
        self.regs.clear();
        self.i2c.reset();
        self.programs.clear();
        // HSB's null sequence, which the host points unused events at, is there after reset
        // on current firmware (`APB_RAM + 0x80`)
        for (i, w) in crate::sequencer::Program::new()
            .finish()
            .into_iter()
            .enumerate()
        {
            self.regs.insert(regs::apb::NULL_PROGRAM + 4 * i as u32, w);
        }
        self.regs
            .insert(regs::HSB_IP_VERSION, u32::from(self.cfg.hsb_ip_version));
        self.regs.insert(regs::FPGA_DATE, self.cfg.fpga_date);
        self.regs.insert(
            regs::CTRL_EVT_FPGA_UDP_PORT,
            u32::from(rocelink_wire::hsb::EVENT_SOURCE_PORT),
        );
        self.regs.insert(regs::PTP_SYNC_STAT, 0xF);
        for dp in 0..=u32::from(self.cfg.data_plane) {
            self.regs.insert(
                regs::hif_reg(dp, hif::PACKET_SIZE),
                regs::packet_pages_for_mtu(1500),
            );
            self.regs.insert(
                regs::hif_reg(dp, hif::PACKET_UDP_PORT),
                u32::from(rocelink_wire::hsb::DATA_SOURCE_PORT),
            );
        }
    }

    /// Configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// Current IP.
    pub fn ip(&self) -> Ipv4Addr {
        self.cfg.ip
    }

    /// The latched ECB sequence number.
    pub fn latched_sequence(&self) -> u16 {
        self.latched
    }

    /// Whether `addr` is a register this device decodes.
    pub fn valid(&self, addr: u32) -> bool {
        if addr & 3 != 0 {
            return false;
        }
        let in_block = |base: u32, len: u32| addr >= base && addr < base + len;
        let nvp = self.cfg.virtual_ports;
        let ndp = u32::from(self.cfg.data_plane) + 1;
        addr < 0x400
            || in_block(regs::VP_BASE, regs::VP_STRIDE * nvp)
            || in_block(regs::APB_RAM, regs::APB_RAM_LEN)
            || (0..ndp).any(|dp| in_block(regs::hif_reg(dp, 0), hif::LEN))
            || (0..nvp.max(ndp)).any(|s| in_block(regs::SIF_BASE + regs::SIF_STRIDE * s, 0x1000))
            || in_block(regs::CTRL_BUS_BASE, 0x400)
            || in_block(regs::VSYNC_BASE, 0x20)
            || in_block(regs::i2s::APB, regs::i2s::APB_LEN)
            || in_block(regs::i2s::TX_FIFO, regs::i2s::TX_FIFO_LEN)
            || addr == 0x5000_0000
            || addr == 0x6000_0000
    }

    /// Read a register (unwritten registers read 0).
    pub fn read(&self, addr: u32) -> Option<u32> {
        if !self.valid(addr) {
            return None;
        }
        if let Some(off) = i2c_offset(addr) {
            return Some(self.i2c.read(off));
        }
        if addr == regs::PTP_SYNC_STAT {
            return Some(if self.ptp_synced { 0xF } else { 0 });
        }
        if addr == regs::i2s::STAT0 {
            return Some(1); // clock locked
        }
        Some(self.regs.get(&addr).copied().unwrap_or(0))
    }

    /// Whether PTP reports synchronised (`0x188` reads 0xF; else 0).
    pub fn set_ptp_synced(&mut self, synced: bool) {
        self.ptp_synced = synced;
    }

    /// Whether a reset was taken since the last call (the emulator then announces itself
    /// at once and restarts its streams).
    pub fn take_reset(&mut self) -> bool {
        std::mem::take(&mut self.reset_taken)
    }

    /// Write a register; read-only ones keep their value. Returns false for an invalid address.
    pub fn write(&mut self, addr: u32, value: u32) -> bool {
        if !self.valid(addr) {
            return false;
        }
        if matches!(
            addr,
            regs::HSB_IP_VERSION | regs::FPGA_DATE | regs::PTP_SYNC_STAT | regs::i2s::STAT0
        ) {
            return true;
        }
        if addr == regs::RESET_CTRL && value & 0x8 != 0 {
            self.reset_registers();
            self.stats.resets += 1;
            self.reset_taken = true;
            return true;
        }
        if let Some(off) = i2c_offset(addr) {
            self.i2c.write(off, value);
            return true;
        }
        self.regs.insert(addr, value);
        if addr == regs::CTRL_EVT_SW_EVENT {
            self.set_level(
                rocelink_wire::hsb::event::bits::SW_EVENT,
                value & 1 != 0,
                (0, 0),
            );
        }
        true
    }

    /// Drive event input `bit` to `high` at PTP time `ptp`. An enabled rising or falling
    /// edge queues an async event message (see [`DeviceCore::take_events`]) to the host
    /// address and port of registers 0x218/0x21C.
    pub fn set_level(&mut self, bit: u32, high: bool, ptp: (u64, u32)) {
        let old = self.levels;
        let new = if high {
            old | (1 << bit)
        } else {
            old & !(1 << bit)
        };
        self.levels = new;
        let r = |a: u32| self.regs.get(&a).copied().unwrap_or(0);
        let active =
            (!old & new & r(regs::CTRL_EVT_RISING)) | (old & !new & r(regs::CTRL_EVT_FALLING));
        let port = (r(regs::CTRL_EVT_HOST_UDP_PORT) & 0xFFFF) as u16;
        let ip = Ipv4Addr::from(r(regs::CTRL_EVT_HOST_IP));
        // the sequencer runs the program of every enabled event that fired
        let apb = active & r(regs::APB_INTERRUPT_EN);
        let programs: Vec<u32> = (0..32)
            .filter(|b| apb & (1 << b) != 0)
            .map(|b| r(regs::apb::vector(b)))
            .collect();
        self.programs.extend(programs);
        self.run_programs();
        if active == 0 || port == 0 {
            return;
        }
        let mut b = vec![0u8; rocelink_wire::hsb::event::MESSAGE_LEN];
        rocelink_wire::hsb::event::EventRepr {
            interrupt_active: active,
            interrupt_state: new,
            seconds: ptp.0 & 0xFFFF_FFFF,
            nanoseconds: ptp.1,
        }
        .emit(&mut b);
        self.events.push((b, SocketAddrV4::new(ip, port)));
    }

    /// Event messages waiting to be sent, with their destinations.
    pub fn take_events(&mut self) -> Vec<(Vec<u8>, SocketAddrV4)> {
        std::mem::take(&mut self.events)
    }

    /// UDP source port of event messages (register 0x220, 8432).
    pub fn event_port(&self) -> u16 {
        (self
            .regs
            .get(&regs::CTRL_EVT_FPGA_UDP_PORT)
            .copied()
            .unwrap_or(8432)
            & 0xFFFF) as u16
    }

    /// Handle one ECB request; returns the reply to send, if any (the FPGA answers reads
    /// always and writes only with ACK_REQUEST; a request too short to name its sequence
    /// is dropped).
    pub fn handle_ecb(&mut self, req: &[u8]) -> Option<Vec<u8>> {
        self.stats.requests += 1;
        if req.len() < 4 {
            self.stats.runts += 1;
            return None;
        }
        let (cmd, flags, seq) = (
            Command(req[0]),
            req[1],
            u16::from_be_bytes([req[2], req[3]]),
        );
        let reply_wanted = flags & ecb::FLAG_ACK_REQUEST != 0 || cmd.is_read();
        let (status, ops) = self.execute(cmd, flags, seq, req);
        if status == Status::SUCCESS {
            self.latched = seq;
        } else {
            self.stats.errors += 1;
        }
        if !reply_wanted {
            return None;
        }
        self.stats.replies += 1;
        let command = if status == Status::INVALID_CMD {
            cmd.0
        } else {
            cmd.response()
        };
        let mut out = Vec::with_capacity(8 + 8 * ops.len());
        ecb::ResponseHeader {
            command,
            flags,
            sequence: seq,
            status,
        }
        .emit(&ops, self.latched, self.cfg.trailer, &mut out);
        Some(out)
    }

    fn execute(
        &mut self,
        cmd: Command,
        flags: u8,
        seq: u16,
        req: &[u8],
    ) -> (Status, Vec<(u32, u32)>) {
        if flags & !(ecb::FLAG_ACK_REQUEST | ecb::FLAG_SEQUENCE_CHECK) != 0 {
            return (Status::INVALID_FLAGS, vec![]);
        }
        if !cmd.is_supported() {
            return (Status::INVALID_CMD, vec![]);
        }
        if self.cfg.sequence_check
            && flags & ecb::FLAG_SEQUENCE_CHECK != 0
            && seq != self.latched.wrapping_add(1)
        {
            self.stats.sequence_failures += 1;
            return (Status::SEQUENCE_CHECK_FAIL, vec![]);
        }
        let Ok(r) = ecb::Request::new_checked(req) else {
            return (Status::INVALID_PKT_LENGTH, vec![]);
        };
        let n = r.op_count();
        let block = cmd == Command::WR_BLOCK || cmd == Command::RD_BLOCK;
        let exact = r.length_is_exact();
        let length_ok = match cmd {
            Command::RD_DWORD => n == 1 && exact,
            Command::WR_DWORD => {
                n == 1
                    && r.op(0).is_some_and(|(_, d)| d.is_some())
                    && (req.len() - ecb::OPS_OFFSET).is_multiple_of(8)
            }
            _ => exact && (req.len() - ecb::OPS_OFFSET).is_multiple_of(8),
        };
        if !length_ok {
            return (Status::INVALID_PKT_LENGTH, vec![]);
        }
        if block && n > ecb::MAX_BLOCK_OPS {
            return (Status::INVALID_BLOCK_SIZE, vec![]);
        }
        let ops: Vec<(u32, Option<u32>)> = r.ops().collect();
        // validate every address before executing any (no half-done blocks)
        if ops.iter().any(|(a, _)| !self.valid(*a)) {
            return (Status::INVALID_ADDR, vec![]);
        }
        let mut out = Vec::with_capacity(ops.len());
        for (a, d) in ops {
            if cmd.is_read() {
                out.push((a, self.read(a).unwrap_or(0)));
            } else {
                self.write(a, d.unwrap_or(0));
                out.push((a, 0));
            }
        }
        (Status::SUCCESS, out)
    }

    /// The 300-byte BOOTP v2 enumeration request the device broadcasts.
    pub fn enumeration(&mut self, secs: u16, ptp: (u64, u32)) -> [u8; bootp::PACKET_LEN] {
        self.bootp_seq = self.bootp_seq.wrapping_add(1);
        let e = EnumerationRepr {
            xid: u32::from(self.cfg.data_plane),
            secs,
            flags: 1,
            ciaddr: Some(self.cfg.ip),
            mac: self.cfg.mac,
            vendor: VendorV2 {
                tag_len: 0x38,
                data_plane: self.cfg.data_plane,
                compat_id: self.cfg.hsb_ip_version,
                uuid: self.cfg.uuid,
                tx_packet_count: self.tx_packets & 0xFF_FFFF,
                serial: self.cfg.serial,
                hsb_ip_version: self.cfg.hsb_ip_version,
                fpga_crc: self.cfg.fpga_crc,
                ptp_s: ptp.0 & 0xFFFF_FFFF_FFFF,
                ptp_ns: ptp.1,
                bootp_seq: self.bootp_seq,
                status: 1,
            },
        };
        let mut b = [0u8; bootp::PACKET_LEN];
        e.emit(&mut b);
        b
    }

    /// A BOOTP packet arrived on 12268. A reply (op 2) for this device's MAC assigns
    /// `yiaddr`; returns the new IP. Anything else is ignored and counted.
    pub fn handle_bootp(&mut self, b: &[u8]) -> Option<Ipv4Addr> {
        let r = bootp::Packet::new_checked(b).and_then(|p| SetIpRepr::parse(&p));
        match r {
            Ok(r)
                if r.mac() == self.cfg.mac
                    && !r.yiaddr.is_unspecified()
                    && !r.yiaddr.is_broadcast() =>
            {
                self.cfg.ip = r.yiaddr;
                Some(r.yiaddr)
            }
            _ => {
                self.stats.bootp_ignored += 1;
                None
            }
        }
    }

    /// The stream of virtual port `vp`, if the host enabled it and configured a destination.
    pub fn vp_stream(&self, vp: u32) -> Option<VpStream> {
        if vp >= self.cfg.virtual_ports {
            return None;
        }
        let dp = u32::from(self.cfg.data_plane);
        let r = |a: u32| self.regs.get(&a).copied().unwrap_or(0);
        if r(regs::hif_reg(dp, hif::VP_MASK)) & (1 << vp) == 0 {
            return None;
        }
        let v = |off: u32| r(regs::vp_reg(vp, off));
        let host_ip = Ipv4Addr::from(v(vp::HOST_IP));
        let port = v(vp::HOST_UDP_PORT);
        let window = v(vp::BUFFER_LENGTH);
        let payload = (r(regs::hif_reg(dp, hif::PACKET_SIZE)) as usize
            * rocelink_wire::hsb::PAGE_SIZE)
            .min(MAX_PAYLOAD);
        let coe = rocelink_wire::hsb::coe::from_qp_register(v(vp::QP));
        let mac_lo = v(vp::HOST_MAC_LOW).to_be_bytes();
        let mac_hi = v(vp::HOST_MAC_HIGH).to_be_bytes();
        let host_mac = Mac([
            mac_hi[2], mac_hi[3], mac_lo[0], mac_lo[1], mac_lo[2], mac_lo[3],
        ]);
        // CoE goes to the host's MAC (zero on `lo`); RoCE needs an IP and UDP port
        let no_dst = coe.is_none() && (host_ip.is_unspecified() || port & 0xFFFF == 0);
        if no_dst || window == 0 || window > self.cfg.max_window || payload == 0 || v(vp::QP) == 0 {
            return None;
        }
        let max_buff = v(vp::MAX_BUFF);
        let (start, end) = ((max_buff >> 16) & 0xFFF, max_buff & 0xFFF);
        let vlan = v(vp::VLAN);
        let camera = match self.cfg.cameras {
            0 => None,
            _ => Some(self.i2c.cameras.get(vp as usize)?.streaming()?),
        };
        Some(VpStream {
            vp,
            qp: v(vp::QP) & 0xFF_FFFF,
            rkey: v(vp::RKEY),
            // the FPGA uses address bits [31:7] of the LSB and bit 0 of the MSB
            base: (u64::from(v(vp::PAGE_MSB) & 1) << 32) | u64::from(v(vp::PAGE_LSB) & !0x7F),
            page_stride: u64::from(v(vp::PAGE_INC)) * 128,
            first_page: start.min(end),
            pages: end.saturating_sub(start.min(end)) + 1,
            window,
            host: SocketAddrV4::new(host_ip, (port & 0xFFFF) as u16),
            host_mac,
            md_disable: port & regs::MD_DISABLE != 0,
            payload,
            src_port: (r(regs::hif_reg(dp, hif::PACKET_UDP_PORT)) & 0xFFFF) as u16,
            vlan: (vlan & (1 << 16) != 0).then_some({
                (
                    ((vlan >> 13) & 7) as u8,
                    vlan & (1 << 12) != 0,
                    (vlan & 0xFFF) as u16,
                )
            }),
            camera,
            coe,
        })
    }
}

#[cfg(test)]
mod tests;
