//! The emulator's settings and what it reports.

use crate::device::DeviceConfig;
use crate::device::packetizer::PacketizerOptions;
use crate::sensor::Sensor;
use rocelink_runtime::counters::{Board, Link};
use std::net::SocketAddr;
use std::time::Duration;

/// How frames are paced.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Pacing {
    /// Frames per second; packets inside a frame go out at `link_gbps`.
    Fps(f64),
    /// A constant payload bit rate in Gbit/s (frames back to back).
    Gbps(f64),
}

/// What a program lends a running emulator besides its configuration: handles, not data
/// ([`EmulatorSession::start`](super::EmulatorSession::start) takes them apart from the
/// [`EmulatorConfig`]).
#[derive(Debug, Clone, Default)]
pub struct Handles {
    /// Publish the device's counters here (link "device") about every 100 ms and at the
    /// end; `None`: a board of the session's own, which its progress reads.
    pub counters: Option<Board>,
    /// Own this AF_XDP port instead of kernel sockets (`emulate --xdp`): the device answers
    /// ARP and ping itself, its address need not be configured on the interface.
    pub xdp: Option<rocelink_runtime::xdp::XdpPort>,
    /// Where the device's notes go (an address kept, a port it could not take).
    pub notes: rocelink_runtime::Notes,
}

/// Emulator settings: plain data (serde).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EmulatorConfig {
    /// The device.
    pub device: DeviceConfig,
    /// ECB port (8192).
    pub control_port: u16,
    /// Where enumeration goes (HSB: 255.255.255.255:12267); `None`: no enumeration.
    pub bootp_target: Option<SocketAddr>,
    /// Enumeration period.
    pub bootp_interval: Duration,
    /// Frame source.
    pub sensor: Sensor,
    /// Pacing.
    pub pacing: Pacing,
    /// Link speed used to spread a frame's packets (Gbit/s).
    pub link_gbps: f64,
    /// Stop after this many frames (per virtual port 0), if set.
    pub frames: Option<u64>,
    /// Stop after this long, if set.
    pub run_for: Option<Duration>,
    /// Bytes per sensor word (DATAPATH_WIDTH / 8).
    pub word_bytes: usize,
    /// Immediate and metadata layout.
    pub packetizer: PacketizerOptions,
    /// Record every datagram sent and received.
    pub pcap: Option<std::path::PathBuf>,
    /// Send runs of equal packets as one gather-GSO super-datagram (one system call, no
    /// staging copy). Off: one datagram per packet (`sendmmsg`), which is also what a
    /// packet filter in between sees one by one.
    pub gso: bool,
    /// How long after start (and after each reset) PTP reports synchronised (register
    /// 0x188); `None`: never.
    pub ptp_sync_after: Option<Duration>,
    /// Listen for sensor TX (host → device, HSB's audio players) on the device's RoCE
    /// port 4791; `None`: do not.
    pub sensor_tx_port: Option<u16>,
    /// Write what sensor TX port 0 (the I2S output) receives to this file, in arrival
    /// order.
    pub sensor_tx_record: Option<std::path::PathBuf>,
    /// Send Camera-over-Ethernet frames (for a virtual port the host set to CoE) from an
    /// AF_PACKET socket on this interface; with `xdp` they leave through the AF_XDP port.
    pub coe_iface: Option<String>,
    /// How CoE frame ends carry the metadata.
    pub coe_form: rocelink_wire::hsb::coe::MetadataForm,
    /// Hosts heard on ECB, and the only addresses a virtual port streams to: HSB's
    /// protocol proves no sender's address, so a spoofed register write could otherwise
    /// point a multi-gigabit stream anywhere. `None`: every host (an FPGA's behaviour).
    /// [`EmulatorConfig::new`] sets [`allow_list`]'s default: loopback and the device's
    /// subnet.
    pub allow: Option<Vec<rocelink_io::prefix::Prefix>>,
    /// DSCP of the stream's packets (6 bits): its class selector is the PFC class on an
    /// owned port. 0: best effort, as HSB sends.
    pub dscp: u8,
}

impl EmulatorConfig {
    /// Defaults: ECB 8192, enumeration to 255.255.255.255:12267 every second, pattern
    /// sensor at 30 fps on a 10 Gbit/s link, 64-bit sensor words.
    pub fn new(device: DeviceConfig) -> EmulatorConfig {
        let allow = allow_list(device.ip, &[]);
        EmulatorConfig {
            device,
            control_port: rocelink_wire::hsb::CONTROL_PORT,
            bootp_target: Some(SocketAddr::from((
                [255, 255, 255, 255],
                rocelink_wire::hsb::BOOTP_HOST_PORT,
            ))),
            bootp_interval: Duration::from_secs(1),
            sensor: Sensor::Pattern,
            pacing: Pacing::Fps(30.0),
            link_gbps: 10.0,
            frames: None,
            run_for: None,
            word_bytes: 8,
            packetizer: PacketizerOptions::default(),
            pcap: None,
            gso: true,
            ptp_sync_after: Some(Duration::ZERO),
            sensor_tx_port: Some(crate::host::sensor_tx::DEVICE_PORT),
            sensor_tx_record: None,
            coe_iface: None,
            coe_form: Default::default(),
            allow,
            dscp: 0,
        }
    }

    /// Why this configuration cannot run, if so (checked when the emulator binds).
    pub fn check(&self) -> Result<(), ConfigError> {
        let (cameras, vps) = (self.device.cameras, self.device.virtual_ports);
        if cameras > vps as usize {
            return Err(ConfigError::Cameras { cameras, vps });
        }
        Ok(())
    }

    /// Whether `ip` may use the device (ECB) and receive its streams.
    pub fn allows(&self, ip: std::net::IpAddr) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|p| p.contains(ip)))
    }
}

/// Who may use a device at `ip` ([`EmulatorConfig::allow`]): loopback and the hosts
/// `given` — or, when none is given, the device's subnet (a /24 around it when no
/// interface has the address, as for a device on an AF_XDP port); `None` (every host)
/// when `given` holds `0.0.0.0/0`.
pub fn allow_list(
    ip: std::net::Ipv4Addr,
    given: &[rocelink_io::prefix::Prefix],
) -> Option<Vec<rocelink_io::prefix::Prefix>> {
    use rocelink_io::prefix::Prefix;
    if given.contains(&Prefix::ANY_V4) {
        return None;
    }
    let mut v = Prefix::loopback().to_vec();
    if given.is_empty() {
        let ip = std::net::IpAddr::V4(ip);
        v.extend(rocelink_io::prefix::subnet_of(ip).or(Prefix::new(ip, 24)));
    }
    v.extend(given.iter().copied());
    Some(v)
}

/// A configuration the emulator refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// More cameras than virtual ports: camera N feeds virtual port N.
    #[error("{cameras} cameras for {vps} virtual ports: camera N feeds virtual port N")]
    Cameras {
        /// Cameras asked for.
        cameras: usize,
        /// Virtual ports.
        vps: u32,
    },
}

/// What the emulator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct EmulatorStats {
    /// Frames (windows) sent.
    pub frames: u64,
    /// Data and metadata packets sent.
    pub packets: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// ECB requests handled.
    pub ecb_requests: u64,
    /// ECB requests refused.
    pub ecb_errors: u64,
    /// ECB requests from hosts not allowed ([`EmulatorConfig::allow`]), dropped unanswered.
    pub ecb_not_allowed: u64,
    /// Frames not sent because a virtual port's destination is not allowed.
    pub streams_not_allowed: u64,
    /// Enumeration packets sent.
    pub enumerations: u64,
    /// Times the device changed IP.
    pub ip_changes: u64,
    /// Datagrams refused by the local host (netfilter).
    pub host_drops: u64,
    /// Async event messages sent.
    pub events: u64,
    /// Sequencer programs run.
    pub programs: u64,
    /// I2C transactions run.
    pub i2c_transactions: u64,
    /// Resets taken.
    pub resets: u64,
    /// Sensor TX: what the host sent to the device's sensors.
    pub sensor_tx: crate::device::sensor_tx::SensorTxStats,
    /// Camera-over-Ethernet frames (windows) sent.
    pub coe_frames: u64,
    /// CoE packets that found no room in the socket (lost).
    pub coe_lost: u64,
}

impl EmulatorStats {
    /// The counters table's view of the device at `local`: ECB requests in; data packets,
    /// ECB replies, enumerations and events out (RoCE and verbs-level: the data packets).
    pub fn link(&self, local: &str) -> Link {
        let mut l = Link::named("device", local);
        l.set("rx_packets", self.ecb_requests + self.sensor_tx.packets);
        l.set("roce_rx", self.sensor_tx.packets);
        l.set("stx_bytes", self.sensor_tx.bytes);
        l.set("stx_lost", self.sensor_tx.lost);
        l.set("stx_icrc_errors", self.sensor_tx.icrc_errors);
        l.set(
            "tx_packets",
            self.packets + self.ecb_requests + self.enumerations + self.events,
        );
        l.set("roce_tx", self.packets);
        l.set("ibv_tx", self.packets);
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sensor::Imx274Mode;

    #[test]
    fn a_new_device_hears_loopback_and_its_subnet_unless_told() {
        use rocelink_io::prefix::Prefix;
        // a documentation address no interface has: a /24 around it
        let ip = std::net::Ipv4Addr::new(198, 51, 100, 2);
        let c = EmulatorConfig::new(DeviceConfig::new(ip));
        assert!(c.allows("127.0.0.1".parse().unwrap()));
        assert!(c.allows("198.51.100.200".parse().unwrap()));
        assert!(!c.allows("198.51.101.1".parse().unwrap()));
        assert!(!c.allows("192.0.2.1".parse().unwrap()));
        // hosts given replace the subnet; "any" opens it to every host
        let given: Prefix = "192.0.2.0/24".parse().unwrap();
        let only = allow_list(ip, &[given]).unwrap();
        assert!(
            only.iter()
                .any(|p| p.contains("192.0.2.9".parse().unwrap()))
        );
        assert!(
            !only
                .iter()
                .any(|p| p.contains("198.51.100.200".parse().unwrap()))
        );
        assert_eq!(allow_list(ip, &[Prefix::ANY_V4]), None);
    }

    #[test]
    fn more_cameras_than_virtual_ports_are_refused() {
        let mut d = DeviceConfig::new(std::net::Ipv4Addr::LOCALHOST);
        d.virtual_ports = 2;
        d.cameras = 3;
        let c = EmulatorConfig::new(d);
        assert_eq!(c.check(), Err(ConfigError::Cameras { cameras: 3, vps: 2 }));
        let e = crate::emulator::Emulator::bind(&c, super::Handles::default())
            .err()
            .map(|e| e.kind());
        assert_eq!(e, Some(std::io::ErrorKind::InvalidInput));
    }

    #[test]
    fn a_config_is_plain_data_that_round_trips_through_json() {
        let mut c = EmulatorConfig::new(DeviceConfig::new(std::net::Ipv4Addr::new(10, 0, 0, 2)));
        c.sensor = Sensor::Imx274(Imx274Mode::P2160Raw12);
        c.pacing = Pacing::Gbps(6.5);
        c.frames = Some(600);
        c.run_for = Some(Duration::from_millis(1500));
        c.allow = Some(vec![
            "192.168.0.0/24"
                .parse()
                .unwrap_or(rocelink_io::prefix::Prefix::ANY_V4),
        ]);
        let text = serde_json::to_string(&c).unwrap_or_default();
        let back: EmulatorConfig = serde_json::from_str(&text).expect("parses back");
        assert_eq!(format!("{back:?}"), format!("{c:?}"));
        assert!(
            text.contains("P2160Raw12") && text.contains("192.168.0.0/24"),
            "{text}"
        );
    }
}
