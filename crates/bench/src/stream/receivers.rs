//! The receivers a stream is measured with: the sink, the ring sink, HSB's recv()-per-
//! packet loop and rocelink's receiver (fast path, generic, AF_XDP).

use super::{PAGES, QP, RKEY, StreamConfig};
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use rocelink_io::cpu::{CpuTime, thread_cpu};
use rocelink_io::scatter::{ScatterRx, Slot};
use rocelink_io::udp::{RecvBatch, UdpSocket};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(super) struct RxOut {
    pub(super) received: u64,
    pub(super) bytes: u64,
    pub(super) cpu: CpuTime,
    pub(super) frames: (u64, u64),
}

pub(super) fn sink(sock: &UdpSocket, stop: &AtomicBool) -> crate::Result<RxOut> {
    let mut batch = RecvBatch::new(64, if sock.gro() { 65_536 } else { 9216 });
    let cpu0 = thread_cpu();
    let (mut received, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if sock.recv_batch(&mut batch)? == 0 {
            sock.wait_readable(Some(Duration::from_millis(5)))?;
            continue;
        }
        for (_, seg) in batch.segments() {
            received += 1;
            bytes += seg.len().saturating_sub(32) as u64; // payload of a data packet
        }
    }
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (0, 0),
    })
}

/// The sink into a ring: each receive lands at the ring's next bytes (with GRO one
/// message of up to 64 KiB; without, up to 64 datagrams, each in a 9 216-byte slot of its
/// own), and the next receive lands after it on a cache line, wrapping to the start where
/// a receive would not fit.
struct RingSink {
    ring: rocelink_io::aligned::AlignedBuf,
    rx: ScatterRx,
    plan: Vec<Slot>,
    at: usize,
    /// Bytes per message, messages per receive.
    per: usize,
    msgs: usize,
}

impl RingSink {
    /// A ring of at least `len` bytes, in huge pages where the kernel gives them.
    fn new(len: usize, gro: bool) -> RingSink {
        let (per, msgs) = if gro { (65_536, 1) } else { (9_216, 64) };
        RingSink {
            ring: rocelink_io::aligned::AlignedBuf::huge_zeroed(len.max(per * msgs)),
            rx: ScatterRx::new(64),
            plan: Vec::with_capacity(msgs),
            at: 0,
            per,
            msgs,
        }
    }

    /// One receive without waiting: (segments, payload bytes as the sink counts them).
    fn recv(&mut self, sock: &UdpSocket) -> crate::Result<(u64, u64)> {
        let region = self.ring.as_mut();
        if self.at + self.per * self.msgs > region.len() {
            self.at = 0;
        }
        let (at, per) = (self.at, self.per);
        self.plan.clear();
        self.plan.extend((0..self.msgs).map(|m| Slot {
            head: 0,
            body: at + m * per..at + (m + 1) * per,
            tail: 0,
        }));
        let n = self.rx.recv(sock, region, &self.plan, 1, self.msgs)?;
        let (mut segs, mut bytes, mut end) = (0, 0, at);
        for (m, meta) in self.rx.meta().iter().enumerate().take(n) {
            end = at + m * per + meta.len.min(per);
            let k = meta.len.div_ceil(meta.segment.max(1)) as u64;
            segs += k;
            bytes += (meta.len as u64).saturating_sub(32 * k);
        }
        self.at = end.next_multiple_of(64);
        Ok((segs, bytes))
    }
}

/// [`sink`] into a [`RingSink`] of `len` bytes.
pub(super) fn sink_ring(sock: &UdpSocket, len: usize, stop: &AtomicBool) -> crate::Result<RxOut> {
    let mut ring = RingSink::new(len, sock.gro());
    let cpu0 = thread_cpu();
    let (mut received, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let (n, b) = ring.recv(sock)?;
        if n == 0 {
            sock.wait_readable(Some(Duration::from_millis(5)))?;
            continue;
        }
        received += n;
        bytes += b;
    }
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (0, 0),
    })
}

/// HSB's Linux receiver loop, as `linux_receiver.cpp` does it.
pub(super) fn recv1(
    sock: &std::net::UdpSocket,
    cfg: &StreamConfig,
    stop: &AtomicBool,
) -> crate::Result<RxOut> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let page = cfg.frame.next_multiple_of(128) + 128;
    let mut frames_buf = [vec![0xFFu8; page], vec![0xFFu8; page]];
    let mut cur = 0;
    let mut buf = vec![0u8; 10_240];
    let cpu0 = thread_cpu();
    let (mut received, mut bytes, mut last_psn, mut dropped, mut frames) =
        (0u64, 0u64, None::<u32>, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let _ts = std::time::SystemTime::now(); // per-packet clock read
        received += 1;
        if n < 12 + 16 + 4 {
            continue;
        }
        let opcode = buf[0];
        let psn = u32::from_be_bytes([0, buf[9], buf[10], buf[11]]);
        if let Some(l) = last_psn {
            dropped += u64::from(psn.wrapping_sub(l.wrapping_add(1)) & 0xFF_FFFF);
        }
        last_psn = Some(psn);
        let va = u64::from_be_bytes(buf[12..20].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(buf[24..28].try_into().unwrap_or_default()) as usize;
        let (hdr, len) = match opcode {
            0x2A => (28, len),
            0x2B => (32, len.saturating_sub(128)),
            _ => continue,
        };
        if hdr + len > n - 4 {
            continue;
        }
        let off = (va % page as u64) as usize;
        if off + len <= page {
            frames_buf[cur][off..off + len].copy_from_slice(&buf[hdr..hdr + len]);
            bytes += len as u64;
        }
        if opcode == 0x2B {
            frames += 1;
            cur ^= 1;
            frames_buf[cur].fill(0xFF); // lost data shows as white, as HSB does
        }
    }
    let _ = dropped;
    Ok(RxOut {
        received,
        bytes,
        cpu: thread_cpu() - cpu0,
        frames: (frames, 0),
    })
}

/// Bytes of the ring rocelink's receiver lands the stream in.
pub(super) fn ring_len(cfg: &StreamConfig) -> usize {
    let mut rc = ReceiverConfig::new(
        SocketAddr::new(IpAddr::V4(cfg.host), 0),
        cfg.device,
        cfg.frame,
    );
    rc.pages = PAGES;
    Receiver::ring_len(&rc)
}

pub(super) fn rocelink_rx(
    cfg: &StreamConfig,
    fast_path: bool,
    xdp: bool,
    port_tx: std::sync::mpsc::Sender<u16>,
    stop: &AtomicBool,
) -> crate::Result<RxOut> {
    let port = if xdp { rocelink_wire::ROCE_V2_PORT } else { 0 };
    let mut rc = ReceiverConfig::new(
        SocketAddr::new(IpAddr::V4(cfg.host), port),
        cfg.device,
        cfg.frame,
    );
    if xdp {
        let Some(v) = &cfg.veth else {
            return Err(crate::BenchError::Setting(
                "the xdp receiver runs over a veth link (the xdp backend)".into(),
            ));
        };
        let mut xc = rocelink_runtime::xdp::XdpPortConfig::new(
            &v.if_b,
            cfg.host,
            rocelink_runtime::xdp::XdpRole::Host,
        );
        xc.rx_coalesce = cfg.coalesce;
        rc.xdp = Some(rocelink_runtime::xdp::XdpPort::open(&xc)?);
    }
    rc.pages = PAGES;
    rc.qp_rkey = Some((QP, RKEY));
    // the sender cycles through the same pre-built frames (same PSNs): a replay by design
    rc.reject_stale = false;
    rc.recv_buffer = cfg.rcvbuf;
    rc.gro = cfg.gro;
    rc.fast_path = fast_path;
    rc.batch = cfg.batch;
    rc.busy_poll = cfg.busy_poll;
    rc.rx_coalesce = cfg.coalesce;
    let mut rx = Receiver::new(rc)?;
    let _ = port_tx.send(rx.local_addr().port());
    let cpu0 = thread_cpu();
    while !stop.load(Ordering::Relaxed) {
        let _ = rx.next_frame(Duration::from_millis(50))?;
    }
    Ok(RxOut {
        received: rx.stats.datagrams,
        bytes: rx.stats.bytes,
        cpu: thread_cpu() - cpu0,
        frames: (rx.stats.good, rx.stats.damaged),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_io::udp::UdpConfig;
    use std::time::Instant;

    /// Receive until `want` segments came (at most 2 s).
    fn recv_n(ring: &mut RingSink, sock: &UdpSocket, want: u64) -> (u64, u64) {
        let give_up = Instant::now() + Duration::from_secs(2);
        let (mut n, mut b) = (0, 0);
        while n < want && Instant::now() < give_up {
            let (k, x) = ring.recv(sock).unwrap();
            if k == 0 {
                sock.wait_readable(Some(Duration::from_millis(10))).unwrap();
            }
            n += k;
            b += x;
        }
        (n, b)
    }

    #[test]
    fn the_ring_sink_lands_each_datagram_in_its_slot_and_wraps() {
        let sock = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ring = RingSink::new(0, false);
        let dgrams: Vec<Vec<u8>> = [100usize, 200, 50]
            .iter()
            .enumerate()
            .map(|(i, &len)| (0..len).map(|b| (b * 7 + i * 31) as u8).collect())
            .collect();
        for d in &dgrams {
            tx.send_to(d, sock.local_addr()).unwrap();
        }
        let (n, bytes) = recv_n(&mut ring, &sock, 3);
        assert_eq!((n, bytes), (3, (100 - 32) + (200 - 32) + (50 - 32)));
        for (m, d) in dgrams.iter().enumerate() {
            assert_eq!(
                &ring.ring.as_ref()[m * 9_216..][..d.len()],
                &d[..],
                "datagram {m}"
            );
        }
        // the ring holds one receive's slots: the next receive starts over at 0
        let last = vec![0xEE; 64];
        tx.send_to(&last, sock.local_addr()).unwrap();
        assert_eq!(recv_n(&mut ring, &sock, 1), (1, 32));
        assert_eq!(&ring.ring.as_ref()[..64], &last[..]);
        assert_eq!(&ring.ring.as_ref()[9_216..][..200], &dgrams[1][..]);
    }
}
