//! HSB commands: `emulate`, `enumerate`, `set-ip`, `read`, `write`, `receive`, `demo`.

use anyhow::{Context, Result, anyhow, bail};
use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::device::packetizer::PacketizerOptions;
use rocelink_hsb::emulator::{self, EmulatorConfig, Pacing};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::enumerate;
use rocelink_hsb::host::receiver::{FrameReport, Receiver, ReceiverConfig};
use rocelink_hsb::sensor::{Imx274Mode, Sensor, coe_bytes_per_line};
use rocelink_wire::bytes::Mac;
use rocelink_wire::hsb::ecb::Trailer;
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Layout {
    /// Metadata records little-endian (the dataplane document's layout) instead of big-endian.
    #[arg(long)]
    metadata_le: bool,
    /// Immediate layout: psn20-page12 (HSB IP ≥ 0x2602) or psn24-buf8 (0x2510).
    #[arg(long, default_value = "psn20-page12", value_parser = ["psn20-page12", "psn24-buf8"])]
    imm_layout: String,
}

impl Layout {
    fn opts(&self) -> PacketizerOptions {
        PacketizerOptions {
            imm_layout: if self.imm_layout == "psn24-buf8" {
                ImmLayout::Psn24Buf8
            } else {
                ImmLayout::Psn20Page12
            },
            endian: if self.metadata_le {
                Endian::Little
            } else {
                Endian::Big
            },
        }
    }
}

fn parse_sensor(s: &str, frame_size: Option<usize>) -> Result<Sensor> {
    Ok(match s {
        "pattern" => Sensor::Pattern,
        "imx274-1080p-raw10" => Sensor::Imx274(Imx274Mode::P1080Raw10),
        "imx274-4k-raw10" => Sensor::Imx274(Imx274Mode::P2160Raw10),
        "imx274-4k-raw12" => Sensor::Imx274(Imx274Mode::P2160Raw12),
        "ultrasound" => Sensor::Ultrasound {
            channels: 128,
            samples: 4096,
        },
        f if f.starts_with("file:") => {
            let path = PathBuf::from(&f[5..]);
            let size = frame_size.ok_or_else(|| anyhow!("file replay needs --frame-size"))?;
            Sensor::replay(&path, size)
                .with_context(|| format!("cannot read {}", path.display()))?
        }
        other => bail!(
            "unknown sensor {other:?} (pattern, imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, ultrasound, file:PATH)"
        ),
    })
}

#[derive(clap::Args, Debug)]
pub(crate) struct EmulateArgs {
    /// Device IP (must be an address of this host; HSB default 192.168.0.2).
    #[arg(long, default_value = "127.0.0.2")]
    ip: Ipv4Addr,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    control_port: u16,
    /// Where enumeration goes, or "none".
    #[arg(long, default_value = "255.255.255.255:12267")]
    bootp_target: String,
    /// Sensor: pattern, imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, ultrasound, file:PATH.
    #[arg(long, default_value = "pattern")]
    sensor: String,
    /// Frame size for file replay.
    #[arg(long)]
    frame_size: Option<usize>,
    /// Frames per second.
    #[arg(long, conflicts_with = "rate_gbps")]
    fps: Option<f64>,
    /// Constant payload rate instead of a frame rate.
    #[arg(long)]
    rate_gbps: Option<f64>,
    /// Link speed that spreads a frame's packets (Gbit/s).
    #[arg(long, default_value_t = 10.0)]
    link_gbps: f64,
    /// One datagram per packet instead of gather-GSO runs (a packet filter in between then
    /// sees, and can drop, packets one by one as on a wire).
    #[arg(long)]
    no_gso: bool,
    /// Stop after N frames.
    #[arg(long)]
    frames: Option<u64>,
    /// Stop after S seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Record everything sent and received.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Device MAC (default derived from the IP).
    #[arg(long)]
    mac: Option<String>,
    /// Virtual ports.
    #[arg(long, default_value_t = 2)]
    vps: u32,
    /// Do not honour ECB SEQUENCE_CHECK (as HSB's own emulator).
    #[arg(long)]
    no_sequence_check: bool,
    /// Latched-sequence trailer bytes of ECB replies (2: FPGA, 4: HSB emulator).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=4))]
    trailer: u8,
    #[command(flatten)]
    layout: Layout,
}

fn emulator_config(a: &EmulateArgs) -> Result<EmulatorConfig> {
    let mut dev = DeviceConfig::new(a.ip);
    if let Some(m) = &a.mac {
        dev.mac = m.parse::<Mac>().map_err(|_| anyhow!("bad MAC {m}"))?;
    }
    dev.virtual_ports = a.vps.clamp(1, 64);
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
    cfg.sensor = parse_sensor(&a.sensor, a.frame_size)?;
    cfg.pacing = match (a.fps, a.rate_gbps) {
        (_, Some(r)) => Pacing::Gbps(r),
        (Some(f), None) => Pacing::Fps(f),
        (None, None) => Pacing::Fps(30.0),
    };
    cfg.link_gbps = a.link_gbps;
    cfg.gso = !a.no_gso;
    cfg.frames = a.frames;
    cfg.run_for = a.seconds.map(Duration::from_secs_f64);
    cfg.pcap = a.pcap.clone();
    cfg.packetizer = a.layout.opts();
    Ok(cfg)
}

pub(crate) fn emulate(a: &EmulateArgs) -> Result<ExitCode> {
    let cfg = emulator_config(a)?;
    eprintln!(
        "rocelink emulate: HSB device {} (MAC {}) ECB on {}:{}, sensor {}",
        cfg.device.ip, cfg.device.mac, cfg.device.ip, cfg.control_port, a.sensor
    );
    let stop = Arc::new(AtomicBool::new(false));
    let s = emulator::run(&cfg, stop).with_context(|| format!("emulator at {}", cfg.device.ip))?;
    eprintln!(
        "rocelink emulate: {} frames, {} packets, {} bytes; ECB {} requests ({} refused); {} enumerations",
        s.frames, s.packets, s.bytes, s.ecb_requests, s.ecb_errors, s.enumerations
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct EnumerateArgs {
    /// Seconds to listen.
    #[arg(long, default_value_t = 2.0)]
    timeout: f64,
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
    let found = enumerate::listen(&sock, Duration::from_secs_f64(a.timeout), None)?;
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
        eprintln!("rocelink: no device heard in {} s", a.timeout);
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
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
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
    let f = enumerate::set_ip(
        &sock,
        mac,
        a.ip,
        host_ip,
        Duration::from_secs_f64(a.timeout),
    )?;
    println!("{} is now {}", f.repr.mac, f.ip());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct RegArgs {
    /// Device IP.
    #[arg(long)]
    device: IpAddr,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    control_port: u16,
    /// Register address (hex with 0x, or decimal).
    addr: String,
    /// Values to write (several: one block write of consecutive registers).
    values: Vec<String>,
    /// Registers to read (block read).
    #[arg(long, default_value_t = 1)]
    count: u32,
}

fn num(s: &str) -> Result<u32> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.with_context(|| format!("bad number {s:?}"))
}

pub(crate) fn read(a: &RegArgs) -> Result<ExitCode> {
    let mut c = Control::new(SocketAddr::new(a.device, a.control_port))?;
    let addr = num(&a.addr)?;
    let vals = if a.count <= 1 {
        vec![c.read(addr)?]
    } else {
        c.read_block(addr, a.count)?
    };
    for (i, v) in vals.iter().enumerate() {
        println!("{:#010x}: {v:#010x}", addr + 4 * i as u32);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn write(a: &RegArgs) -> Result<ExitCode> {
    let mut c = Control::new(SocketAddr::new(a.device, a.control_port))?;
    let addr = num(&a.addr)?;
    let vals: Vec<u32> = a.values.iter().map(|v| num(v)).collect::<Result<_>>()?;
    match vals.len() {
        0 => bail!("nothing to write"),
        1 => c.write(addr, vals[0])?,
        _ => c.write_block(
            &vals
                .iter()
                .enumerate()
                .map(|(i, v)| (addr + 4 * i as u32, *v))
                .collect::<Vec<_>>(),
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReceiveArgs {
    /// Device IP (ECB is used to configure it). Not needed with --listen.
    #[arg(long)]
    device: Option<Ipv4Addr>,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    control_port: u16,
    /// Frames to report (good or damaged), then exit.
    #[arg(long)]
    frames: Option<u64>,
    /// One JSON object per frame.
    #[arg(long)]
    json: bool,
    /// Ring pages.
    #[arg(long, default_value_t = 4)]
    pages: u32,
    /// Frame size in bytes (default: IMX274 1080p RAW10).
    #[arg(long, default_value_t = 2_611_376)]
    frame_size: usize,
    /// Local IP (default: the address that routes to the device).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// Local UDP port for data.
    #[arg(long, default_value_t = 4791)]
    port: u16,
    /// Link MTU (packet size).
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Virtual port.
    #[arg(long, default_value_t = 0)]
    vp: u32,
    /// No separate metadata packet.
    #[arg(long)]
    md_disable: bool,
    /// Passive mode: receive at IP:PORT for a device something else configured...
    #[arg(long, requires_all = ["qp", "rkey", "device_ip"])]
    listen: Option<SocketAddr>,
    /// ...sending to this QP...
    #[arg(long)]
    qp: Option<String>,
    /// ...with this R_Key...
    #[arg(long)]
    rkey: Option<String>,
    /// ...from this device IP.
    #[arg(long)]
    device_ip: Option<Ipv4Addr>,
    /// Seconds without a frame before giving up.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Record every datagram.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Record frames (with their verdicts) to this directory.
    #[arg(long)]
    record: Option<PathBuf>,
    /// Stop recording after this many bytes.
    #[arg(long)]
    max_bytes: Option<u64>,
    /// Stop recording after this many frames.
    #[arg(long)]
    max_frames: Option<u64>,
    /// Sensor the device streams (recorded in the header so exports know the geometry):
    /// imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, coe-raw10:WxH, coe-raw12:WxH.
    #[arg(long, default_value = "unknown")]
    sensor: String,
    /// Keep the latest good frame as a PNG here (needs an image --sensor).
    #[arg(long)]
    snapshot: Option<PathBuf>,
    #[command(flatten)]
    layout: Layout,
    #[command(flatten)]
    tune: RxTuning,
}

/// Receive-path tuning.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RxTuning {
    /// Pin the receiving thread to this CPU.
    #[arg(long)]
    pin_cpu: Option<usize>,
    /// Spin on the socket instead of sleeping (lowest latency; a whole core).
    #[arg(long)]
    busy_poll: bool,
    /// Socket receive buffer in bytes (a capped size is reported with the sysctl to raise).
    #[arg(long, default_value_t = 32 << 20)]
    rcvbuf: usize,
    /// Receive without UDP_GRO.
    #[arg(long)]
    no_gro: bool,
    /// Every datagram through the generic endpoint (no in-place scatter receive).
    #[arg(long)]
    no_fast_path: bool,
    /// Messages per recvmmsg (0: 1 with GRO, 64 without).
    #[arg(long, default_value_t = 0)]
    batch: usize,
}

impl RxTuning {
    /// Apply to a receiver configuration, and pin this thread if asked.
    pub(crate) fn apply(&self, cfg: &mut ReceiverConfig) -> Result<()> {
        cfg.busy_poll = self.busy_poll;
        cfg.recv_buffer = self.rcvbuf;
        cfg.gro = !self.no_gro;
        cfg.fast_path = !self.no_fast_path;
        cfg.batch = self.batch;
        if let Some(c) = self.pin_cpu {
            rocelink_io::net::pin_current_thread(c)
                .with_context(|| format!("cannot pin to CPU {c}"))?;
        }
        Ok(())
    }
}

/// Stream parameters of a recording made from `sensor` (a name as `--sensor` takes).
pub(crate) fn record_header(sensor: &str, frame_size: usize) -> rocelink_record::format::Header {
    let mut h = rocelink_record::format::Header {
        sensor: sensor.to_string(),
        frame_size: frame_size as u64,
        layout: "bytes".into(),
        ..Default::default()
    };
    let mode = match sensor {
        "imx274-1080p-raw10" => Some(Imx274Mode::P1080Raw10),
        "imx274-4k-raw10" => Some(Imx274Mode::P2160Raw10),
        "imx274-4k-raw12" => Some(Imx274Mode::P2160Raw12),
        _ => None,
    };
    if let Some(m) = mode {
        let (w, hgt, bits) = m.geometry();
        h.layout = if bits == 10 {
            "csi-raw10".into()
        } else {
            "csi-raw12".into()
        };
        (h.width, h.height, h.bits) = (w as u32, hgt as u32, bits as u32);
        h.start_byte = m.start_byte() as u64;
        h.bytes_per_line = m.bytes_per_line() as u64;
    } else if let Some((packing, w, hgt)) = parse_coe(sensor) {
        let bits = if packing == "coe-raw10" { 10 } else { 12 };
        h.layout = packing.into();
        (h.width, h.height, h.bits) = (w as u32, hgt as u32, bits);
        h.bytes_per_line = coe_bytes_per_line(w, bits as usize) as u64;
    }
    h
}

/// `coe-raw10:WxH` / `coe-raw12:WxH`: a CoE-packed sensor of that geometry.
fn parse_coe(sensor: &str) -> Option<(&str, usize, usize)> {
    let (packing, dims) = sensor.split_once(':')?;
    if packing != "coe-raw10" && packing != "coe-raw12" {
        return None;
    }
    let (w, h) = dims.split_once('x')?;
    Some((packing, w.parse().ok()?, h.parse().ok()?))
}

fn frame_meta(f: &FrameReport) -> rocelink_record::FrameMeta {
    rocelink_record::FrameMeta {
        frame_number: f.frame_number,
        good: f.good(),
        complete: f.complete,
        crc_ok: f.crc_ok == Some(true),
        crc_present: f.crc_ok.is_some(),
        crc: f.crc_expected.unwrap_or(f.crc),
        flags: f.flags,
        dropped_packets: f.dropped_packets,
        sof: f.sof,
        meta: f.meta,
        packets: f.packets,
        page: f.page,
        ..Default::default()
    }
}

pub(crate) fn frame_json(f: &FrameReport) -> serde_json::Value {
    json!({"frame_number": f.frame_number, "bytes": f.bytes, "bytes_expected": f.bytes_expected, "crc": f.crc,
           "crc_expected": f.crc_expected, "crc_ok": f.crc_ok, "psn": f.psn, "page": f.page, "packets": f.packets,
           "dropped_packets": f.dropped_packets, "flags": f.flags, "sof_s": f.sof.0, "sof_ns": f.sof.1,
           "meta_s": f.meta.0, "meta_ns": f.meta.1, "complete": f.complete, "good": f.good()})
}

fn frame_line(f: &FrameReport) -> String {
    format!(
        "frame {:>6} page {:>3} {:>9} bytes {:>5} packets crc {:#010x} {} dropped {} flags {:#x} -> {}",
        f.frame_number,
        f.page,
        f.bytes,
        f.packets,
        f.crc,
        match f.crc_ok {
            Some(true) => "ok",
            Some(false) => "MISMATCH",
            None => "n/a",
        },
        f.dropped_packets,
        f.flags,
        if f.good() { "good" } else { "DAMAGED" }
    )
}

/// `--snapshot FILE`: the latest good frame as a PNG, rewritten at most once a second
/// and on the last frame of a `--frames` run.
pub(crate) struct Snapshot {
    path: PathBuf,
    header: rocelink_record::format::Header,
    saved: Option<Instant>,
}

impl Snapshot {
    fn new(path: PathBuf, sensor: &str, frame_size: usize) -> Result<Snapshot> {
        let header = record_header(sensor, frame_size);
        if header.layout == "bytes" {
            bail!(
                "--snapshot needs an image sensor (--sensor imx274-… or coe-raw10:WxH), not {sensor:?}"
            );
        }
        Ok(Snapshot {
            path,
            header,
            saved: None,
        })
    }
    fn due(&self) -> bool {
        self.saved
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
    }
    fn save(&mut self, data: &[u8]) -> Result<()> {
        let png = crate::record::png_image(&self.header, data)?;
        crate::record::write_atomic(&self.path, &png)?;
        self.saved = Some(Instant::now());
        Ok(())
    }
}

/// Receive loop shared by `receive` and `demo`: prints each frame, a progress line.
fn receive_loop(
    rx: &mut Receiver,
    frames: Option<u64>,
    json: bool,
    timeout: Duration,
    stop: &AtomicBool,
    mut rec: Option<&mut rocelink_record::Recorder>,
    mut snap: Option<&mut Snapshot>,
) -> Result<u64> {
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    if json {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let start = Instant::now();
    let mut n = 0u64;
    while frames.is_none_or(|m| n < m) && !stop.load(Ordering::Relaxed) {
        let Some(f) = rx.next_frame(timeout)? else {
            pb.finish_and_clear();
            bail!("no frame within {timeout:?} (after {n} frames)");
        };
        n += 1;
        if let Some(r) = rec.as_deref_mut() {
            r.offer(&frame_meta(&f), rx.frame_data(&f));
        }
        if let Some(s) = snap.as_deref_mut() {
            let last = frames.is_some_and(|m| n == m);
            if f.good() && (last || s.due()) {
                s.save(rx.frame_data(&f))?;
            }
        }
        if json {
            println!("{}", frame_json(&f));
        } else if pb.is_hidden() {
            println!("{}", frame_line(&f));
        } else {
            pb.println(frame_line(&f));
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let s = rx.stats;
        pb.set_message(format!(
            "{:.1} fps {:.2} Gbit/s | {} good {} damaged | {} packets dropped | {} ICRC errors",
            s.frames as f64 / secs,
            s.bytes as f64 * 8.0 / secs / 1e9,
            s.good,
            s.damaged,
            s.dropped_packets,
            s.icrc_errors
        ));
        pb.tick();
    }
    pb.finish_and_clear();
    Ok(n)
}

pub(crate) fn receive(a: &ReceiveArgs) -> Result<ExitCode> {
    let (local, device_ip, qp_rkey) = match a.listen {
        Some(l) => {
            let q = num(a.qp.as_deref().unwrap_or_default())?;
            let k = num(a.rkey.as_deref().unwrap_or_default())?;
            (
                l,
                a.device_ip
                    .ok_or_else(|| anyhow!("--listen needs --device-ip"))?,
                Some((q, k)),
            )
        }
        None => {
            let dev = a.device.ok_or_else(|| {
                anyhow!("--device IP is required (or --listen with --qp/--rkey/--device-ip)")
            })?;
            let ip = match a.bind {
                Some(ip) => ip,
                None => rocelink_io::udp::local_ip_for(IpAddr::V4(dev))?,
            };
            (SocketAddr::new(ip, a.port), dev, None)
        }
    };
    let mut cfg = ReceiverConfig::new(local, device_ip, a.frame_size);
    cfg.pages = a.pages;
    cfg.mtu = a.mtu;
    cfg.vp = a.vp;
    cfg.md_disable = a.md_disable;
    cfg.layout = a.layout.opts();
    cfg.qp_rkey = qp_rkey;
    cfg.pcap = a.pcap.clone();
    a.tune.apply(&mut cfg)?;
    let mut rx = Receiver::new(cfg).with_context(|| format!("cannot receive at {local}"))?;
    let mut ctl = None;
    if qp_rkey.is_none() {
        let mut c = Control::new(SocketAddr::new(IpAddr::V4(device_ip), a.control_port))?;
        let version = c
            .read(rocelink_hsb::regs::HSB_IP_VERSION)
            .context("device did not answer ECB")?;
        eprintln!(
            "rocelink receive: device {device_ip} HSB IP {:#06x}; QP {:#x} R_Key {:#x} at {}",
            version & 0xFFFF,
            rx.qpn(),
            rx.rkey(),
            rx.local_addr()
        );
        rx.configure(&mut c)?;
        ctl = Some(c);
    }
    let mut recorder = match &a.record {
        Some(dir) => {
            let mut rc = rocelink_record::RecordConfig::new(
                dir.clone(),
                record_header(&a.sensor, a.frame_size),
            );
            rc.max_bytes = a.max_bytes;
            rc.max_frames = a.max_frames;
            Some(
                rocelink_record::Recorder::start(rc)
                    .with_context(|| format!("cannot record to {}", dir.display()))?,
            )
        }
        None => None,
    };
    let mut snap = match &a.snapshot {
        Some(p) => Some(Snapshot::new(p.clone(), &a.sensor, a.frame_size)?),
        None => None,
    };
    let stop = AtomicBool::new(false);
    let r = receive_loop(
        &mut rx,
        a.frames,
        a.json,
        Duration::from_secs_f64(a.timeout),
        &stop,
        recorder.as_mut(),
        snap.as_mut(),
    );
    if let Some(c) = ctl.as_mut() {
        let _ = rx.stop(c);
    }
    if let Some(rec) = recorder {
        let s = rec.finish()?;
        eprintln!(
            "rocelink receive: recorded {} frames ({} bytes, {}) to {}; {} dropped by the recorder{}",
            s.frames,
            s.bytes,
            if s.direct { "direct I/O" } else { "page cache" },
            a.record
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            s.dropped,
            s.stopped
                .map(|w| format!("; stopped: {w}"))
                .unwrap_or_default()
        );
    }
    let n = r?;
    let s = rx.stats;
    eprintln!(
        "rocelink receive: {n} frames: {} good, {} damaged; {} packets dropped; {} ICRC errors; {} refused; {} of {} datagrams verified in place",
        s.good, s.damaged, s.dropped_packets, s.icrc_errors, s.refused, s.in_place, s.datagrams
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// Frames to receive.
    #[arg(long, default_value_t = 30)]
    frames: u64,
    /// Sensor of the emulated device.
    #[arg(long, default_value = "imx274-1080p-raw10")]
    sensor: String,
    /// Frames per second.
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// Record the stream (the emulator's view) to this pcap.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// One JSON object per frame.
    #[arg(long)]
    json: bool,
    /// Record the received frames to this directory.
    #[arg(long)]
    record: Option<PathBuf>,
    /// Loopback address of the emulated device (the receiver uses the same /24 with .1).
    #[arg(long, default_value = "127.0.0.2")]
    device_ip: Ipv4Addr,
    /// Keep the latest good frame as a PNG here (IMX274 sensors).
    #[arg(long)]
    snapshot: Option<PathBuf>,
}

/// Emulator and receiver in one process over loopback (device 127.0.0.2, host 127.0.0.1).
pub(crate) fn demo(a: &DemoArgs) -> Result<ExitCode> {
    let sensor = parse_sensor(&a.sensor, None)?;
    let frame_size = sensor.frame_len().unwrap_or(1 << 20);
    let dev_ip = a.device_ip;
    let o = dev_ip.octets();
    let host_ip = Ipv4Addr::new(o[0], o[1], o[2], 1);
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev_ip));
    cfg.bootp_target = None;
    cfg.sensor = sensor;
    cfg.pacing = Pacing::Fps(a.fps);
    cfg.pcap = a.pcap.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, cfg2) = (stop.clone(), cfg.clone());
    let emu = std::thread::spawn(move || emulator::run(&cfg2, stop2));
    std::thread::sleep(Duration::from_millis(100));
    let mut rcfg = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host_ip), 0), dev_ip, frame_size);
    rcfg.pages = 4;
    let mut rx = Receiver::new(rcfg)?;
    let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev_ip), cfg.control_port))?;
    let version = ctl.read(rocelink_hsb::regs::HSB_IP_VERSION)?;
    if !a.json {
        println!(
            "emulated HSB {:#06x} at {dev_ip} streaming {} ({frame_size} bytes/frame) at {} fps -> receiver at {} (QP {:#x}, R_Key {:#x})",
            version & 0xFFFF,
            a.sensor,
            a.fps,
            rx.local_addr(),
            rx.qpn(),
            rx.rkey()
        );
    }
    rx.configure(&mut ctl)?;
    let mut recorder = match &a.record {
        Some(dir) => Some(rocelink_record::Recorder::start(
            rocelink_record::RecordConfig::new(dir.clone(), record_header(&a.sensor, frame_size)),
        )?),
        None => None,
    };
    let mut snap = match &a.snapshot {
        Some(p) => Some(Snapshot::new(p.clone(), &a.sensor, frame_size)?),
        None => None,
    };
    let result = receive_loop(
        &mut rx,
        Some(a.frames),
        a.json,
        Duration::from_secs(5),
        &AtomicBool::new(false),
        recorder.as_mut(),
        snap.as_mut(),
    );
    if let Some(rec) = recorder {
        let s = rec.finish()?;
        if !a.json {
            println!(
                "recorded {} frames, {} dropped by the recorder",
                s.frames, s.dropped
            );
        }
        if let Some(why) = &s.stopped {
            eprintln!("rocelink demo: recording stopped early: {why}");
        }
    }
    let _ = rx.stop(&mut ctl);
    stop.store(true, Ordering::Relaxed);
    let es = emu
        .join()
        .map_err(|_| anyhow!("emulator thread panicked"))??;
    result?;
    let s = rx.stats;
    if !a.json {
        println!(
            "{} frames: {} good, {} damaged, {} packets dropped, {} ICRC errors (device sent {} packets)",
            s.frames, s.good, s.damaged, s.dropped_packets, s.icrc_errors, es.packets
        );
    }
    Ok(if s.damaged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
