//! `receive` and `demo`: every input checked first, then the device, then the frame loop
//! with its sinks (lines or JSON, progress, recorder, PNG snapshot) until the frame count,
//! `--seconds`, or Ctrl-C/SIGTERM — after which the device is told to stop, the recording
//! is finished and made durable, and the summary printed.

use crate::args;
use crate::hsb::{Layout, RxTuning};
use crate::sinks::{Output, Sinks};
use crate::stop::StopFlag;
use anyhow::{Context, Result, anyhow, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, EmulatorSession, Handles, Pacing};
use rocelink_hsb::host::receiver::ReceiverStats;
use rocelink_hsb_host::session::{
    Coe, CoeCounts, Device, HostConfig, HostError, HostSession, HostSummary, MAX_RING, Note,
    PerPortList,
};
use rocelink_hsb_host::{FrameSink, Limits, StopReason};
use rocelink_runtime::Session;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Finish the recording and report it; `Ok(false)` when frames were lost to it.
pub(crate) fn finish_recording(out: &mut Sinks, cmd: &str) -> Result<bool> {
    let Some(rec) = out.rec.as_mut() else {
        return Ok(true);
    };
    rec.finish()?;
    let Some(s) = rec.summary() else {
        return Ok(true);
    };
    Ok(report_recording(cmd, s, rec.dir()))
}

/// Say what a recording holds (on stderr): frames, bytes, I/O, where, the recorder's
/// drops and why it stopped early. Whether it holds what was asked for: a frame limit is
/// what the user asked for; a recording stopped for anything else lost frames.
pub(crate) fn report_recording(
    cmd: &str,
    s: &rocelink_record::Summary,
    dir: &std::path::Path,
) -> bool {
    if let Some(why) = &s.direct_refused {
        eprintln!("rocelink {cmd}: {why}; writing through the page cache");
    }
    eprintln!(
        "rocelink {cmd}: recorded {} frames ({} bytes, {}) to {}; {} dropped by the recorder{}",
        s.frames,
        s.bytes,
        if s.direct { "direct I/O" } else { "page cache" },
        dir.display(),
        s.dropped,
        s.stopped
            .as_ref()
            .map(|w| format!("; stopped early: {w}"))
            .unwrap_or_default()
    );
    s.stopped.as_deref().is_none_or(|w| w.contains("limit"))
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReceiveArgs {
    /// Device IP (ECB is used to configure it). Not needed with --listen.
    #[arg(long)]
    pub(crate) device: Option<Ipv4Addr>,
    /// ECB port.
    #[arg(long, default_value_t = 8192)]
    pub(crate) control_port: u16,
    /// Frames to report (good or damaged), then exit.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) frames: Option<u64>,
    /// Receive for this long, then exit.
    #[arg(long, value_parser = args::secs)]
    pub(crate) seconds: Option<Duration>,
    /// Ring pages.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) pages: u32,
    /// Frame size in bytes (default: IMX274 1080p RAW10, or the --sensor's).
    #[arg(long, value_parser = args::frame_size)]
    pub(crate) frame_size: Option<usize>,
    /// Local IP (default: the address that routes to the device).
    #[arg(long)]
    pub(crate) bind: Option<IpAddr>,
    /// Local UDP port for data.
    #[arg(long, default_value_t = 4791)]
    pub(crate) port: u16,
    /// Link MTU, 256..=9000: the payload per packet is HSB's MTU − 74 rounded down to 128
    /// (1500: 1408 bytes, 9000: 8832). Default: the MTU of the interface that routes to the
    /// device.
    #[arg(long, value_parser = args::mtu)]
    pub(crate) mtu: Option<u32>,
    /// Virtual port(s): several (`--vp 0,1`, a stereo pair on one port) are received by
    /// one thread each, on data ports --port, --port+1, ….
    #[arg(long, default_value = "0", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(0..32))]
    pub(crate) vp: Vec<u32>,
    /// No separate metadata packet.
    #[arg(long)]
    pub(crate) md_disable: bool,
    /// Passive mode: receive at IP:PORT for a device something else configured...
    #[arg(long, requires_all = ["qp", "rkey", "device_ip"], conflicts_with = "device")]
    pub(crate) listen: Option<SocketAddr>,
    /// ...sending to this QP...
    #[arg(long, value_parser = args::u24_num)]
    pub(crate) qp: Option<u32>,
    /// ...with this R_Key...
    #[arg(long, value_parser = args::u32_num)]
    pub(crate) rkey: Option<u32>,
    /// ...from this device IP.
    #[arg(long)]
    pub(crate) device_ip: Option<Ipv4Addr>,
    /// Seconds without a frame before giving up.
    #[arg(long, default_value = "5", value_parser = args::secs)]
    pub(crate) timeout: Duration,
    /// Record every datagram.
    #[arg(long, value_parser = args::out_file)]
    pub(crate) pcap: Option<PathBuf>,
    /// Sensor the device streams (recorded in the header so exports know the geometry):
    /// imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, coe-raw10:WxH, coe-raw12:WxH.
    #[arg(long, value_parser = args::sensor)]
    pub(crate) sensor: Option<SensorSpec>,
    /// Camera over Ethernet: receive the device's raw IEEE 1722B frames on interface
    /// IFACE (an AF_PACKET socket, root; with `--xdp IFACE`, an AF_XDP socket steered
    /// EtherType 0x22F0) instead of RoCE, and program the device for CoE.
    #[arg(long, value_name = "IFACE", conflicts_with_all = ["listen", "md_disable", "pcap"])]
    pub(crate) coe: Option<String>,
    /// CoE channel the device is told to send on (0..=63; HSB's examples use 1).
    #[arg(long, default_value_t = 1, requires = "coe", value_parser = clap::value_parser!(u8).range(0..=63))]
    pub(crate) coe_channel: u8,
    #[command(flatten)]
    pub(crate) out: Output,
    #[command(flatten)]
    pub(crate) layout: Layout,
    #[command(flatten)]
    pub(crate) tune: RxTuning,
    #[command(flatten)]
    pub(crate) counters: crate::stats::CounterArgs,
    #[command(flatten)]
    pub(crate) view: crate::view::ViewArgs,
    #[command(flatten)]
    pub(crate) bring_up: crate::board::BringUp,
}

/// The sensor (from --camera/--mode or --sensor, which must agree) and the frame size
/// (from --frame-size or the sensor, which must agree; IMX274 1080p RAW10 by default).
pub(crate) fn sensor_and_frame(a: &ReceiveArgs) -> Result<(Option<SensorSpec>, usize)> {
    let camera = a.bring_up.sensor();
    if let (Some(c), Some(s)) = (&camera, &a.sensor)
        && c != s
    {
        bail!("--sensor {s} disagrees with --camera imx274 --mode ({c})");
    }
    let sensor = camera.or_else(|| a.sensor.clone());
    let frame_size = match (
        a.frame_size,
        sensor.as_ref().and_then(SensorSpec::frame_len),
    ) {
        (Some(f), Some(s)) if f != s => bail!(
            "--frame-size {f} disagrees with --sensor {} ({s} bytes)",
            sensor.as_ref().map(|s| s.to_string()).unwrap_or_default()
        ),
        (Some(f), _) | (None, Some(f)) => f,
        (None, None) => 2_611_376,
    };
    Ok((sensor, frame_size))
}

/// `receive`, over RoCE or (`--coe`) Camera over Ethernet.
pub(crate) fn receive(a: &ReceiveArgs) -> Result<ExitCode> {
    let (sensor, frame_size) = sensor_and_frame(a)?;
    let cfg = host_config(a, sensor.as_ref(), frame_size)?;
    let several = cfg.vps.len() > 1;
    let outs: Vec<Output> = match several {
        true => cfg.vps.iter().map(|&v| a.out.for_vp(v)).collect(),
        false => vec![a.out.clone()],
    };
    for o in &outs {
        o.check(sensor.as_ref())?;
    }
    let stop = StopFlag::install()?;
    let counters = crate::stats::Counters::start("receive", &a.counters)?;
    let view = crate::view::camera(
        &a.view,
        "receive",
        sensor.as_ref(),
        frame_size,
        &counters.board,
    )?;
    let live = view.as_ref().map(rocelink_view::Served::live);
    let sinks = outs
        .iter()
        .map(|o| o.open(sensor.as_ref(), frame_size, live))
        .collect::<Result<Vec<_>>>()?;
    let (quiet, device) = (a.out.quiet, cfg.device.ip());
    let session = HostSession::start(cfg, sinks, Some(counters.board.clone()), &mut |n| {
        if quiet {
        } else if let Note::Port { .. } | Note::CoePort { .. } = n {
            eprintln!("rocelink receive: device {device} {n}");
        } else {
            eprintln!("rocelink receive: {n}");
        }
    })
    .map_err(with_flag_hint)?;
    let stopper = session.stopper();
    while !session.is_finished() {
        if stop.is_set() {
            stopper.stop();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let Ok(sum) = session.wait();
    report(a, &counters, sum, several, view)
}

/// The session the flags describe, checked by the library (`HostConfig::check`) before
/// anything opens, its errors worded with the flags at fault.
fn host_config(
    a: &ReceiveArgs,
    sensor: Option<&SensorSpec>,
    frame_size: usize,
) -> Result<HostConfig> {
    let mut cfg = match &a.coe {
        Some(ifname) => coe_config(a, ifname, sensor, frame_size)?,
        None => roce_config(a, frame_size)?,
    };
    cfg.vps = a.vp.clone();
    cfg.pages = a.pages;
    if let Some(m) = a.mtu {
        cfg.mtu = m;
    }
    cfg.md_disable = a.md_disable;
    cfg.layout = a.layout.opts();
    cfg.pcap = a.pcap.clone();
    (cfg.tuning, cfg.xdp) = a.tune.session();
    cfg.bring_up = a.bring_up.session();
    cfg.limits = match a.frames {
        Some(n) => Limits::frames(n),
        None => Limits::unlimited(),
    }
    .with_seconds(a.seconds)
    .with_timeout(a.timeout);
    cfg.check(cfg.vps.len()).map_err(config_flags)?;
    Ok(cfg)
}

/// `--coe IFACE`: the device (`--device`, told over ECB to send CoE) and the channel; a
/// sensor's pixel width is its line length.
fn coe_config(
    a: &ReceiveArgs,
    ifname: &str,
    sensor: Option<&SensorSpec>,
    frame_size: usize,
) -> Result<HostConfig> {
    let Some(ip) = a.device else {
        bail!("--coe needs --device: the device is told over ECB to send CoE");
    };
    let mut coe = Coe::on(ifname);
    coe.channel = a.coe_channel;
    if let Some(g) = sensor.and_then(|s| s.image()) {
        coe.line_bytes = g.width;
    }
    let device = Device::Ecb {
        ip,
        control_port: a.control_port,
    };
    Ok(HostConfig::coe(device, coe, frame_size))
}

/// RoCE: a device on ECB received at `--bind`/`--port` (or the address that routes to it),
/// or a passive one (`--listen`).
fn roce_config(a: &ReceiveArgs, frame_size: usize) -> Result<HostConfig> {
    let (local, device) = match (a.listen, a.device) {
        (Some(l), _) => {
            let (Some(qp), Some(rkey), Some(ip)) = (a.qp, a.rkey, a.device_ip) else {
                bail!("--listen needs --qp, --rkey and --device-ip");
            };
            (l, Device::Passive { ip, qp, rkey })
        }
        (None, Some(dev)) => (
            local_for(a, dev, a.vp.len() as u16)?,
            Device::Ecb {
                ip: dev,
                control_port: a.control_port,
            },
        ),
        (None, None) => bail!("--device IP is required (or --listen with --qp/--rkey/--device-ip)"),
    };
    Ok(HostConfig::new(device, local, frame_size))
}

/// A configuration `HostConfig::check` refused, in the words of the flags that made it.
fn config_flags(e: HostError) -> anyhow::Error {
    match e {
        HostError::Vps => anyhow!("--vp names a virtual port twice"),
        HostError::PassiveSeveral => {
            anyhow!("--listen receives one virtual port; give --device to receive several")
        }
        HostError::PassiveCamera => {
            anyhow!("--camera needs --device: the camera is brought up over the device's I2C")
        }
        HostError::Ring { pages, page } => anyhow!(
            "a ring of {pages} pages of {page} bytes is over {} GiB: fewer --pages or a smaller --frame-size",
            MAX_RING >> 30
        ),
        HostError::PerPort { what, given, vps } => {
            let flag = match what {
                PerPortList::XdpQueues => "--xdp-queue",
                PerPortList::Cpus => "--pin-cpu",
            };
            anyhow!(
                "{flag} gives {given} values for {vps} virtual port(s) (--vp): give one, or one per port"
            )
        }
        HostError::PortRange(p) => anyhow!("--port {p} too high for --vp"),
        HostError::XdpIpv6(ip) => anyhow!("--xdp receives IPv4 only, not {ip}"),
        HostError::XdpMtu(m) => {
            anyhow!("--xdp takes frames of up to 4 KiB: give --mtu 4000 or less (not {m})")
        }
        HostError::Mtu(m) => anyhow!("--mtu {m}: the MTU must be from 256 to 9000 bytes"),
        HostError::CoeSeveral => anyhow!("--coe receives one virtual port (one --vp)"),
        HostError::CoeFrame(f) => anyhow!("--frame-size {f}: CoE offsets reach 256 MiB at most"),
        HostError::CoeXdpIface { xdp, coe } => {
            anyhow!("--xdp {xdp} and --coe {coe} name different interfaces: give the same one")
        }
        other => with_flag_hint(other),
    }
}

/// Where the host receives from `dev`: `--bind`, or the address that routes to it — on one
/// host with its port taken (the emulator's sensor TX, another receiver), another loopback
/// address serves as well, since the device is told where to send.
fn local_for(a: &ReceiveArgs, dev: Ipv4Addr, n: u16) -> Result<SocketAddr> {
    let ip = match a.bind {
        Some(ip) => ip,
        None => {
            let ip = rocelink_io::udp::local_ip_for(IpAddr::V4(dev))
                .with_context(|| format!("no route to --device {dev}"))?;
            free_loopback(ip, IpAddr::V4(dev), a.port, n)
        }
    };
    Ok(SocketAddr::new(ip, a.port))
}

/// The summary of every virtual port, the counters and AF_XDP lines, what could not be
/// undone on the device; the exit code (1 when a recording lost frames), or the first
/// virtual port's error.
fn report(
    a: &ReceiveArgs,
    counters: &crate::stats::Counters,
    mut sum: HostSummary<Sinks>,
    several: bool,
    view: Option<rocelink_view::Served>,
) -> Result<ExitCode> {
    for w in &sum.warnings {
        eprintln!("rocelink receive: warning: {w}");
    }
    crate::view::end_session(view, &sum);
    let mut rec_ok = true;
    for p in sum.ports.iter_mut() {
        rec_ok &= finish_recording(&mut p.sink, "receive")?;
    }
    for p in &sum.ports {
        let Ok(o) = &p.outcome else { continue };
        if !a.out.quiet {
            let vp = several.then(|| format!("vp {}: ", p.vp));
            let line = match &p.coe {
                Some(c) => coe_line(o, &p.stats, c),
                None => port_line(o, &p.stats),
            };
            eprintln!("rocelink receive: {}{line}", vp.unwrap_or_default());
        }
    }
    if !a.out.quiet {
        eprintln!(
            "rocelink receive: counters: {}",
            counters.board.snapshot().line()
        );
        xdp_lines(&sum.xdp);
    }
    if a.out.json {
        // after the frames' lines: the session's summary (what Python's stop() returns and
        // the view ends with), the counters table under "counters"
        println!(
            "{}",
            crate::out::summary_json(&sum, counters.board.snapshot())
        );
    }
    for p in sum.ports {
        p.outcome?;
    }
    Ok(if rec_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One virtual port's end: frames, verdicts, losses, refusals, what was verified.
fn port_line(o: &rocelink_hsb_host::Outcome, s: &ReceiverStats) -> String {
    // in place: the kernel copied the payload straight into the ring (socket path);
    // AF_XDP verifies in the UMEM and copies once, so says nothing here
    let in_place = if s.in_place > 0 {
        format!(", {} of them where they landed", s.in_place)
    } else {
        String::new()
    };
    let signal = stopped_by_signal(o);
    format!(
        "{} frames: {} good, {} damaged; {} packets dropped; {} ICRC errors; {} refused; {} datagrams verified{in_place}{signal}",
        o.frames, s.good, s.damaged, s.dropped_packets, s.icrc_errors, s.refused, s.datagrams
    )
}

/// A Camera over Ethernet port's end: frames, verdicts, losses, what was refused.
fn coe_line(o: &rocelink_hsb_host::Outcome, s: &ReceiverStats, c: &CoeCounts) -> String {
    format!(
        "{} CoE frames: {} good, {} damaged; {} packets dropped; {} kernel drops; {} refused outside the frame; {} for other channels{}",
        o.frames,
        s.good,
        s.damaged,
        s.dropped_packets,
        c.kernel_drops,
        c.out_of_bounds,
        c.other,
        stopped_by_signal(o)
    )
}

/// What a port's line ends with when Ctrl-C or SIGTERM stopped it.
fn stopped_by_signal(o: &rocelink_hsb_host::Outcome) -> &'static str {
    if o.stopped == StopReason::Stopped {
        " (stopped by signal)"
    } else {
        ""
    }
}

/// One line per AF_XDP socket (virtual ports sharing a queue share one), and a warning
/// when datagrams reached a queue whose socket does not read their port.
fn xdp_lines(xdp: &[rocelink_runtime::xdp::XdpPort]) {
    for (i, x) in xdp.iter().enumerate() {
        if xdp[..i].iter().any(|y| y.queue() == x.queue()) {
            continue;
        }
        eprintln!("rocelink receive: {}", crate::sinks::xdp_summary(x));
        crate::sinks::pfc_lines("receive", x);
        if x.stats().no_port > 0 && xdp.iter().any(|y| y.queue() != x.queue()) {
            eprintln!(
                "rocelink receive: warning: queue {} got datagrams for a data port \
                 another queue reads: steer each --port + i to its --xdp-queue \
                 (ethtool -N IFACE flow-type udp4 dst-port P action Q)",
                x.queue()
            );
        }
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// Frames to receive.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    frames: u64,
    /// Sensor of the emulated device.
    #[arg(long, default_value = "imx274-1080p-raw10", value_parser = args::sensor)]
    sensor: SensorSpec,
    /// Frames per second.
    #[arg(long, default_value = "30", value_parser = args::rate)]
    fps: f64,
    /// Record the stream (the emulator's view) to this pcap.
    #[arg(long, value_parser = args::out_file)]
    pcap: Option<PathBuf>,
    /// Loopback address of the emulated device (the receiver uses the same /24 with .1).
    /// Default: 127.0.0.2, or the next 127.0.0.x whose ports are free (another emulator
    /// may be running there).
    #[arg(long)]
    device_ip: Option<Ipv4Addr>,
    #[command(flatten)]
    out: Output,
    #[command(flatten)]
    counters: crate::stats::CounterArgs,
    #[command(flatten)]
    view: crate::view::ViewArgs,
}

/// Emulator and receiver in one process over loopback (device 127.0.0.2, host 127.0.0.1).
pub(crate) fn demo(a: &DemoArgs) -> Result<ExitCode> {
    let source = a
        .sensor
        .source(None)
        .map_err(|e| anyhow!("--sensor: {e}"))?;
    let frame_size = a.sensor.frame_len().unwrap_or(1 << 20);
    a.out.check(Some(&a.sensor))?;
    if let Some(ip) = a.device_ip.filter(|ip| !ip.is_loopback()) {
        bail!("--device-ip {ip}: the demo runs over loopback (127.0.0.0/8)");
    }
    let counters = crate::stats::Counters::start("demo", &a.counters)?;
    let stop = StopFlag::install()?;
    let dev_ip = a.device_ip.unwrap_or_else(free_device_ip);
    let mut ecfg = EmulatorConfig::new(DeviceConfig::new(dev_ip));
    ecfg.bootp_target = None;
    ecfg.sensor = source;
    ecfg.pacing = Pacing::Fps(a.fps);
    ecfg.pcap = a.pcap.clone();
    let lent = Handles {
        counters: Some(counters.board.clone()),
        notes: rocelink_runtime::Notes::to(|n| eprintln!("rocelink demo: device: {n}")),
        ..Handles::default()
    };
    // the device is bound (or the error names what is taken) before the host starts
    let emu = EmulatorSession::start(&ecfg, lent).context("emulated device")?;
    let view = crate::view::camera(
        &a.view,
        "demo",
        Some(&a.sensor),
        frame_size,
        &counters.board,
    )?;
    let live = view.as_ref().map(rocelink_view::Served::live);
    let host = demo_host(a, &ecfg, frame_size, &counters, &stop, live);
    let es = emu.stop().context("emulated device")?;
    demo_report(a, &counters, host?, &es, view)
}

/// The demo's host: receives from the emulated device until its frame count or Ctrl-C.
fn demo_host(
    a: &DemoArgs,
    ecfg: &EmulatorConfig,
    frame_size: usize,
    counters: &crate::stats::Counters,
    stop: &StopFlag,
    live: Option<&rocelink_view::Live>,
) -> Result<HostSummary<Sinks>> {
    let dev_ip = ecfg.device.ip;
    let o = dev_ip.octets();
    let host_ip = Ipv4Addr::new(o[0], o[1], o[2], 1);
    let device = Device::Ecb {
        ip: dev_ip,
        control_port: ecfg.control_port,
    };
    let mut cfg = HostConfig::new(device, SocketAddr::new(IpAddr::V4(host_ip), 0), frame_size);
    // HSB's own link, whatever loopback's MTU: 1408-byte pages, as a board sends them
    cfg.mtu = 1500;
    cfg.limits = Limits::frames(a.frames).with_timeout(Duration::from_secs(5));
    let banner = !a.out.json && !a.out.quiet;
    let out = a.out.open(Some(&a.sensor), frame_size, live)?;
    let session = HostSession::start(cfg, vec![out], Some(counters.board.clone()), &mut |n| {
        if let (
            true,
            Note::Port {
                version,
                qpn,
                rkey,
                local,
                ..
            },
        ) = (banner, n)
        {
            println!(
                "emulated HSB {:#06x} at {dev_ip} streaming {} ({frame_size} bytes/frame) at {} fps -> receiver at {local} (QP {qpn:#x}, R_Key {rkey:#x})",
                version & 0xFFFF,
                a.sensor,
                a.fps,
            );
        }
    })
    .map_err(with_flag_hint)?;
    crate::stop::watch(
        stop,
        &session.stopper(),
        &|| session.is_finished(),
        &mut || {},
    );
    let Ok(sum) = session.wait();
    Ok(sum)
}

/// The demo's summary line and exit code (1 when a frame was damaged or the recording lost
/// frames). With `--json`, after the frames' lines: `{"host": the host session's summary,
/// "device": the emulator's, "counters": the process's table}`.
fn demo_report(
    a: &DemoArgs,
    counters: &crate::stats::Counters,
    sum: HostSummary<Sinks>,
    device: &rocelink_hsb::emulator::EmulatorStats,
    view: Option<rocelink_view::Served>,
) -> Result<ExitCode> {
    for w in &sum.warnings {
        eprintln!("rocelink demo: warning: {w}");
    }
    crate::view::end_session(view, &sum);
    let json = a.out.json.then(|| {
        serde_json::json!({
            "host": serde_json::to_value(&sum).unwrap_or_default(),
            "device": serde_json::to_value(device).unwrap_or_default(),
            "counters": serde_json::to_value(counters.board.snapshot()).unwrap_or_default(),
        })
    });
    let sent = device.packets;
    let Some(mut p) = sum.ports.into_iter().next() else {
        bail!("the demo's receiver thread failed");
    };
    let rec_ok = finish_recording(&mut p.sink, "demo")?;
    let ended = p.outcome?.stopped;
    let s = p.stats;
    counters.summary("demo", a.out.json || a.out.quiet);
    if let Some(j) = json {
        println!("{j}");
    }
    if !a.out.json && !a.out.quiet {
        println!(
            "{} frames: {} good, {} damaged, {} packets dropped, {} ICRC errors (device sent {sent} packets){}",
            s.frames,
            s.good,
            s.damaged,
            s.dropped_packets,
            s.icrc_errors,
            if ended == StopReason::Stopped {
                "; stopped by signal"
            } else {
                ""
            }
        );
    }
    Ok(if s.damaged == 0 && rec_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `ip` if ports `port..port+n` are free on it; for a loopback `ip` whose ports are taken,
/// the first other 127.0.0.x (not the device's) where they are free; else `ip` (the bind
/// then names who holds it).
fn free_loopback(ip: IpAddr, device: IpAddr, port: u16, n: u16) -> IpAddr {
    let free = |ip: IpAddr| {
        let held: Vec<_> = (0..n)
            .map(|i| std::net::UdpSocket::bind(SocketAddr::new(ip, port.saturating_add(i))))
            .collect();
        held.iter().all(Result::is_ok)
    };
    if port == 0 || !ip.is_loopback() || free(ip) {
        return ip;
    }
    (1..=254u8)
        .map(|k| IpAddr::V4(Ipv4Addr::new(127, 0, 0, k)))
        .find(|&alt| alt != ip && alt != device && free(alt))
        .unwrap_or(ip)
}

/// The demo's device address: 127.0.0.2, or the first 127.0.0.x after it whose ECB port is
/// free (an emulator started by hand may hold 127.0.0.2).
fn free_device_ip() -> Ipv4Addr {
    (2..=254u8)
        .map(|k| Ipv4Addr::new(127, 0, 0, k))
        .find(|&ip| std::net::UdpSocket::bind((ip, rocelink_wire::hsb::CONTROL_PORT)).is_ok())
        .unwrap_or(Ipv4Addr::new(127, 0, 0, 2))
}

/// A host session's error with what this command's flags can do about it: another
/// address or port for a receiver whose port is held, cameras for an emulator that has
/// none.
fn with_flag_hint(e: rocelink_hsb_host::session::HostError) -> anyhow::Error {
    use rocelink_hsb::host::bring_up::BringUpError;
    use rocelink_hsb_host::session::HostError;
    let hint = match &e {
        HostError::Receiver { source, .. }
            if source.io_kind() == Some(std::io::ErrorKind::AddrInUse) =>
        {
            Some("--bind or --port choose another address or port")
        }
        HostError::BringUp { source, .. }
            if matches!(
                **source,
                BringUpError::Configure {
                    no_camera: true,
                    ..
                }
            ) =>
        {
            Some("an emulator needs `rocelink emulate --cameras N`")
        }
        _ => None,
    };
    let e = anyhow::Error::new(e);
    match hint {
        // the hint last, after what went wrong
        Some(h) => anyhow::anyhow!("{e:#} ({h})"),
        None => e,
    }
}
