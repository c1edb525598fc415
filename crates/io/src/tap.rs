//! A pcap tap for UDP sockets: every datagram sent or received, as a raw-IP packet.

use crate::pcap::{LINKTYPE_RAW, PcapWriter};
use rocelink_wire::{icrc, udp};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

/// Records sent and received datagrams as raw IP packets. The UDP socket never shows the IP
/// header, so it is rebuilt: ID 0 and DF (what rocelink sends), or the ID recovered from
/// the ICRC for received IPv4 packets, so the capture's ICRCs verify.
pub struct Tap {
    w: PcapWriter<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

impl Tap {
    /// Write a pcap (raw IP link type) to `w`.
    pub fn new(w: Box<dyn Write + Send>) -> io::Result<Tap> {
        Ok(Tap {
            w: PcapWriter::new(w, LINKTYPE_RAW)?,
        })
    }

    /// Record one datagram from `src` to `dst` whose UDP payload is `payload`.
    pub fn record(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        ipv4_ident: u16,
    ) -> io::Result<()> {
        self.record_with_tos(src, dst, payload, ipv4_ident, 0)
    }

    /// [`Tap::record`], the IP header carrying traffic class byte `tos` (as it was sent).
    pub fn record_with_tos(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        ipv4_ident: u16,
        tos: u8,
    ) -> io::Result<()> {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let udp_len = udp::HEADER_LEN + payload.len();
        let mut u = [0u8; 8];
        udp::Repr {
            src_port: src.port(),
            dst_port: dst.port(),
            payload_len: payload.len(),
            checksum: 0,
        }
        .emit(&mut u);
        match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut h = icrc::socket_ipv4_header(s, d, udp_len);
                if ipv4_ident != 0 || tos != 0 {
                    h[1] = tos;
                    h[4..6].copy_from_slice(&ipv4_ident.to_be_bytes());
                    h[10..12].fill(0);
                    let c = rocelink_wire::ipv4::header_checksum(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                }
                self.w.write_parts(ts, &[&h, &u, payload])
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => self
                .w
                .write_parts(ts, &[&icrc::socket_ipv6_header(s, d, udp_len), &u, payload]),
            _ => Ok(()),
        }
    }

    /// Push buffered records to the file (the emulator does so when it stops).
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test can see while the tap still holds it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            // Error::other: a kernel-interface anomaly; io speaks io::Error, with no finer type
            self.0
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn flush_reaches_the_file() {
        let out = Shared::default();
        let mut t = Tap::new(Box::new(io::BufWriter::new(out.clone()))).unwrap();
        t.record(
            "127.0.0.2:12288".parse().unwrap(),
            "127.0.0.1:4791".parse().unwrap(),
            &[1, 2, 3],
            0,
        )
        .unwrap();
        assert!(out.0.lock().unwrap().is_empty(), "still buffered");
        t.flush().unwrap();
        // file header 24 + record header 16 + IPv4 20 + UDP 8 + 3
        assert_eq!(out.0.lock().unwrap().len(), 24 + 16 + 20 + 8 + 3);
    }
}
