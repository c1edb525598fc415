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
use rocelink_hsb::emulator::{Emulator, EmulatorConfig, Pacing};
use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_session::{FrameSink, Limits, StopReason};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Frames from the receiver to the sinks until the limits or Ctrl-C/SIGTERM.
pub(crate) fn frame_loop(
    rx: &mut dyn rocelink_hsb::host::FrameSource,
    lim: &Limits,
    stop: &StopFlag,
    out: &mut Sinks,
) -> Result<(u64, StopReason)> {
    let flag = stop.arc();
    let r = rocelink_session::run(rx, lim, &flag, &mut out.list());
    out.term.done();
    let o = r?;
    Ok((o.frames, o.stopped))
}

/// Finish the recording and report it; `Ok(false)` when frames were lost to it.
pub(crate) fn finish_recording(out: &mut Sinks, cmd: &str) -> Result<bool> {
    let Some(rec) = out.rec.as_mut() else {
        return Ok(true);
    };
    rec.finish()?;
    let Some(s) = rec.summary() else {
        return Ok(true);
    };
    eprintln!(
        "rocelink {cmd}: recorded {} frames ({} bytes, {}) to {}; {} dropped by the recorder{}",
        s.frames,
        s.bytes,
        if s.direct { "direct I/O" } else { "page cache" },
        rec.dir().display(),
        s.dropped,
        s.stopped
            .as_ref()
            .map(|w| format!("; stopped early: {w}"))
            .unwrap_or_default()
    );
    // a frame limit is what the user asked for; anything else lost frames
    Ok(s.stopped.as_deref().is_none_or(|w| w.contains("limit")))
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

/// One virtual port being received: its receiver, its sinks, the camera feeding it.
struct Port {
    vp: u32,
    rx: Receiver,
    out: Sinks,
    camera: Option<rocelink_hsb::host::imx274::Camera>,
}

pub(crate) fn receive(a: &ReceiveArgs) -> Result<ExitCode> {
    if let Some(ifname) = &a.coe {
        return crate::receive_coe::receive_coe(a, ifname);
    }
    // 1. inputs
    let (sensor, frame_size) = sensor_and_frame(a)?;
    if a.bring_up.camera.is_some() && a.listen.is_some() {
        bail!("--camera needs --device: the camera is brought up over the device's I2C");
    }
    let mut vps = a.vp.clone();
    vps.sort_unstable();
    vps.dedup();
    if vps.len() != a.vp.len() {
        bail!("--vp names a virtual port twice");
    }
    let several = vps.len() > 1;
    a.tune.check(vps.len())?;
    if several && a.listen.is_some() {
        bail!("--listen receives one virtual port; give --device to receive several");
    }
    check_ring(frame_size, a.pages)?;
    let outs: Vec<Output> = match several {
        true => vps.iter().map(|&v| a.out.for_vp(v)).collect(),
        false => vec![a.out.clone()],
    };
    for o in &outs {
        o.check(sensor.as_ref())?;
    }
    let stop = StopFlag::install()?;
    let (local, device_ip, qp_rkey) = match (a.listen, a.device) {
        (Some(l), _) => {
            let (Some(q), Some(k), Some(d)) = (a.qp, a.rkey, a.device_ip) else {
                bail!("--listen needs --qp, --rkey and --device-ip");
            };
            (l, d, Some((q, k)))
        }
        (None, Some(dev)) => {
            let ip = match a.bind {
                Some(ip) => ip,
                None => {
                    let ip = rocelink_io::udp::local_ip_for(IpAddr::V4(dev))
                        .with_context(|| format!("no route to --device {dev}"))?;
                    // one host, its port taken (the emulator's sensor TX, another
                    // receiver): another loopback address serves as well, since the device
                    // is told where to send
                    let n = if several { vps.len() as u16 } else { 1 };
                    free_loopback(ip, IpAddr::V4(dev), a.port, n)
                }
            };
            (SocketAddr::new(ip, a.port), dev, None)
        }
        (None, None) => bail!("--device IP is required (or --listen with --qp/--rkey/--device-ip)"),
    };
    // 2. the receivers (socket, pcap file, ring), one per virtual port, and their sinks
    let counters = crate::stats::Counters::start("receive", &a.counters)?;
    let mut ports = Vec::with_capacity(vps.len());
    let mtu = a.mtu.unwrap_or_else(|| {
        rocelink_io::net::mtu_for_ip(local.ip()).map_or(1500, |m| m.clamp(256, 9000) as u32)
    });
    let last_port = local
        .port()
        .checked_add(if several { vps.len() as u16 - 1 } else { 0 })
        .context("--port too high for --vp")?;
    let xdp = a
        .tune
        .open_xdp(local.ip(), local.port(), last_port, mtu, vps.len())?;
    for (i, (&vp, o)) in vps.iter().zip(&outs).enumerate() {
        let mut l = local;
        if several && l.port() != 0 {
            l.set_port(
                l.port()
                    .checked_add(i as u16)
                    .context("--port too high for --vp")?,
            );
        }
        let mut cfg = ReceiverConfig::new(l, device_ip, frame_size);
        cfg.pages = a.pages;
        cfg.mtu = mtu;
        cfg.vp = vp;
        cfg.md_disable = a.md_disable;
        cfg.layout = a.layout.opts();
        cfg.qp_rkey = qp_rkey;
        cfg.pcap = match (&a.pcap, several) {
            (Some(p), true) => Some(crate::sinks::suffixed(p, vp)),
            (p, _) => p.clone(),
        };
        a.tune.apply(&mut cfg)?;
        cfg.xdp = xdp.get(i).cloned();
        let mut rx = Receiver::new(cfg).with_context(|| format!("receiver for --vp {vp}"))?;
        match several {
            true => rx.publish_as(counters.board.clone(), &format!("vp{vp}")),
            false => rx.publish_to(counters.board.clone()),
        }
        let out = o.open(sensor.as_ref(), frame_size)?;
        ports.push(Port {
            vp,
            rx,
            out,
            camera: None,
        });
    }
    // 3. the device: every port's data channel, then PTP and the cameras, one at a time
    let mut ctl = None;
    if qp_rkey.is_none() {
        let mut c = Control::new(SocketAddr::new(IpAddr::V4(device_ip), a.control_port))?;
        let version = c
            .read(rocelink_hsb::regs::HSB_IP_VERSION)
            .with_context(|| format!("device {device_ip}:{} did not answer ECB", a.control_port))?;
        let brought_up = (|| -> Result<()> {
            for (i, p) in ports.iter_mut().enumerate() {
                if !a.out.quiet {
                    eprintln!(
                        "rocelink receive: device {device_ip} HSB IP {:#06x}; vp {} QP {:#x} R_Key {:#x} at {}",
                        version & 0xFFFF,
                        p.vp,
                        p.rx.qpn(),
                        p.rx.rkey(),
                        p.rx.local_addr()
                    );
                }
                p.rx.configure(&mut c)?;
                let mut b = a.bring_up.clone();
                b.ptp &= i == 0;
                p.camera = b.run(&mut c, p.vp, a.out.quiet)?;
            }
            Ok(())
        })();
        if let Err(e) = brought_up {
            shut_down(&mut ports, &mut c);
            return Err(e);
        }
        ctl = Some(c);
    }
    // 4. frames: one thread per port when there are several
    let lim = Limits::unlimited()
        .with_seconds(a.seconds)
        .with_timeout(a.timeout);
    let lim = match a.frames {
        Some(n) => Limits::frames(n)
            .with_seconds(a.seconds)
            .with_timeout(a.timeout),
        None => lim,
    };
    let results: Vec<Result<(u64, StopReason)>> = if several {
        std::thread::scope(|s| {
            let hs: Vec<_> = ports
                .iter_mut()
                .enumerate()
                .map(|(i, p)| {
                    let (lim, stop, cpu) = (&lim, &stop, a.tune.cpu_for(i));
                    s.spawn(move || {
                        if let Some(c) = cpu {
                            rocelink_io::net::pin_current_thread(c)
                                .with_context(|| format!("cannot pin vp {} to CPU {c}", p.vp))?;
                        }
                        frame_loop(&mut p.rx, lim, stop, &mut p.out)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a receive thread panicked")))
                })
                .collect()
        })
    } else {
        ports
            .iter_mut()
            .map(|p| frame_loop(&mut p.rx, &lim, &stop, &mut p.out))
            .collect()
    };
    // 5. stop the cameras and the device, finish the recordings, summary
    if let Some(c) = ctl.as_mut() {
        shut_down(&mut ports, c);
    }
    let mut rec_ok = true;
    for p in ports.iter_mut() {
        rec_ok &= finish_recording(&mut p.out, "receive")?;
    }
    for (p, r) in ports.iter().zip(&results) {
        let name = match several {
            true => format!("vp{}", p.vp),
            false => "data".to_string(),
        };
        counters.board.set_link(p.rx.link(&name));
        let Ok((n, ended)) = r else { continue };
        if a.out.quiet {
            continue;
        }
        let s = p.rx.stats;
        eprintln!(
            "rocelink receive: {}{n} frames: {} good, {} damaged; {} packets dropped; {} ICRC errors; {} refused; {} datagrams verified{}{}",
            if several {
                format!("vp {}: ", p.vp)
            } else {
                String::new()
            },
            s.good,
            s.damaged,
            s.dropped_packets,
            s.icrc_errors,
            s.refused,
            s.datagrams,
            // in place: the kernel copied the payload straight into the ring (socket
            // path); AF_XDP verifies in the UMEM and copies once, so says nothing here
            if s.in_place > 0 {
                format!(", {} of them where they landed", s.in_place)
            } else {
                String::new()
            },
            if *ended == StopReason::Stopped {
                " (stopped by signal)"
            } else {
                ""
            }
        );
    }
    if !a.out.quiet {
        eprintln!(
            "rocelink receive: counters: {}",
            counters.board.snapshot().line()
        );
        for (i, x) in xdp.iter().enumerate() {
            // one line per AF_XDP socket (virtual ports sharing a queue share one)
            if xdp[..i].iter().all(|y| y.queue() != x.queue()) {
                eprintln!("rocelink receive: {}", crate::sinks::xdp_summary(x));
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
    }
    for r in results {
        r?;
    }
    Ok(if rec_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Stop every port's camera, then its stream (warnings, not errors: this runs on the way
/// out).
fn shut_down(ports: &mut [Port], c: &mut Control) {
    for p in ports.iter_mut() {
        if let Some(cam) = p.camera.take()
            && let Err(e) = crate::board::stop_camera(cam, c)
        {
            eprintln!(
                "rocelink receive: warning: could not stop camera {}: {e:#}",
                p.vp
            );
        }
        if let Err(e) = p.rx.stop(c) {
            eprintln!(
                "rocelink receive: warning: could not stop the stream of vp {}: {e}",
                p.vp
            );
        }
    }
}

/// The ring is pages × (frame rounded up + metadata page): refuse what cannot be allocated.
fn check_ring(frame_size: usize, pages: u32) -> Result<()> {
    const MAX_RING: usize = 8 << 30;
    let (_, page) = rocelink_hsb::host::receiver::page_layout(frame_size);
    if page.saturating_mul(pages as usize) > MAX_RING {
        bail!(
            "a ring of {pages} pages of {page} bytes is over {} GiB: fewer --pages or a smaller --frame-size",
            MAX_RING >> 30
        );
    }
    Ok(())
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
}

/// The host side of a demo run, kept so the device can be stopped and the recording
/// finished whatever happened.
struct Ran {
    rx: Receiver,
    ctl: Control,
    r: Result<(u64, StopReason)>,
    out: Sinks,
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
    let o = dev_ip.octets();
    let host_ip = Ipv4Addr::new(o[0], o[1], o[2], 1);
    let mut cfg = EmulatorConfig::new(DeviceConfig::new(dev_ip));
    cfg.bootp_target = None;
    cfg.sensor = source;
    cfg.pacing = Pacing::Fps(a.fps);
    cfg.pcap = a.pcap.clone();
    cfg.counters = Some(counters.board.clone());
    // the device is bound (or the error names what is taken) before the host starts
    let emu = Emulator::bind(&cfg).context("emulated device")?;
    let emu_stop = StopFlag::never();
    let es2 = emu_stop.arc();
    let emu = std::thread::spawn(move || emu.run(es2));
    let mut rcfg = ReceiverConfig::new(SocketAddr::new(IpAddr::V4(host_ip), 0), dev_ip, frame_size);
    rcfg.pages = 4;
    let run = || -> Result<Ran> {
        let rx = Receiver::new(rcfg)?;
        let mut ctl = Control::new(SocketAddr::new(IpAddr::V4(dev_ip), cfg.control_port))?;
        let version = ctl.read(rocelink_hsb::regs::HSB_IP_VERSION)?;
        if !a.out.json && !a.out.quiet {
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
        let mut out = a.out.open(Some(&a.sensor), frame_size)?;
        let mut rx = rx;
        rx.publish_to(counters.board.clone());
        rx.configure(&mut ctl)?;
        let lim = Limits::frames(a.frames).with_timeout(Duration::from_secs(5));
        let r = frame_loop(&mut rx, &lim, &stop, &mut out);
        Ok(Ran { rx, ctl, r, out })
    };
    let mut ran = run();
    let rec_ok = match ran {
        Ok(Ran {
            ref rx,
            ref mut ctl,
            ref mut out,
            ..
        }) => {
            let _ = rx.stop(ctl);
            finish_recording(out, "demo")
        }
        Err(_) => Ok(true),
    };
    emu_stop
        .arc()
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let es = emu
        .join()
        .map_err(|_| anyhow!("emulator thread panicked"))?
        .context("emulated device")?;
    let Ran { rx, r, .. } = ran?;
    let rec_ok = rec_ok?;
    let (_, ended) = r?;
    let s = rx.stats;
    counters.finish("demo", rx.link("data"), a.out.json || a.out.quiet);
    if !a.out.json && !a.out.quiet {
        println!(
            "{} frames: {} good, {} damaged, {} packets dropped, {} ICRC errors (device sent {} packets){}",
            s.frames,
            s.good,
            s.damaged,
            s.dropped_packets,
            s.icrc_errors,
            es.packets,
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
