//! The emulator serving: one loop over its parts — ECB requests, sensor TX, BOOTP
//! (announcing itself, taking a new address), and a frame per enabled virtual port, paced.

use super::coe::RawLink;
use super::socks::{Sockets, bind, bind_data};
use super::{
    CONTROL_BUDGET, Emulator, EmulatorConfig, EmulatorStats, Pacing, VpState, coe_packetizer,
    ptp_now, receive_sensor_tx, send_events, send_paced,
};
use crate::device::packetizer::{OutPacket, Packetizer};
use crate::device::sensor_tx::SensorTx;
use crate::device::window::SensorWindow;
use crate::device::{DeviceCore, VpStream};
use crate::sensor::Sensor;
use rocelink_io::backend::Transmitter;
use rocelink_io::tap::Tap;
use rocelink_wire::hsb::event::bits;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An emulator while it serves: its sockets, its device core, its clocks and what each
/// virtual port is streaming.
pub(super) struct Serving {
    cfg: EmulatorConfig,
    lent: super::Handles,
    socks: Sockets,
    raw: Option<RawLink>,
    tap: Option<Tap>,
    stx_record: Option<rocelink_io::file::Output>,
    stx: SensorTx,
    core: DeviceCore,
    /// The UDP port data leaves from, and one the host asked for that could not be had.
    data_port: u16,
    bad_port: Option<u16>,
    stats: EmulatorStats,
    clock: Clock,
    vps: Vec<Option<VpState>>,
    buf: Box<[u8; 2048]>,
    scratch: Scratch,
    tx: Transmitter,
    psn_seed: u32,
    coe_warned: bool,
}

/// When things happen.
struct Clock {
    start: Instant,
    next_bootp: Instant,
    next_frame: Instant,
    ptp_epoch: Instant,
    published: Instant,
}

/// A frame and its packets, reused from frame to frame.
#[derive(Default)]
struct Scratch {
    frame: Vec<u8>,
    pkts: Vec<OutPacket>,
    coe: Vec<Vec<u8>>,
}

impl Serving {
    pub(super) fn new(e: Emulator) -> Serving {
        let Emulator {
            cfg,
            lent,
            socks,
            raw,
            tap,
            stx_record,
        } = e;
        let start = Instant::now();
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u32;
        Serving {
            core: DeviceCore::new(cfg.device.clone()),
            vps: (0..cfg.device.virtual_ports).map(|_| None).collect(),
            tx: Transmitter::new(cfg.gso).with_max_run(16),
            cfg,
            lent,
            socks,
            raw,
            tap,
            stx_record,
            stx: SensorTx::new(),
            data_port: rocelink_wire::hsb::DATA_SOURCE_PORT,
            bad_port: None,
            stats: EmulatorStats::default(),
            clock: Clock {
                start,
                next_bootp: start,
                next_frame: start,
                ptp_epoch: start,
                published: start,
            },
            buf: Box::new([0; 2048]),
            scratch: Scratch::default(),
            psn_seed: seed & 0xFF_FFFF,
            coe_warned: false,
        }
    }

    /// Serve until `stop` is set, the frame count or the run time is reached.
    pub(super) fn run(mut self, stop: &AtomicBool) -> io::Result<EmulatorStats> {
        while !self.done(stop) {
            self.publish_now_and_then();
            self.wait()?;
            self.serve_ecb()?;
            self.serve_sensor_tx()?;
            self.serve_bootp()?;
            self.keep_up();
            self.announce()?;
            if Instant::now() >= self.clock.next_frame {
                self.stream()?;
            }
        }
        if let Some(t) = self.tap.as_mut() {
            t.flush()?;
        }
        if let Some(f) = self.stx_record.as_mut() {
            io::Write::flush(f)?;
        }
        self.publish();
        Ok(self.stats)
    }

    fn done(&self, stop: &AtomicBool) -> bool {
        stop.load(Ordering::Relaxed)
            || self
                .cfg
                .run_for
                .is_some_and(|d| self.clock.start.elapsed() >= d)
            || self.cfg.frames.is_some_and(|n| self.stats.frames >= n)
    }

    fn publish(&self) {
        if let Some(b) = &self.lent.counters {
            let mut l = self.stats.link(&self.cfg.device.ip.to_string());
            if let Some(p) = self.lent.xdp.as_ref().and_then(|x| x.pfc_stats()) {
                l.set_pfc(&p);
            }
            b.set_link(l);
        }
    }

    fn publish_now_and_then(&mut self) {
        if self.clock.published.elapsed() >= Duration::from_millis(100) {
            self.publish();
            self.clock.published = Instant::now();
        }
    }

    /// Until a socket is readable, the next frame, or the next announcement is due.
    fn wait(&mut self) -> io::Result<()> {
        let now = Instant::now();
        let bootp = match self.cfg.bootp_target {
            Some(_) => self.clock.next_bootp,
            None => now + Duration::from_secs(1),
        };
        let wake = self.clock.next_frame.min(bootp);
        self.socks.wait(
            wake.saturating_duration_since(now)
                .min(Duration::from_millis(100)),
        )
    }

    /// Answer ECB requests from allowed hosts, a bounded number per turn: a flood of
    /// control traffic delays a frame, never starves the data plane.
    fn serve_ecb(&mut self) -> io::Result<()> {
        let me = SocketAddr::new(self.core.ip().into(), self.cfg.control_port);
        for _ in 0..CONTROL_BUDGET {
            let Ok((n, from)) = self.socks.control.recv_from(&mut self.buf[..]) else {
                break;
            };
            if !self.cfg.allows(from.ip()) {
                self.stats.ecb_not_allowed += 1;
                continue;
            }
            let req = &self.buf[..n];
            if let Some(t) = self.tap.as_mut() {
                t.record(from, me, req, 0)?;
            }
            if let Some(reply) = self.core.handle_ecb(req) {
                let _ = self.socks.control.send_to(&reply, from);
                if let Some(t) = self.tap.as_mut() {
                    t.record(me, from, &reply, 0)?;
                }
            }
        }
        Ok(())
    }

    fn serve_sensor_tx(&mut self) -> io::Result<()> {
        if let Some(sock) = &self.socks.stx {
            receive_sensor_tx(
                sock,
                &mut self.stx,
                &mut self.buf[..],
                self.stx_record.as_mut(),
                self.tap.as_mut(),
            )?;
            self.stats.sensor_tx = self.stx.stats;
        }
        Ok(())
    }

    /// Take BOOTP replies; one that gives the device a new address moves its sockets there.
    fn serve_bootp(&mut self) -> io::Result<()> {
        let dev_ip = self.core.ip();
        let me = SocketAddr::new(dev_ip.into(), rocelink_wire::hsb::BOOTP_DEVICE_PORT);
        let mut new_ip = None;
        while let Ok((n, from)) = self.socks.bootp.recv_from(&mut self.buf[..]) {
            if let Some(t) = self.tap.as_mut() {
                t.record(from, me, &self.buf[..n], 0)?;
            }
            if let Some(ip) = self.core.handle_bootp(&self.buf[..n]) {
                new_ip = Some(ip);
            }
        }
        if let Some(ip) = new_ip.filter(|&ip| ip != dev_ip) {
            self.move_to(dev_ip, ip);
        }
        Ok(())
    }

    fn move_to(&mut self, old: Ipv4Addr, ip: Ipv4Addr) {
        if self.lent.xdp.is_some() {
            self.lent
                .notes
                .say(&format!("keeps {old} over AF_XDP (asked for {ip})"));
            return;
        }
        let c = &self.cfg;
        match bind(
            None,
            IpAddr::V4(ip),
            c.control_port,
            c.sensor_tx_port,
            self.data_port,
            &self.lent.notes,
        ) {
            Ok(s) => {
                self.socks = s;
                self.stats.ip_changes += 1;
                self.vps.iter_mut().for_each(|v| *v = None);
            }
            Err(e) => self.lent.notes.say(&format!(
                "cannot take address {ip} ({e}); add it to the interface"
            )),
        }
    }

    /// Events out, counters copied, a reset carried out, PTP's state.
    fn keep_up(&mut self) {
        send_events(&mut self.core, &self.socks.events, &mut self.stats);
        let (st, core) = (&mut self.stats, &self.core);
        st.ecb_requests = core.stats.requests;
        st.ecb_errors = core.stats.errors;
        st.programs = core.stats.programs;
        st.i2c_transactions = core.i2c.transactions;
        st.resets = core.stats.resets;
        let now = Instant::now();
        if self.core.take_reset() {
            // back from reset: streams restart from scratch and the device announces
            // itself at once, as a board does when it comes up
            self.vps.iter_mut().for_each(|v| *v = None);
            self.clock.next_bootp = now;
            self.clock.ptp_epoch = now;
        }
        let synced = self
            .cfg
            .ptp_sync_after
            .is_some_and(|d| now.duration_since(self.clock.ptp_epoch) >= d);
        self.core.set_ptp_synced(synced);
    }

    /// The BOOTP enumeration request, once per interval.
    fn announce(&mut self) -> io::Result<()> {
        let now = Instant::now();
        let Some(target) = self.cfg.bootp_target else {
            return Ok(());
        };
        if now < self.clock.next_bootp {
            return Ok(());
        }
        let secs = self.clock.start.elapsed().as_secs() as u16;
        let b = self.core.enumeration(secs, ptp_now());
        if self.socks.bootp.send_to(&b, target).is_ok() {
            self.stats.enumerations += 1;
            if let Some(t) = self.tap.as_mut() {
                let me =
                    SocketAddr::new(self.core.ip().into(), rocelink_wire::hsb::BOOTP_DEVICE_PORT);
                t.record(me, target, &b, 0)?;
            }
        }
        self.clock.next_bootp = now + self.cfg.bootp_interval;
        Ok(())
    }

    /// A frame on every enabled virtual port, then the time of the next.
    fn stream(&mut self) -> io::Result<()> {
        let now = Instant::now();
        let mut sent = 0u64;
        let mut any = false;
        for vp in 0..self.cfg.device.virtual_ports {
            if let Some(b) = self.stream_vp(vp)? {
                sent += b;
                any = true;
            }
        }
        self.stats.bytes += sent;
        self.stats.host_drops =
            self.socks.data.host_drops() + self.raw.as_ref().map_or(0, RawLink::host_drops);
        let next = &mut self.clock.next_frame;
        *next = match self.cfg.pacing {
            Pacing::Fps(f) => *next + Duration::from_secs_f64(1.0 / f.max(0.001)),
            Pacing::Gbps(g) if any => {
                now + Duration::from_secs_f64(sent as f64 * 8.0 / (g.max(0.001) * 1e9))
            }
            Pacing::Gbps(_) => now + Duration::from_millis(10),
        };
        if *next < Instant::now() && matches!(self.cfg.pacing, Pacing::Fps(_)) {
            *next = Instant::now(); // fell behind: do not burst to catch up
        }
        Ok(())
    }

    /// The stream the host configured on `vp`, if it may be sent: the data socket moved to
    /// the source port it asks for when it can be.
    fn enabled(&mut self, vp: u32) -> Option<VpStream> {
        let stream = self.core.vp_stream(vp)?;
        if stream.coe.is_none() && !self.cfg.allows(IpAddr::V4(*stream.host.ip())) {
            // nothing to an address the device may not send to
            self.stats.streams_not_allowed += 1;
            return None;
        }
        if stream.src_port != self.data_port {
            // only the data socket moves; a port that cannot be had keeps the old one (the
            // device keeps serving, as an FPGA would)
            let ip = IpAddr::V4(self.core.ip());
            match bind_data(self.lent.xdp.as_ref(), ip, stream.src_port) {
                Ok(d) => {
                    self.socks.data = d;
                    self.data_port = stream.src_port;
                }
                Err(e) if self.bad_port != Some(stream.src_port) => {
                    self.bad_port = Some(stream.src_port);
                    self.lent
                        .notes
                        .say(&format!("data source port stays {}: {e}", self.data_port));
                }
                Err(_) => {}
            }
        }
        Some(stream)
    }

    /// The port's state for `stream`: new, or kept with its PSN sequence when the host
    /// reconfigured it.
    fn vp_state(&mut self, vp: u32, stream: VpStream) -> VpState {
        let (ip, cfg) = (self.core.ip(), &self.cfg);
        let make = |psn: u32, frame: u64| VpState {
            stream,
            window: SensorWindow::new(stream.window as usize, cfg.word_bytes),
            packetizer: Packetizer::new(stream, ip, psn, cfg.packetizer),
            coe: coe_packetizer(&stream, psn, cfg),
            frame,
        };
        match self.vps[vp as usize].take() {
            Some(st) if st.stream == stream => st,
            // reconfigured: keep the PSN sequence, restart the window
            Some(st) => make(st.packetizer.psn(), st.frame),
            None => {
                self.psn_seed = self
                    .psn_seed
                    .wrapping_mul(1_103_515_245)
                    .wrapping_add(12345)
                    & 0xFF_FFFF;
                make(self.psn_seed, 0)
            }
        }
    }

    /// One frame on `vp`: the bytes sent, or `None` when the port is not streaming.
    fn stream_vp(&mut self, vp: u32) -> io::Result<Option<u64>> {
        let Some(stream) = self.enabled(vp) else {
            self.vps[vp as usize] = None;
            return Ok(None);
        };
        let mut st = self.vp_state(vp, stream);
        // a camera on I2C streams the frames of its mode
        let camera;
        let sensor = match stream.camera {
            Some(m) => {
                camera = Sensor::Imx274(m);
                &camera
            }
            None => &self.cfg.sensor,
        };
        let tlast = sensor.frame(st.frame, stream.window as usize, &mut self.scratch.frame);
        // sensor interface events: frame start and frame end pulses
        let (start_bit, end_bit) = if vp == 0 {
            (bits::SIF_0_FRAME_START, bits::SIF_0_FRAME_END)
        } else {
            (bits::SIF_1_FRAME_START, bits::SIF_1_FRAME_END)
        };
        self.pulse(start_bit);
        st.frame += 1;
        let sent = match st.coe.is_some() {
            true => self.send_coe(vp, &mut st, tlast)?,
            false => Some(self.send_roce(vp, &mut st, tlast)?),
        };
        self.vps[vp as usize] = Some(st);
        if sent.is_some() {
            self.pulse(end_bit);
            send_events(&mut self.core, &self.socks.events, &mut self.stats);
        }
        Ok(sent)
    }

    fn pulse(&mut self, bit: u32) {
        self.core.set_level(bit, true, ptp_now());
        self.core.set_level(bit, false, ptp_now());
    }

    /// Camera over Ethernet: the frame as raw Ethernet to the host's MAC.
    fn send_coe(&mut self, vp: u32, st: &mut VpState, tlast: bool) -> io::Result<Option<u64>> {
        let Some(link) = self.raw.as_ref() else {
            if !self.coe_warned {
                self.coe_warned = true;
                self.lent.notes.say(&format!(
                    "vp {vp} is set to CoE (raw Ethernet): it needs an AF_XDP port or a CoE interface to send it"
                ));
            }
            return Ok(None);
        };
        let Some(cp) = st.coe.as_mut() else {
            return Ok(None);
        };
        let pkts = &mut self.scratch.coe;
        pkts.clear();
        let ptp = ptp_now();
        let mut ended = false;
        st.window.feed(&self.scratch.frame, tlast, |piece, end| {
            ended |= cp.push(piece, end, ptp, pkts).is_some();
        });
        let (b, lost) = link.send_paced(st.stream.host_mac, pkts, self.cfg.link_gbps)?;
        if ended {
            self.stats.coe_frames += 1;
            if vp == 0 {
                self.stats.frames += 1;
            }
        }
        self.stats.coe_lost += lost;
        self.stats.packets += pkts.len() as u64 - lost;
        Ok(Some(b))
    }

    /// RoCE v2: the frame as UC RDMA WRITEs to the host, paced.
    fn send_roce(&mut self, vp: u32, st: &mut VpState, tlast: bool) -> io::Result<u64> {
        let Scratch { frame, pkts, .. } = &mut self.scratch;
        pkts.clear();
        let ptp = ptp_now();
        let (win, pk) = (&mut st.window, &mut st.packetizer);
        let fb = &*frame;
        let mut frames = 0;
        win.feed(fb, tlast, |piece, end| {
            // pieces of the frame buffer are sent from where they are (gather); the
            // window's zero padding is staged
            let base = fb.as_ptr() as usize;
            let at = (piece.as_ptr() as usize).wrapping_sub(base);
            let summary = if at <= fb.len() && piece.len() <= fb.len() - at {
                pk.push_from(fb, at..at + piece.len(), end, ptp, pkts)
            } else {
                pk.push_owned(piece, end, ptp, pkts)
            };
            frames += u64::from(summary.is_some());
        });
        if vp == 0 {
            self.stats.frames += frames;
        }
        let dst = SocketAddr::V4(st.stream.host);
        let src = SocketAddr::new(self.core.ip().into(), self.data_port);
        let sent = send_paced(
            &*self.socks.data,
            &mut self.tx,
            (dst, self.cfg.dscp << 2),
            pkts,
            fb,
            self.cfg.link_gbps,
            self.tap.as_mut().map(|t| (t, src)),
        )?;
        self.stats.packets += pkts.len() as u64;
        self.core.tx_packets = self.core.tx_packets.wrapping_add(pkts.len() as u32);
        Ok(sent)
    }
}
