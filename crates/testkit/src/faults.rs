//! A faulty wire for tests of receive paths: a schedule of losses, duplicates, swaps and
//! corrupted payloads applied to a packet list, and the list sent over a UDP socket in
//! segmented runs (so a GRO receiver gets several segments per message).

use rocelink_io::udp::UdpSocket;
use rocelink_transport::sim::Rng;
use rocelink_transport::{Datagram, Endpoint};
use std::io::IoSlice;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What happens to one packet on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Sent as it is.
    None,
    /// Lost.
    Drop,
    /// Sent twice.
    Duplicate,
    /// Sent after the next one.
    SwapWithNext,
    /// Sent with a byte of its middle changed (its ICRC no longer matches).
    Corrupt,
}

/// Apply `faults` (one per packet) to `pkts`: what goes on the wire, in order.
pub fn faulty(pkts: &[Vec<u8>], faults: &[Fault]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pkts.len() {
        match faults.get(i).copied().unwrap_or(Fault::None) {
            Fault::None => out.push(pkts[i].clone()),
            Fault::Drop => {}
            Fault::Duplicate => {
                out.push(pkts[i].clone());
                out.push(pkts[i].clone());
            }
            Fault::SwapWithNext if i + 1 < pkts.len() => {
                out.push(pkts[i + 1].clone());
                out.push(pkts[i].clone());
                i += 1;
            }
            Fault::SwapWithNext => out.push(pkts[i].clone()),
            Fault::Corrupt => {
                let mut p = pkts[i].clone();
                let k = p.len() / 2;
                p[k] ^= 0x5A;
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

/// Send `wire` to `dst`: runs of up to 8 equal-sized datagrams as one GSO super-datagram,
/// `pause` between runs.
pub fn send_runs(sock: &UdpSocket, dst: SocketAddr, wire: &[Vec<u8>], pause: Duration) {
    let mut i = 0;
    while i < wire.len() {
        let mut j = i + 1;
        while j < wire.len() && j - i < 8 && wire[j].len() == wire[i].len() {
            j += 1;
        }
        let parts: Vec<IoSlice<'_>> = wire[i..j].iter().map(|p| IoSlice::new(p)).collect();
        sock.send_gso(dst, &parts, wire[i].len() as u16).unwrap();
        i = j;
        std::thread::sleep(pause);
    }
}

/// A seeded fault schedule for a transport's stream: on an unreliable one (`reliable`
/// false) every kind, about 3% each; on a reliable one only what leaves the real packets
/// in order (about 6% each: a duplicate, or a corrupted copy before the real packet, as a
/// go-back-N sender's resends would follow them).
pub fn seeded(pkts: &[Vec<u8>], seed: u64, reliable: bool) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    if !reliable {
        let faults: Vec<Fault> = (0..pkts.len())
            .map(|_| match rng.below(100) {
                0..=2 => Fault::Drop,
                3..=5 => Fault::Duplicate,
                6..=8 => Fault::SwapWithNext,
                9..=11 => Fault::Corrupt,
                _ => Fault::None,
            })
            .collect();
        return faulty(pkts, &faults);
    }
    let mut out = Vec::new();
    for p in pkts {
        match rng.below(100) {
            0..=5 => {
                let mut bad = p.clone();
                let k = bad.len() / 2;
                bad[k] ^= 0x5A;
                out.push(bad);
                out.push(p.clone());
            }
            6..=11 => {
                out.push(p.clone());
                out.push(p.clone());
            }
            _ => out.push(p.clone()),
        }
    }
    out
}

/// What `a` (at `from`) sends until neither side has anything left to send, each datagram
/// handed to `twin` (at `to`) and every answer back: the sender's packets of a clean run.
pub fn record_run(
    a: &mut Endpoint,
    from: SocketAddr,
    twin: &mut Endpoint,
    to: SocketAddr,
) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    for _ in 0..10_000 {
        let mut moved = false;
        while let Some(tx) = a.poll_transmit(now, &mut buf) {
            out.push(buf[..tx.len].to_vec());
            twin.handle_datagram(now, datagram(from, to, &buf[..tx.len]));
            moved = true;
        }
        while let Some(tx) = twin.poll_transmit(now, &mut buf) {
            a.handle_datagram(now, datagram(to, from, &buf[..tx.len]));
            moved = true;
        }
        if !moved {
            break;
        }
    }
    out
}

fn datagram<'a>(src: SocketAddr, dst: SocketAddr, payload: &'a [u8]) -> Datagram<'a> {
    Datagram {
        src,
        dst,
        ip_header: None,
        payload,
    }
}
