//! `receive --coe IFACE`: Camera-over-Ethernet frames from a raw socket (or AF_XDP with
//! `--xdp IFACE`), the device
//! programmed for CoE over ECB, then the same frame loop and sinks as RoCE receive.

use crate::receive::{ReceiveArgs, finish_recording, frame_loop, sensor_and_frame};
use crate::stop::StopFlag;
use anyhow::{Context, Result, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::host::coe_receiver::{CoeReceiver, CoeReceiverConfig};
use rocelink_hsb::host::control::Control;
use rocelink_hsb_host::{Limits, StopReason};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

pub(crate) fn receive_coe(a: &ReceiveArgs, ifname: &str) -> Result<ExitCode> {
    // 1. inputs
    let (sensor, frame_size) = sensor_and_frame(a)?;
    let Some(device) = a.device else {
        bail!("--coe needs --device: the device is told over ECB to send CoE");
    };
    let [vp] = a.vp[..] else {
        bail!("--coe receives one virtual port (one --vp)");
    };
    if frame_size > rocelink_wire::hsb::coe::MAX_OFFSET as usize {
        bail!("--frame-size {frame_size}: CoE offsets reach 256 MiB at most");
    }
    a.out.check(sensor.as_ref())?;
    let stop = StopFlag::install()?;
    // 2. the socket and the sinks
    let cfg = coe_config(a, ifname, vp, sensor.as_ref(), frame_size)?;
    let xdp = cfg.xdp.clone();
    let mut rx = CoeReceiver::new(cfg).with_context(|| format!("--coe {ifname}"))?;
    let counters = crate::stats::Counters::start("receive", &a.counters)?;
    let view = crate::view::camera(
        &a.view,
        "receive",
        sensor.as_ref(),
        frame_size,
        &counters.board,
    )?;
    let mut out = a.out.open(
        sensor.as_ref(),
        frame_size,
        view.as_ref().map(rocelink_view::Served::live),
    )?;
    // 3. the device
    let mut c = Control::new(SocketAddr::new(IpAddr::V4(device), a.control_port))?;
    let camera = bring_up(a, ifname, &mut rx, &mut c)?;
    // 4. frames
    let lim = match a.frames {
        Some(n) => Limits::frames(n),
        None => Limits::unlimited(),
    }
    .with_seconds(a.seconds)
    .with_timeout(a.timeout);
    let r = frame_loop(&mut rx, &lim, &stop, &mut out);
    // 5. stop the camera and the stream, finish the recording, summary
    if let Some(cam) = camera
        && let Err(e) = rocelink_hsb::host::bring_up::stop_camera(cam, &mut c)
    {
        eprintln!("rocelink receive: warning: could not stop the camera: {e:#}");
    }
    if let Err(e) = rx.stop(&mut c) {
        eprintln!("rocelink receive: warning: could not stop the stream of vp {vp}: {e}");
    }
    let rec_ok = finish_recording(&mut out, "receive")?;
    let (n, ended) = r?;
    crate::view::end(view, || {
        rocelink_hsb_host::view::counts(std::iter::once((
            n,
            &rocelink_hsb::host::FrameReceiver::stats(&rx),
        )))
    });
    if !a.out.quiet {
        report(&rx, n, ended, xdp.as_ref());
        // CoE moves no RoCE packets: its own line above says what arrived
        counters.summary("receive", true);
    }
    Ok(if rec_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The CoE receiver the flags describe (its AF_XDP port opened when `--xdp` is given).
fn coe_config(
    a: &ReceiveArgs,
    ifname: &str,
    vp: u32,
    sensor: Option<&SensorSpec>,
    frame_size: usize,
) -> Result<CoeReceiverConfig> {
    let mut cfg = CoeReceiverConfig::new(ifname, frame_size);
    cfg.channel = a.coe_channel;
    cfg.mtu = a
        .mtu
        .unwrap_or_else(|| rocelink_hsb_host::session::iface_mtu(ifname));
    cfg.vp = vp;
    cfg.endian = a.layout.opts().endian;
    if let Some(g) = sensor.and_then(|s| s.image()) {
        cfg.line_bytes = g.width;
    }
    cfg.xdp = a.tune.open_xdp_coe(ifname)?;
    Ok(cfg)
}

/// Program the device for CoE, then PTP and the camera; on an error, the stream is stopped
/// again. The camera brought up, if one was.
fn bring_up(
    a: &ReceiveArgs,
    ifname: &str,
    rx: &mut CoeReceiver,
    c: &mut Control,
) -> Result<Option<rocelink_hsb::host::imx274::Camera>> {
    let (device, vp) = (c.peer(), a.vp[0]);
    let version = c
        .read(rocelink_hsb::regs::HSB_IP_VERSION)
        .with_context(|| format!("device {device} did not answer ECB"))?;
    if !a.out.quiet {
        eprintln!(
            "rocelink receive: device {} HSB IP {:#06x}; vp {vp} CoE channel {} to {ifname} ({})",
            device.ip(),
            version & 0xFFFF,
            a.coe_channel,
            rocelink_wire::bytes::Mac(rx.mac())
        );
    }
    let camera = (|| -> Result<_> {
        rx.configure(c)?;
        let up = a.bring_up.session().run(c, vp, true)?;
        if !a.out.quiet {
            if up.ptp {
                eprintln!("rocelink receive: PTP synchronised");
            }
            if let (Some((cam, n)), Some(s)) = (up.camera, a.bring_up.sensor()) {
                eprintln!(
                    "rocelink receive: IMX274 {} streaming {s} ({n} I2C transactions)",
                    cam.index()
                );
            }
        }
        Ok(up.camera.map(|(cam, _)| cam))
    })();
    if camera.is_err() {
        let _ = rx.stop(c);
    }
    camera
}

/// What arrived, on stderr.
fn report(
    rx: &CoeReceiver,
    n: u64,
    ended: StopReason,
    xdp: Option<&rocelink_runtime::xdp::XdpPort>,
) {
    let s = rx.stats;
    let k = rx.coe_stats();
    eprintln!(
        "rocelink receive: {n} CoE frames: {} good, {} damaged; {} packets dropped; {} kernel drops; {} refused outside the frame; {} for other channels{}",
        s.good,
        s.damaged,
        s.dropped_packets,
        rx.kernel_drops,
        k.out_of_bounds,
        k.other,
        if ended == StopReason::Stopped {
            " (stopped by signal)"
        } else {
            ""
        }
    );
    if let Some(x) = xdp {
        let (c, k) = x.xsk_stats();
        let (i, q) = x.bound();
        eprintln!(
            "rocelink receive: AF_XDP on {i} queue {q} ({}): {} frames",
            if x.zero_copy() {
                "zero-copy"
            } else {
                "copy mode"
            },
            c.rx_frames
        );
        if let Err(e) = k {
            eprintln!("rocelink receive: warning: AF_XDP statistics: {e}");
        }
    }
}
