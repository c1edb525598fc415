//! A faulty wire for tests of receive paths: a schedule of losses, duplicates, swaps and
//! corrupted payloads applied to a packet list, and the list sent over a UDP socket in
//! segmented runs (so a GRO receiver gets several segments per message).

use rocelink_io::udp::UdpSocket;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::time::Duration;

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
