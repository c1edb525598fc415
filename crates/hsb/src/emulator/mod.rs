//! The device on real sockets: ECB on `ip:8192`, BOOTP enumeration from `ip:12268` once a
//! second, and, for every virtual port the host configured and enabled, frames from the
//! sensor through the sensor window and the packetizer to the host, paced.
//!
//! Data packets leave through a UDP socket bound to `ip:DP_PACKET_UDP_PORT` with
//! `IP_PMTUDISC_DO`, so the kernel writes the FPGA's IPv4 header (ToS 0, ID 0, DF, TTL 64)
//! and the ICRC computed in user space is exact for any receiver.

use crate::device::coe::CoePacketizer;
use crate::device::packetizer::{OutPacket, Packetizer, Ptp};
use crate::device::sensor_tx::SensorTx;
use crate::device::window::SensorWindow;
use crate::device::{DeviceCore, VpStream};
use crate::sensor::Sensor;
use rocelink_io::backend::{Backend, Outgoing, Transmitter};
use rocelink_io::tap::Tap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod coe;
mod config;
mod socks;
pub use config::{EmulatorConfig, EmulatorStats, Pacing};
use socks::{Dgram, Sockets, bind, bind_data, named};

/// ECB requests served per turn of the loop: a flood of control traffic delays a frame
/// by at most this many requests instead of starving the data plane.
const CONTROL_BUDGET: usize = 64;

fn ptp_now() -> Ptp {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

struct VpState {
    stream: VpStream,
    window: SensorWindow,
    packetizer: Packetizer,
    /// Set when the host chose CoE for this port.
    coe: Option<CoePacketizer>,
    frame: u64,
}

/// A device whose sockets are bound (and pcap file created): it is reachable from the
/// moment [`Emulator::bind`] returns, so a caller can start a host right after it.
pub struct Emulator {
    cfg: EmulatorConfig,
    socks: Sockets,
    raw: Option<coe::RawLink>,
    tap: Option<Tap>,
    stx_record: Option<rocelink_io::file::Output>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("ip", &self.cfg.device.ip)
            .finish_non_exhaustive()
    }
}

/// Run the emulator until `stop` is set, the frame count or the run time is reached.
pub fn run(cfg: &EmulatorConfig, stop: Arc<AtomicBool>) -> io::Result<EmulatorStats> {
    Emulator::bind(cfg)?.run(stop)
}

impl Emulator {
    /// Bind every socket of the device and create the pcap file. Errors name the address
    /// or file at fault.
    pub fn bind(cfg: &EmulatorConfig) -> io::Result<Emulator> {
        let socks = bind(
            cfg.xdp.as_ref(),
            IpAddr::V4(cfg.device.ip),
            cfg.control_port,
            cfg.sensor_tx_port,
            rocelink_wire::hsb::DATA_SOURCE_PORT,
        )?;
        let raw = coe::RawLink::open(cfg.xdp.as_ref(), cfg.coe_iface.as_deref())?;
        let tap = match &cfg.pcap {
            Some(p) => Some(Tap::new(Box::new(rocelink_io::file::Output::create(p)?))?),
            None => None,
        };
        let stx_record = match &cfg.sensor_tx_record {
            Some(p) => Some(rocelink_io::file::Output::create(p)?),
            None => None,
        };
        Ok(Emulator {
            cfg: cfg.clone(),
            socks,
            raw,
            tap,
            stx_record,
        })
    }

    /// Where ECB is served (the port chosen when 0 was asked for).
    pub fn control_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.socks.control.local_addr()
    }

    /// Serve until `stop` is set, the frame count or the run time is reached.
    pub fn run(self, stop: Arc<AtomicBool>) -> io::Result<EmulatorStats> {
        let Emulator {
            cfg,
            mut socks,
            raw,
            mut tap,
            mut stx_record,
        } = self;
        let mut stx = SensorTx::new();
        let cfg = &cfg;
        let mut core = DeviceCore::new(cfg.device.clone());
        let mut data_port = rocelink_wire::hsb::DATA_SOURCE_PORT;
        let mut bad_port = None;
        let mut stats = EmulatorStats::default();
        let start = Instant::now();
        let mut next_bootp = start;
        let mut next_frame = start;
        let mut vps: Vec<Option<VpState>> = (0..cfg.device.virtual_ports).map(|_| None).collect();
        let mut buf = [0u8; 2048];
        let mut frame_buf = Vec::new();
        let mut pkts: Vec<OutPacket> = Vec::new();
        let mut coe_pkts: Vec<Vec<u8>> = Vec::new();
        let mut coe_warned = false;
        let mut tx = Transmitter::new(cfg.gso).with_max_run(16);
        let local = cfg.device.ip.to_string();
        let mut published = start;
        let publish = |stats: &EmulatorStats| {
            if let Some(b) = &cfg.counters {
                b.set_link(stats.link(&local));
            }
        };
        let mut ptp_epoch = start;
        let mut psn_seed = (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u32)
            & 0xFF_FFFF;
        loop {
            if published.elapsed() >= Duration::from_millis(100) {
                publish(&stats);
                published = Instant::now();
            }
            if stop.load(Ordering::Relaxed)
                || cfg.run_for.is_some_and(|d| start.elapsed() >= d)
                || cfg.frames.is_some_and(|n| stats.frames >= n)
            {
                break;
            }
            let now = Instant::now();
            let wake = [
                next_frame,
                if cfg.bootp_target.is_some() {
                    next_bootp
                } else {
                    now + Duration::from_secs(1)
                },
            ]
            .into_iter()
            .min()
            .unwrap_or(now);
            socks.wait(
                wake.saturating_duration_since(now)
                    .min(Duration::from_millis(100)),
            )?;
            let dev_ip = core.ip();
            // control plane
            for _ in 0..CONTROL_BUDGET {
                let Ok((n, from)) = socks.control.recv_from(&mut buf) else {
                    break;
                };
                if !cfg.allows(from.ip()) {
                    stats.ecb_not_allowed += 1;
                    continue;
                }
                if let Some(t) = tap.as_mut() {
                    t.record(
                        from,
                        SocketAddr::new(dev_ip.into(), cfg.control_port),
                        &buf[..n],
                        0,
                    )?;
                }
                if let Some(reply) = core.handle_ecb(&buf[..n]) {
                    let _ = socks.control.send_to(&reply, from);
                    if let Some(t) = tap.as_mut() {
                        t.record(
                            SocketAddr::new(dev_ip.into(), cfg.control_port),
                            from,
                            &reply,
                            0,
                        )?;
                    }
                }
            }
            if let Some(sock) = &socks.stx {
                receive_sensor_tx(sock, &mut stx, &mut buf, stx_record.as_mut(), tap.as_mut())?;
                stats.sensor_tx = stx.stats;
            }
            let mut new_ip = None;
            while let Ok((n, from)) = socks.bootp.recv_from(&mut buf) {
                if let Some(t) = tap.as_mut() {
                    t.record(
                        from,
                        SocketAddr::new(dev_ip.into(), rocelink_wire::hsb::BOOTP_DEVICE_PORT),
                        &buf[..n],
                        0,
                    )?;
                }
                if let Some(ip) = core.handle_bootp(&buf[..n]) {
                    new_ip = Some(ip);
                }
            }
            if let Some(ip) = new_ip.filter(|&ip| ip != dev_ip) {
                if cfg.xdp.is_some() {
                    eprintln!("rocelink emulate: keeps {dev_ip} over AF_XDP (asked for {ip})");
                    continue;
                }
                match bind(
                    None,
                    IpAddr::V4(ip),
                    cfg.control_port,
                    cfg.sensor_tx_port,
                    data_port,
                ) {
                    Ok(s) => {
                        socks = s;
                        stats.ip_changes += 1;
                        vps.iter_mut().for_each(|v| *v = None);
                    }
                    Err(e) => eprintln!(
                        "rocelink emulate: cannot take address {ip} ({e}); add it to the interface"
                    ),
                }
            }
            send_events(&mut core, &socks.events, &mut stats);
            stats.ecb_requests = core.stats.requests;
            stats.ecb_errors = core.stats.errors;
            stats.programs = core.stats.programs;
            stats.i2c_transactions = core.i2c.transactions;
            stats.resets = core.stats.resets;
            let now = Instant::now();
            if core.take_reset() {
                // back from reset: streams restart from scratch and the device announces
                // itself at once, as a board does when it comes up
                vps.iter_mut().for_each(|v| *v = None);
                next_bootp = now;
                ptp_epoch = now;
            }
            core.set_ptp_synced(
                cfg.ptp_sync_after
                    .is_some_and(|d| now.duration_since(ptp_epoch) >= d),
            );
            if let Some(target) = cfg.bootp_target
                && now >= next_bootp
            {
                let ptp = ptp_now();
                let b = core.enumeration(start.elapsed().as_secs() as u16, ptp);
                if socks.bootp.send_to(&b, target).is_ok() {
                    stats.enumerations += 1;
                    if let Some(t) = tap.as_mut() {
                        t.record(
                            SocketAddr::new(
                                core.ip().into(),
                                rocelink_wire::hsb::BOOTP_DEVICE_PORT,
                            ),
                            target,
                            &b,
                            0,
                        )?;
                    }
                }
                next_bootp = now + cfg.bootp_interval;
            }
            if now < next_frame {
                continue;
            }
            // data plane: one frame per enabled virtual port
            let mut sent_bytes = 0u64;
            let mut any = false;
            for vp in 0..cfg.device.virtual_ports {
                let Some(stream) = core.vp_stream(vp) else {
                    vps[vp as usize] = None;
                    continue;
                };
                if stream.coe.is_none() && !cfg.allows(IpAddr::V4(*stream.host.ip())) {
                    // nothing to an address the device may not send to
                    stats.streams_not_allowed += 1;
                    vps[vp as usize] = None;
                    continue;
                }
                if stream.src_port != data_port {
                    // only the data socket moves; a port that cannot be had keeps the old
                    // one (the device keeps serving, as an FPGA would)
                    match bind_data(cfg.xdp.as_ref(), IpAddr::V4(core.ip()), stream.src_port) {
                        Ok(d) => {
                            socks.data = d;
                            data_port = stream.src_port;
                        }
                        Err(e) if bad_port != Some(stream.src_port) => {
                            bad_port = Some(stream.src_port);
                            eprintln!("rocelink emulate: data source port stays {data_port}: {e}");
                        }
                        Err(_) => {}
                    }
                }
                let st = vps[vp as usize].get_or_insert_with(|| {
                    psn_seed = psn_seed.wrapping_mul(1_103_515_245).wrapping_add(12345) & 0xFF_FFFF;
                    VpState {
                        stream,
                        window: SensorWindow::new(stream.window as usize, cfg.word_bytes),
                        packetizer: Packetizer::new(stream, core.ip(), psn_seed, cfg.packetizer),
                        coe: coe_packetizer(&stream, psn_seed, cfg),
                        frame: 0,
                    }
                });
                if st.stream != stream {
                    // reconfigured: keep the PSN sequence, restart the window
                    let psn = st.packetizer.psn();
                    *st = VpState {
                        stream,
                        window: SensorWindow::new(stream.window as usize, cfg.word_bytes),
                        packetizer: Packetizer::new(stream, core.ip(), psn, cfg.packetizer),
                        coe: coe_packetizer(&stream, psn, cfg),
                        frame: st.frame,
                    };
                }
                // a camera on I2C streams the frames of its mode
                let camera;
                let sensor = match stream.camera {
                    Some(m) => {
                        camera = Sensor::Imx274(m);
                        &camera
                    }
                    None => &cfg.sensor,
                };
                let tlast = sensor.frame(st.frame, stream.window as usize, &mut frame_buf);
                // sensor interface events: frame start and frame end pulses
                use rocelink_wire::hsb::event::bits;
                let (start_bit, end_bit) = if vp == 0 {
                    (bits::SIF_0_FRAME_START, bits::SIF_0_FRAME_END)
                } else {
                    (bits::SIF_1_FRAME_START, bits::SIF_1_FRAME_END)
                };
                core.set_level(start_bit, true, ptp_now());
                core.set_level(start_bit, false, ptp_now());
                st.frame += 1;
                if let Some(cp) = st.coe.as_mut() {
                    // Camera over Ethernet: raw frames to the host's MAC
                    let Some(link) = raw.as_ref() else {
                        if !coe_warned {
                            coe_warned = true;
                            eprintln!(
                                "rocelink emulate: vp {vp} is set to CoE (raw Ethernet); give --xdp IFACE or --coe-iface IFACE to send it"
                            );
                        }
                        continue;
                    };
                    coe_pkts.clear();
                    let ptp = ptp_now();
                    let mut ended = false;
                    st.window.feed(&frame_buf, tlast, |piece, end| {
                        ended |= cp.push(piece, end, ptp, &mut coe_pkts).is_some();
                    });
                    let (b, lost) = link.send_paced(stream.host_mac, &coe_pkts, cfg.link_gbps)?;
                    if ended {
                        stats.coe_frames += 1;
                        if vp == 0 {
                            stats.frames += 1;
                        }
                    }
                    stats.coe_lost += lost;
                    stats.packets += coe_pkts.len() as u64 - lost;
                    sent_bytes += b;
                    any = true;
                    core.set_level(end_bit, true, ptp_now());
                    core.set_level(end_bit, false, ptp_now());
                    send_events(&mut core, &socks.events, &mut stats);
                    continue;
                }
                pkts.clear();
                let ptp = ptp_now();
                let (win, pk) = (&mut st.window, &mut st.packetizer);
                let fb = &frame_buf;
                win.feed(fb, tlast, |piece, end| {
                    // pieces of the frame buffer are sent from where they are (gather); the
                    // window's zero padding is staged
                    let base = fb.as_ptr() as usize;
                    let at = (piece.as_ptr() as usize).wrapping_sub(base);
                    let summary = if at <= fb.len() && piece.len() <= fb.len() - at {
                        pk.push_from(fb, at..at + piece.len(), end, ptp, &mut pkts)
                    } else {
                        pk.push_owned(piece, end, ptp, &mut pkts)
                    };
                    if summary.is_some() && vp == 0 {
                        stats.frames += 1;
                    }
                });
                any = true;
                let dst = SocketAddr::V4(stream.host);
                let src = SocketAddr::new(core.ip().into(), data_port);
                sent_bytes += send_paced(
                    &*socks.data,
                    &mut tx,
                    dst,
                    &pkts,
                    &frame_buf,
                    cfg.link_gbps,
                    tap.as_mut().map(|t| (t, src)),
                )?;
                stats.packets += pkts.len() as u64;
                core.tx_packets = core.tx_packets.wrapping_add(pkts.len() as u32);
                core.set_level(end_bit, true, ptp_now());
                core.set_level(end_bit, false, ptp_now());
                send_events(&mut core, &socks.events, &mut stats);
            }
            stats.bytes += sent_bytes;
            stats.host_drops =
                socks.data.host_drops() + raw.as_ref().map_or(0, coe::RawLink::host_drops);
            next_frame = match cfg.pacing {
                Pacing::Fps(f) => next_frame + Duration::from_secs_f64(1.0 / f.max(0.001)),
                Pacing::Gbps(g) if any => {
                    now + Duration::from_secs_f64(sent_bytes as f64 * 8.0 / (g.max(0.001) * 1e9))
                }
                Pacing::Gbps(_) => now + Duration::from_millis(10),
            };
            if next_frame < Instant::now() && matches!(cfg.pacing, Pacing::Fps(_)) {
                next_frame = Instant::now(); // fell behind: do not burst to catch up
            }
        }
        if let Some(t) = tap.as_mut() {
            t.flush()?;
        }
        if let Some(f) = stx_record.as_mut() {
            io::Write::flush(f)?;
        }
        publish(&stats);
        Ok(stats)
    }
}

/// The CoE packetizer for a port the host set to CoE.
fn coe_packetizer(s: &VpStream, psn: u32, cfg: &EmulatorConfig) -> Option<CoePacketizer> {
    s.coe
        .map(|_| CoePacketizer::new(*s, psn, cfg.coe_form, cfg.packetizer.endian))
}

/// Take what waits on the sensor TX socket (a bounded number per turn): counted, and
/// what port 0 gets appended to `record`.
fn receive_sensor_tx(
    sock: &Dgram,
    stx: &mut SensorTx,
    buf: &mut [u8],
    mut record: Option<&mut rocelink_io::file::Output>,
    mut tap: Option<&mut Tap>,
) -> io::Result<()> {
    let Ok(local) = sock.local_addr() else {
        return Ok(());
    };
    for _ in 0..CONTROL_BUDGET {
        let Ok((n, from)) = sock.recv_from(buf) else {
            break;
        };
        if let Some(t) = tap.as_mut() {
            t.record(from, local, &buf[..n], 0)?;
        }
        if let Some(d) = stx.handle(from, local, &buf[..n])
            && d.port == 0
            && let Some(f) = record.as_mut()
        {
            io::Write::write_all(f, d.bytes).map_err(|e| named(e, "sensor TX recording"))?;
        }
    }
    Ok(())
}

/// Send the async event messages the device queued.
fn send_events(core: &mut DeviceCore, sock: &Dgram, stats: &mut EmulatorStats) {
    for (b, dst) in core.take_events() {
        if sock.send_to(&b, SocketAddr::V4(dst)).is_ok() {
            stats.events += 1;
        }
    }
}

/// Send `pkts` (gather packets point into `src`) to `dst`, spreading them at `gbps`: runs of
/// equal-sized packets (up to the transmitter's 16, under 64 KB) as one segmented send —
/// header, the frame's bytes where they are, pad and ICRC — the rest batched. Returns bytes
/// sent.
fn send_paced(
    sock: &dyn Backend,
    tx: &mut Transmitter,
    dst: SocketAddr,
    pkts: &[OutPacket],
    src: &[u8],
    gbps: f64,
    mut tap: Option<(&mut Tap, SocketAddr)>,
) -> io::Result<u64> {
    let out: Vec<Outgoing<'_>> = pkts
        .iter()
        .map(|p| Outgoing::new(dst, p.parts(src)))
        .collect();
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut bytes = 0u64;
    while sent < out.len() {
        // one run at a time, so the pacing below spreads them
        let run = tx.run_len(&out[sent..]).max(1);
        let n = tx.send(sock, &out[sent..sent + run])?;
        if n == 0 {
            sock.wait_writable(Some(Duration::from_millis(5)))?;
            continue;
        }
        for o in &out[sent..sent + n] {
            bytes += o.len() as u64;
            if let Some((t, from)) = tap.as_mut() {
                t.record(*from, dst, &o.parts.concat(), 0)?;
            }
        }
        sent += n;
        // pace: do not run ahead of the link
        let due = t0 + Duration::from_secs_f64(bytes as f64 * 8.0 / (gbps.max(0.01) * 1e9));
        let now = Instant::now();
        if due > now + Duration::from_micros(50) {
            std::thread::sleep(due - now);
        }
    }
    Ok(bytes)
}
