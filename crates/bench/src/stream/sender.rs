//! The sender: HSB frames built once, replayed from the "device" address.

use super::{PAGES, QP, RKEY, StreamConfig};
use rocelink_hsb::device::VpStream;
use rocelink_hsb::device::packetizer::{Packetizer, PacketizerOptions};
use rocelink_io::backend::{Outgoing, Transmitter};
use rocelink_io::cpu::pin_current_thread;
use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_wire::bytes::Mac;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn vp_stream(cfg: &StreamConfig, port: u16) -> VpStream {
    let md = cfg.frame.next_multiple_of(128);
    VpStream {
        vp: 0,
        qp: QP,
        rkey: RKEY,
        base: 0,
        page_stride: (md + 128) as u64,
        first_page: 0,
        pages: PAGES,
        window: cfg.frame as u32,
        host: SocketAddrV4::new(cfg.host, port),
        host_mac: Mac([0; 6]),
        md_disable: false,
        payload: cfg.payload,
        src_port: rocelink_wire::hsb::DATA_SOURCE_PORT,
        vlan: None,
        camera: None,
        coe: None,
    }
}

/// `PAGES` frames of packets addressed to `port`.
fn build_frames(cfg: &StreamConfig, port: u16) -> Vec<Vec<Vec<u8>>> {
    let mut p = Packetizer::new(
        vp_stream(cfg, port),
        cfg.device,
        1,
        PacketizerOptions::default(),
    );
    let mut frame = vec![0u8; cfg.frame];
    (0..PAGES)
        .map(|n| {
            rocelink_hsb::sensor::Sensor::Pattern.frame(u64::from(n), cfg.frame, &mut frame);
            let mut out = Vec::new();
            p.push(&frame, Some(0), (0, 0), &mut out);
            out
        })
        .collect()
}

/// Send frames until `stop` from `sock` (or a socket bound here, in the device's
/// namespace); returns datagrams sent.
pub(super) fn sender(
    cfg: &StreamConfig,
    port: u16,
    stop: &AtomicBool,
    sock: Option<UdpSocket>,
) -> crate::Result<u64> {
    if cfg.pin {
        let _ = pin_current_thread(cfg.cpus.0);
    }
    if let Some(v) = &cfg.veth {
        rocelink_io::netns::enter(&v.ns_a)?;
    }
    let sock = match sock {
        Some(s) => s,
        None => UdpSocket::bind(
            SocketAddr::new(IpAddr::V4(cfg.device), rocelink_wire::hsb::DATA_SOURCE_PORT),
            &UdpConfig::default(),
        )?,
    };
    let frames = build_frames(cfg, port);
    let dst = SocketAddr::new(IpAddr::V4(cfg.host), port);
    let start = Instant::now();
    let (mut sent, mut bytes) = (0u64, 0u64);
    // equal-sized runs of up to 15 segments (≤ 64 KB) segmented, or 64 datagrams batched
    let mut tx = Transmitter::new(cfg.gso).with_max_run(15);
    let frames: Vec<Vec<Outgoing<'_>>> = frames
        .iter()
        .map(|f| f.iter().map(|p| Outgoing::whole(dst, p)).collect())
        .collect();
    'outer: loop {
        for f in &frames {
            let mut i = 0;
            while i < f.len() {
                if stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let end = if tx.segmenting() {
                    i + tx.run_len(&f[i..]).max(1)
                } else {
                    (i + 64).min(f.len())
                };
                let n = tx.send(&sock, &f[i..end])?;
                if n == 0 {
                    sock.wait_writable(Some(Duration::from_millis(1)))?;
                    continue;
                }
                bytes += f[i..i + n].iter().map(|p| p.len() as u64).sum::<u64>();
                sent += n as u64;
                i += n;
                if let Some(r) = cfg.rate_gbps {
                    let due = start + Duration::from_secs_f64(bytes as f64 * 8.0 / (r * 1e9));
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
            }
        }
    }
    Ok(sent)
}

/// The device's socket over loopback: port 12288 (HSB's data source port) on the
/// configured device address, or on the next free one of its /24 when another run holds
/// it. Returns the socket and the address it took.
pub(super) fn bind_device(cfg: &StreamConfig) -> crate::Result<(UdpSocket, Ipv4Addr)> {
    let [a, b, c, first] = cfg.device.octets();
    for last in first..=254 {
        let ip = Ipv4Addr::new(a, b, c, last);
        if ip == cfg.host {
            continue;
        }
        let at = SocketAddr::new(IpAddr::V4(ip), rocelink_wire::hsb::DATA_SOURCE_PORT);
        match UdpSocket::bind(at, &UdpConfig::default()) {
            Ok(sock) => return Ok((sock, ip)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(crate::BenchError::doing(format!("bind {at}"))(e)),
        }
    }
    Err(crate::BenchError::Io(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "port {} is taken on every address from {} to {a}.{b}.{c}.254",
            rocelink_wire::hsb::DATA_SOURCE_PORT,
            cfg.device
        ),
    )))
}
