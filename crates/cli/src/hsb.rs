//! HSB commands: `emulate`, `enumerate`, `set-ip`, `read`, `write` (receive and demo: `receive.rs`).

use crate::args;
use crate::stop::StopFlag;
use anyhow::{Context, Result, anyhow, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::device::packetizer::PacketizerOptions;
use rocelink_hsb::emulator::{
    ConfigError, EmulatorConfig, EmulatorSession, EmulatorStats, Handles, Pacing,
};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::enumerate;
use rocelink_runtime::Session;
use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::ecb::Trailer;
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `--imm-layout`: how a frame end's immediate splits into PSN and page.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImmChoice {
    /// 20-bit PSN, 12-bit page (HSB IP ≥ 0x2602).
    #[value(name = "psn20-page12")]
    Psn20Page12,
    /// 24-bit PSN, 8-bit buffer (HSB IP 0x2510).
    #[value(name = "psn24-buf8")]
    Psn24Buf8,
}

/// `--coe-metadata`: how CoE frame ends carry the metadata.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CoeMetadata {
    /// The 128-byte record closes the last packet (HSB's emulator and Linux receiver).
    Trailing,
    /// A separate 48-byte record (HSB's dataplane document).
    Short,
}

/// `--xdp-mode`: how the kernel hands frames to the AF_XDP socket.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XdpModeChoice {
    /// Zero-copy where the driver has it, else copy.
    Auto,
    /// The kernel copies (any driver).
    Copy,
    /// The NIC writes into the UMEM (the driver must have it).
    ZeroCopy,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Layout {
    /// Metadata records little-endian (the dataplane document's layout) instead of big-endian.
    #[arg(long)]
    metadata_le: bool,
    /// How a frame end's immediate splits into the PSN and the page.
    #[arg(long, value_enum, default_value_t = ImmChoice::Psn20Page12)]
    imm_layout: ImmChoice,
}

impl Layout {
    pub(crate) fn opts(&self) -> PacketizerOptions {
        PacketizerOptions {
            imm_layout: match self.imm_layout {
                ImmChoice::Psn24Buf8 => ImmLayout::Psn24Buf8,
                ImmChoice::Psn20Page12 => ImmLayout::Psn20Page12,
            },
            endian: if self.metadata_le {
                Endian::Little
            } else {
                Endian::Big
            },
        }
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct EmulateArgs {
    /// Device IP (must be an address of this host; HSB default 192.168.0.2).
    #[arg(long, default_value = "127.0.0.2")]
    ip: Ipv4Addr,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    control_port: u16,
    /// Hosts the device hears on ECB and streams to: ADDR, ADDR/PREFIX or any
    /// (comma-separated or repeated), besides loopback. Default: the subnet of --ip. HSB's
    /// protocol proves no address, so a spoofed register write could otherwise aim the
    /// stream anywhere.
    #[arg(long, value_delimiter = ',', value_name = "ADDR[/PREFIX]")]
    allow: Vec<rocelink_io::prefix::Prefix>,
    /// Where enumeration goes, or "none".
    #[arg(long, default_value = "255.255.255.255:12267")]
    bootp_target: String,
    /// Sensor: pattern, imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, ultrasound, file:PATH.
    #[arg(long, default_value = "pattern", value_parser = args::sensor)]
    sensor: SensorSpec,
    /// Frame size for file replay.
    #[arg(long, value_parser = args::frame_size)]
    frame_size: Option<usize>,
    /// Frames per second.
    #[arg(long, conflicts_with = "rate_gbps", value_parser = args::rate)]
    fps: Option<f64>,
    /// Constant payload rate instead of a frame rate.
    #[arg(long, value_parser = args::rate)]
    rate_gbps: Option<f64>,
    /// Link speed that spreads a frame's packets (Gbit/s).
    #[arg(long, default_value = "10", value_parser = args::rate)]
    link_gbps: f64,
    /// One datagram per packet instead of gather-GSO runs (a packet filter in between then
    /// sees, and can drop, packets one by one as on a wire).
    #[arg(long)]
    no_gso: bool,
    /// Stop after N frames.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    frames: Option<u64>,
    /// Stop after S seconds.
    #[arg(long, value_parser = args::secs)]
    seconds: Option<Duration>,
    /// Record everything sent and received.
    #[arg(long, value_parser = args::out_file)]
    pcap: Option<PathBuf>,
    /// Device MAC (default derived from the IP).
    #[arg(long)]
    mac: Option<String>,
    /// Virtual ports.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=32))]
    vps: u32,
    /// Do not honour ECB SEQUENCE_CHECK (as HSB's own emulator).
    #[arg(long)]
    no_sequence_check: bool,
    /// Latched-sequence trailer bytes of ECB replies (2: FPGA, 4: HSB emulator).
    #[arg(long, default_value_t = 2, value_parser = trailer_len)]
    trailer: u8,
    /// IMX274 cameras on the I2C bus (camera N feeds virtual port N). With cameras, a port
    /// streams only after the host configured and started its camera over I2C, in the
    /// camera's mode; with 0, every configured port streams --sensor at once.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=4))]
    cameras: u8,
    /// Seconds after start (and after each reset) until PTP reports synchronised, or
    /// "never".
    #[arg(long, default_value = "0", value_parser = ptp_after)]
    ptp_sync_after: PtpAfter,
    /// Write what the device's I2S output (sensor TX port 0) receives to FILE, in arrival
    /// order (see `send-audio`).
    #[arg(long, value_name = "FILE", value_parser = args::out_file)]
    record_tx: Option<PathBuf>,
    /// Do not listen for sensor TX on UDP 4791.
    #[arg(long, conflicts_with = "record_tx")]
    no_sensor_tx: bool,
    /// Own interface IFACE through AF_XDP (root), as a board owns its port: the device
    /// answers ARP and ping itself and sends from its own Ethernet stack; --ip need not
    /// be an address of this host (and should not be: the kernel would answer too).
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    /// Priority flow control (802.1Qbb) on the --xdp port: a class paused by the host's
    /// PFC frames sends nothing until the pause runs out (quanta at --link-gbps) or a
    /// resume comes; its packets wait meanwhile (--pfc-hold), as in a device's buffer.
    #[arg(long, requires = "xdp")]
    pfc: bool,
    /// With --pfc: packets held per paused class; what overflows is dropped and counted.
    #[arg(long, default_value_t = 4096, requires = "pfc", value_parser = args::usize_in(1, 1 << 20))]
    pfc_hold: usize,
    /// DSCP of the stream's packets (0–63); its class selector (DSCP / 8) is the PFC
    /// class, and the 802.1Q priority on a tagged port.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    dscp: u8,
    /// Send Camera-over-Ethernet frames (for a virtual port the host sets to CoE, e.g.
    /// `receive --coe`) from a raw socket on IFACE, as HSB's emulator does (root). With
    /// --xdp they leave through the AF_XDP port.
    #[arg(long, value_name = "IFACE", conflicts_with = "xdp")]
    coe_iface: Option<String>,
    /// How CoE frame ends carry the metadata.
    #[arg(long, value_enum, default_value_t = CoeMetadata::Trailing)]
    coe_metadata: CoeMetadata,
    /// At the end, print what the device did as one JSON object on stdout (the emulator
    /// session's summary, as Python's `Emulator.stop()` gives it, and the counters table
    /// under "counters").
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    counters: crate::stats::CounterArgs,
    #[command(flatten)]
    layout: Layout,
}

/// `--ptp-sync-after`: seconds, or never.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PtpAfter(Option<Duration>);

fn ptp_after(s: &str) -> Result<PtpAfter, String> {
    match s {
        "never" => return Ok(PtpAfter(None)),
        "0" => return Ok(PtpAfter(Some(Duration::ZERO))),
        _ => {}
    }
    args::secs(s).map(|d| PtpAfter(Some(d)))
}

fn emulator_config(a: &EmulateArgs) -> Result<EmulatorConfig> {
    let mut dev = DeviceConfig::new(a.ip);
    if let Some(m) = &a.mac {
        dev.mac = m.parse::<Mac>().map_err(|_| anyhow!("bad MAC {m}"))?;
    }
    dev.virtual_ports = a.vps;
    dev.cameras = usize::from(a.cameras);
    dev.sequence_check = !a.no_sequence_check;
    dev.trailer = if a.trailer == 4 {
        Trailer::Four
    } else {
        Trailer::Two
    };
    let mut cfg = EmulatorConfig::new(dev);
    cfg.control_port = a.control_port;
    cfg.bootp_target = if a.bootp_target == "none" {
        None
    } else {
        Some(
            a.bootp_target
                .parse()
                .with_context(|| format!("bad --bootp-target {}", a.bootp_target))?,
        )
    };
    if matches!(a.sensor, SensorSpec::File(_)) && a.frame_size.is_none() {
        bail!("--sensor {}: a file replay needs --frame-size", a.sensor);
    }
    cfg.sensor = a
        .sensor
        .source(a.frame_size)
        .map_err(|e| anyhow!("--sensor: {e}"))?;
    cfg.pacing = match (a.fps, a.rate_gbps) {
        (_, Some(r)) => Pacing::Gbps(r),
        (Some(f), None) => Pacing::Fps(f),
        (None, None) => Pacing::Fps(30.0),
    };
    cfg.link_gbps = a.link_gbps;
    cfg.gso = !a.no_gso;
    cfg.frames = a.frames;
    cfg.run_for = a.seconds;
    cfg.pcap = a.pcap.clone();
    cfg.packetizer = a.layout.opts();
    cfg.ptp_sync_after = a.ptp_sync_after.0;
    cfg.sensor_tx_record = a.record_tx.clone();
    if a.no_sensor_tx {
        cfg.sensor_tx_port = None;
    }
    cfg.coe_iface = a.coe_iface.clone();
    cfg.coe_form = match a.coe_metadata {
        CoeMetadata::Short => rocelink_wire::hsb::coe::MetadataForm::Short,
        CoeMetadata::Trailing => rocelink_wire::hsb::coe::MetadataForm::Trailing,
    };
    cfg.allow = rocelink_hsb::emulator::allow_list(a.ip, &a.allow);
    cfg.dscp = a.dscp;
    cfg.check().map_err(|e| match e {
        ConfigError::Cameras { .. } => anyhow!(
            "--cameras {}: camera N feeds virtual port N, and there are --vps {}",
            a.cameras,
            a.vps
        ),
        other => anyhow::Error::new(other),
    })?;
    Ok(cfg)
}

pub(crate) fn emulate(a: &EmulateArgs) -> Result<ExitCode> {
    let mut cfg = emulator_config(a)?;
    let xdp = match &a.xdp {
        Some(ifname) => Some(emulate_xdp(a, ifname, &mut cfg)?),
        None => None,
    };
    let counters = crate::stats::Counters::start("emulate", &a.counters)?;
    let lent = Handles {
        counters: Some(counters.board.clone()),
        xdp: xdp.clone(),
        notes: rocelink_runtime::Notes::to(|n| eprintln!("rocelink emulate: {n}")),
    };
    let stop = StopFlag::install()?;
    let emu = EmulatorSession::start(&cfg, lent).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrNotAvailable && a.xdp.is_none() {
            format!(
                " ({} is not an address of this host: add it, e.g. `ip addr add {}/24 dev IFACE`, or let the device own it on an interface with --xdp IFACE)",
                cfg.device.ip, cfg.device.ip
            )
        } else {
            String::new()
        };
        anyhow!("cannot start the device: {e}{hint}")
    })?;
    let source = match a.cameras {
        0 => a.sensor.to_string(),
        n => format!("{n} IMX274 camera(s) on I2C, streaming once started"),
    };
    eprintln!(
        "rocelink emulate: HSB device {} (MAC {}) ECB on {}, sensor {source}",
        cfg.device.ip,
        cfg.device.mac,
        emu.control_addr()
    );
    crate::stop::watch(&stop, &emu.stopper(), &|| emu.is_finished(), &mut || {});
    let s = emu
        .wait()
        .with_context(|| format!("emulator at {}", cfg.device.ip))?;
    let snap = counters.summary("emulate", a.json);
    if let Some(x) = &xdp {
        let i = x.iface_stats();
        eprintln!(
            "rocelink emulate: {}; ARP {} replies, ICMP {} echo replies",
            crate::sinks::xdp_summary(x),
            i.arp_replies,
            i.echo_replies
        );
        crate::sinks::pfc_lines("emulate", x);
    }
    if a.json {
        println!("{}", crate::out::summary_json(&s, snap));
    } else {
        emulate_summary(&s);
    }
    Ok(ExitCode::SUCCESS)
}

/// The device owns its address on `ifname` through AF_XDP (and answers ARP for it): the
/// port it owns (the device's MAC set to the interface's unless given).
fn emulate_xdp(
    a: &EmulateArgs,
    ifname: &str,
    cfg: &mut EmulatorConfig,
) -> Result<rocelink_runtime::xdp::XdpPort> {
    use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
    if std::net::UdpSocket::bind((a.ip, 0)).is_ok() {
        bail!(
            "--ip {}: an address of this host; with --xdp the device owns its address and answers ARP for it, so choose one no interface of this host has",
            a.ip
        );
    }
    let mut x = XdpPortConfig::new(ifname, cfg.device.ip, XdpRole::Device);
    if a.pfc {
        let mut p = rocelink_runtime::xdp::PfcConfig::new(a.link_gbps);
        p.hold = a.pfc_hold;
        x.pfc = Some(p);
    }
    match &a.mac {
        // the device's MAC is the interface's unless told (then the NIC must take it)
        Some(_) => x.mac = Some(cfg.device.mac.0),
        None => {
            let m =
                rocelink_io::xdp::iface_mac(ifname).with_context(|| format!("--xdp {ifname}"))?;
            cfg.device.mac = rocelink_wire::bytes::Mac(m);
        }
    }
    XdpPort::open(&x).with_context(|| format!("--xdp {ifname}"))
}

/// What the emulator did, on stderr.
fn emulate_summary(s: &EmulatorStats) {
    eprintln!(
        "rocelink emulate: {} frames, {} packets, {} bytes; ECB {} requests ({} refused, {} from hosts not allowed); {} enumerations; {} sequencer programs, {} I2C transactions, {} resets",
        s.frames,
        s.packets,
        s.bytes,
        s.ecb_requests,
        s.ecb_errors,
        s.ecb_not_allowed,
        s.enumerations,
        s.programs,
        s.i2c_transactions,
        s.resets
    );
    if s.streams_not_allowed > 0 {
        eprintln!(
            "rocelink emulate: {} frames not sent: a virtual port's destination is not allowed (--allow)",
            s.streams_not_allowed
        );
    }
    if s.coe_frames > 0 || s.coe_lost > 0 {
        eprintln!(
            "rocelink emulate: CoE {} frames; {} packets found no room and were lost; {} dropped by this host on the way out",
            s.coe_frames, s.coe_lost, s.host_drops
        );
    }
    let t = s.sensor_tx;
    if t.packets + t.refused > 0 {
        eprintln!(
            "rocelink emulate: sensor TX {} packets, {} bytes; {} lost, {} ICRC errors, {} in HSB's Linux-player format, {} refused",
            t.packets, t.bytes, t.lost, t.icrc_errors, t.linux_format, t.refused
        );
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct EnumerateArgs {
    /// Seconds to listen.
    #[arg(long, default_value = "2", value_parser = args::secs)]
    timeout: Duration,
    /// One JSON object per device.
    #[arg(long)]
    json: bool,
    /// Listening address.
    #[arg(long, default_value = "0.0.0.0:12267")]
    bind: SocketAddr,
}

pub(crate) fn enumerate(a: &EnumerateArgs) -> Result<ExitCode> {
    let sock =
        enumerate::listener(a.bind).with_context(|| format!("cannot listen on {}", a.bind))?;
    let found = enumerate::listen(&sock, a.timeout, None)?;
    for f in &found {
        let v = &f.repr.vendor;
        if a.json {
            println!(
                "{}",
                json!({"mac": f.repr.mac.to_string(), "ip": f.ip().to_string(), "serial_number": v.serial_string(),
                       "fpga_uuid": v.uuid_string(), "board": f.board(), "hsb_ip_version": format!("{:#06x}", v.hsb_ip_version),
                       "fpga_crc": format!("{:#06x}", v.fpga_crc), "data_plane": v.data_plane, "compat_id": v.compat_id,
                       "transmitted_packets": v.tx_packet_count})
            );
        } else {
            println!(
                "mac_id={} hsb_ip_version={:#06x} fpga_crc={:#06x} ip_address={} fpga_uuid={} serial_number={} data_plane={} board={}",
                f.repr.mac.to_string().to_uppercase(),
                v.hsb_ip_version,
                v.fpga_crc,
                f.ip(),
                v.uuid_string(),
                v.serial_string(),
                v.data_plane,
                f.board()
            );
        }
    }
    if found.is_empty() {
        eprintln!("rocelink: no device heard in {:?}", a.timeout);
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct SetIpArgs {
    /// Device MAC.
    mac: String,
    /// IP to assign.
    ip: Ipv4Addr,
    /// This host's IP on the device's network (BOOTP siaddr; default: the route to the device).
    #[arg(long)]
    host_ip: Option<Ipv4Addr>,
    /// Seconds to wait for the device.
    #[arg(long, default_value = "10", value_parser = args::secs)]
    timeout: Duration,
    /// Listening address for enumeration.
    #[arg(long, default_value = "0.0.0.0:12267")]
    bind: SocketAddr,
}

pub(crate) fn set_ip(a: &SetIpArgs) -> Result<ExitCode> {
    let mac: Mac = a.mac.parse().map_err(|_| anyhow!("bad MAC {}", a.mac))?;
    let sock = enumerate::listener(a.bind)?;
    let host_ip = match a.host_ip {
        Some(h) => h,
        None => match rocelink_io::udp::local_ip_for(IpAddr::V4(a.ip))? {
            IpAddr::V4(v) => v,
            IpAddr::V6(_) => bail!("HSB enumeration is IPv4"),
        },
    };
    let f = enumerate::set_ip(&sock, mac, a.ip, host_ip, a.timeout)?;
    println!("{} is now {}", f.repr.mac, f.ip());
    Ok(ExitCode::SUCCESS)
}

/// The device a register command talks to.
#[derive(clap::Args, Debug)]
pub(crate) struct DeviceArgs {
    /// Device IP.
    #[arg(long)]
    pub(crate) device: IpAddr,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    pub(crate) control_port: u16,
}

/// The most registers one `read --count` asks for (an ECB block is at most this many).
const MAX_READ: u32 = rocelink_wire::hsb::ecb::MAX_BLOCK_OPS as u32;

#[derive(clap::Args, Debug)]
pub(crate) struct ReadArgs {
    #[command(flatten)]
    dev: DeviceArgs,
    /// Register address (hex with 0x, or decimal).
    #[arg(value_parser = args::u32_num)]
    addr: u32,
    /// Registers to read (one block read).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_READ)))]
    count: u32,
}

#[derive(clap::Args, Debug)]
pub(crate) struct WriteArgs {
    #[command(flatten)]
    dev: DeviceArgs,
    /// Register address (hex with 0x, or decimal).
    #[arg(value_parser = args::u32_num)]
    addr: u32,
    /// Values to write (several: one block write of consecutive registers).
    #[arg(required = true, num_args = 1.., value_parser = args::u32_num)]
    values: Vec<u32>,
}

pub(crate) fn control(d: &DeviceArgs) -> Result<Control> {
    Control::new(SocketAddr::new(d.device, d.control_port))
        .with_context(|| format!("ECB client for {}:{}", d.device, d.control_port))
}

/// Consecutive register addresses from `addr`, refused where they would wrap past 2^32.
fn span(addr: u32, n: u32) -> Result<()> {
    if u64::from(addr) + 4 * (u64::from(n) - 1) > u64::from(u32::MAX) {
        bail!("{n} registers from {addr:#010x} run past the end of the address space");
    }
    Ok(())
}

pub(crate) fn read(a: &ReadArgs) -> Result<ExitCode> {
    span(a.addr, a.count)?;
    let mut c = control(&a.dev)?;
    let vals = if a.count == 1 {
        vec![c.read(a.addr)?]
    } else {
        c.read_block(a.addr, a.count)?
    };
    for (i, v) in vals.iter().enumerate() {
        println!("{:#010x}: {v:#010x}", a.addr + 4 * i as u32);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn write(a: &WriteArgs) -> Result<ExitCode> {
    let n = u32::try_from(a.values.len()).unwrap_or(u32::MAX);
    if n > MAX_READ {
        bail!("{n} values: one block write takes at most {MAX_READ}");
    }
    span(a.addr, n)?;
    let mut c = control(&a.dev)?;
    match a.values.as_slice() {
        [v] => c.write(a.addr, *v)?,
        vals => c.write_block(
            &vals
                .iter()
                .enumerate()
                .map(|(i, v)| (a.addr + 4 * i as u32, *v))
                .collect::<Vec<_>>(),
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Receive-path tuning.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RxTuning {
    /// Pin the receiving thread to this CPU; with several --vp, one CPU for each (in
    /// --vp order), each virtual port's thread on its own.
    #[arg(long, value_delimiter = ',')]
    pin_cpu: Vec<usize>,
    /// Spin on the socket instead of sleeping (lowest latency; a whole core).
    #[arg(long)]
    busy_poll: bool,
    /// Receive coalescing, microseconds (socket and --xdp alike): while datagrams keep
    /// coming, look again after this long instead of being woken for each — less CPU at
    /// high rates for at most this much added latency (0: off).
    #[arg(long, default_value = "0", value_parser = args::usize_in(0, 10_000))]
    rx_coalesce_us: usize,
    /// Socket receive buffer in bytes (a capped size is reported with the sysctl to raise).
    #[arg(long, default_value_t = 32 << 20)]
    rcvbuf: usize,
    /// Receive without UDP_GRO.
    #[arg(long)]
    no_gro: bool,
    /// Every datagram through the generic endpoint (no in-place scatter receive).
    #[arg(long)]
    no_fast_path: bool,
    /// Messages per recvmmsg, 1 to 1024 (default: 1 with GRO, 64 without).
    #[arg(long, value_parser = args::usize_in(1, 1024))]
    batch: Option<usize>,
    /// Receive with AF_XDP on this interface instead of a UDP socket (kernel bypass;
    /// root). The data ports are steered to the AF_XDP socket, the kernel keeps the rest.
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    /// AF_XDP: the interface's receive queue to bind; with several --vp, one queue for each
    /// (in --vp order), each read by its own AF_XDP socket and thread — the NIC's flow
    /// steering (`ethtool -N IFACE flow-type udp4 dst-port P action Q`) must put each
    /// virtual port's data port (--port + i) on its queue.
    #[arg(long, default_value = "0", value_delimiter = ',', requires = "xdp")]
    xdp_queue: Vec<u32>,
    /// AF_XDP: how the kernel hands frames to the socket.
    #[arg(long, value_enum, default_value_t = XdpModeChoice::Auto, requires = "xdp")]
    xdp_mode: XdpModeChoice,
    #[command(flatten)]
    pfc: args::PfcArgs,
}
impl RxTuning {
    /// The session's tuning and AF_XDP choice (the session checks them: an IPv4 host
    /// address and an MTU of at most 4000 for AF_XDP, one value or one per port).
    pub(crate) fn session(
        &self,
    ) -> (
        rocelink_hsb_host::session::Tuning,
        Option<rocelink_hsb_host::session::Xdp>,
    ) {
        let tuning = rocelink_hsb_host::session::Tuning {
            busy_poll: self.busy_poll,
            rx_coalesce: std::time::Duration::from_micros(self.rx_coalesce_us as u64),
            recv_buffer: self.rcvbuf,
            gro: !self.no_gro,
            fast_path: !self.no_fast_path,
            batch: self.batch.unwrap_or(0),
            cpus: self.pin_cpu.clone(),
        };
        let xdp = self
            .xdp
            .as_ref()
            .map(|ifname| rocelink_hsb_host::session::Xdp {
                ifname: ifname.clone(),
                queues: self.xdp_queue.clone(),
                mode: self.xdp_mode(),
                pfc: self.pfc.config(),
            });
        (tuning, xdp)
    }

    fn xdp_mode(&self) -> rocelink_io::xdp::XdpMode {
        match self.xdp_mode {
            XdpModeChoice::Copy => rocelink_io::xdp::XdpMode::Copy,
            XdpModeChoice::ZeroCopy => rocelink_io::xdp::XdpMode::ZeroCopy,
            XdpModeChoice::Auto => rocelink_io::xdp::XdpMode::Auto,
        }
    }
}

/// `--trailer`: 2 or 4 bytes.
fn trailer_len(s: &str) -> Result<u8, String> {
    match s {
        "2" => Ok(2),
        "4" => Ok(4),
        _ => Err(format!(
            "{s}: an ECB trailer is 2 bytes (FPGA) or 4 (HSB emulator)"
        )),
    }
}
