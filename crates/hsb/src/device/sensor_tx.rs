//! The device's sensor TX input: packets the host sends to the device's RoCE port for a
//! sensor (HSB's audio players), checked, counted and cut down to the bytes the sensor
//! gets. The device itself does not check the ICRC and hands every accepted packet on;
//! so does this model, counting what would not pass a RoCE receiver's check.

use rocelink_wire::hsb::stx;
use rocelink_wire::ib::IbPacket;
use rocelink_wire::icrc;
use std::collections::HashMap;
use std::net::SocketAddr;

/// What sensor TX received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SensorTxStats {
    /// Packets handed to a sensor TX port.
    pub packets: u64,
    /// Bytes handed to a sensor TX port.
    pub bytes: u64,
    /// Of those, packets in HSB's Linux audio player's format (CRC-32 trailer, no ICRC).
    pub linux_format: u64,
    /// Packets handed on whose trailer is neither a correct ICRC nor the Linux player's.
    pub icrc_errors: u64,
    /// Packets missing by PSN (UC has no retransmission: they are lost).
    pub lost: u64,
    /// Datagrams not for a sensor (too short, another opcode, QP 0/1): dropped.
    pub refused: u64,
}

/// Packets for one sensor TX port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// The sensor TX port (`(qp >> 1) − 1`).
    pub port: usize,
    /// The bytes for the sensor.
    pub bytes: &'a [u8],
}

/// The sensor TX input of a device.
#[derive(Debug, Default)]
pub struct SensorTx {
    next_psn: HashMap<u32, u32>,
    /// Counters.
    pub stats: SensorTxStats,
}

impl SensorTx {
    /// A device with nothing received yet.
    pub fn new() -> SensorTx {
        SensorTx::default()
    }

    /// Handle one UDP payload (`ib`: BTH … trailer) that `src` sent to the device's RoCE
    /// port `dst`. Returns what a sensor gets, or `None` for a datagram the device drops.
    pub fn handle<'a>(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        ib: &'a [u8],
    ) -> Option<Delivery<'a>> {
        let Some((port, qp, psn, bytes)) = IbPacket::new_checked(ib).ok().and_then(|p| {
            let bth = p.bth();
            let (op, qp) = (bth.opcode(), bth.dest_qp());
            let port = stx::port_for_qp(qp).filter(|_| stx::accepts(op))?;
            Some((port, qp, bth.psn(), p.payload()))
        }) else {
            self.stats.refused += 1;
            return None;
        };
        let exact = icrc::check_socket(src, dst, ib)
            .ok()
            .is_some_and(|c| c.ok() || icrc::recover_ipv4_ident(&c, ib.len()).is_some());
        if !exact {
            if stx::is_linux_packet(ib) {
                self.stats.linux_format += 1;
            } else {
                self.stats.icrc_errors += 1;
            }
        }
        if let Some(&want) = self.next_psn.get(&qp) {
            let ahead = psn.wrapping_sub(want) & 0xFF_FFFF;
            if ahead < 0x80_0000 {
                self.stats.lost += u64::from(ahead);
            }
        }
        self.next_psn.insert(qp, (psn + 1) & 0xFF_FFFF);
        self.stats.packets += 1;
        self.stats.bytes += bytes.len() as u64;
        Some(Delivery { port, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, pad_for};

    fn addrs() -> (SocketAddr, SocketAddr) {
        (
            "10.0.0.1:50000".parse().unwrap(),
            "10.0.0.2:4791".parse().unwrap(),
        )
    }

    /// A RoCE packet with an exact ICRC, as an ibverbs sender would send it.
    fn roce(op: Opcode, qp: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
        let (src, dst) = addrs();
        let repr = IbRepr {
            bth: BthRepr {
                opcode: op,
                dest_qp: qp,
                psn,
                pad_count: pad_for(payload.len()),
                ..Default::default()
            },
            payload_len: payload.len(),
            ..Default::default()
        };
        let mut b = vec![0u8; repr.buffer_len()];
        repr.emit(&mut b, payload);
        icrc::fill_socket(src, dst, &mut b).unwrap();
        b
    }

    #[test]
    fn delivers_payloads_by_qp_and_counts_losses() {
        let (src, dst) = addrs();
        let mut d = SensorTx::new();
        let a = roce(Opcode::UC_SEND_ONLY, 2, 10, &[1, 2, 3, 4]);
        let got = d.handle(src, dst, &a).unwrap();
        assert_eq!((got.port, got.bytes), (0, &[1u8, 2, 3, 4][..]));
        // PSN 11 and 12 never came
        let b = roce(Opcode::UC_SEND_ONLY, 4, 13, &[9; 8]);
        assert_eq!(d.handle(src, dst, &b).unwrap().port, 1);
        let c = roce(Opcode::UC_SEND_ONLY, 2, 13, &[5; 8]);
        d.handle(src, dst, &c).unwrap();
        assert_eq!(d.stats.lost, 2);
        assert_eq!(d.stats.packets, 3);
        assert_eq!(d.stats.bytes, 20);
        assert_eq!(d.stats.icrc_errors, 0);
    }

    #[test]
    fn odd_lengths_lose_their_pad() {
        let (src, dst) = addrs();
        let mut d = SensorTx::new();
        let a = roce(Opcode::UC_SEND_ONLY, 2, 0, &[7, 7, 7]);
        assert_eq!(d.handle(src, dst, &a).unwrap().bytes, &[7, 7, 7]);
    }

    #[test]
    fn linux_player_packets_pass_and_bad_trailers_are_counted() {
        let (src, dst) = addrs();
        let mut d = SensorTx::new();
        let mut p = Vec::new();
        stx::emit_linux(0, &[1, 2, 3, 0], &mut p);
        assert_eq!(d.handle(src, dst, &p).unwrap().bytes, &[1, 2, 3, 0]);
        assert_eq!(d.stats.linux_format, 1);
        let mut bad = roce(Opcode::UC_SEND_ONLY, 2, 1, &[1, 2, 3, 4]);
        bad[13] ^= 0x10;
        // the device hands it on anyway, as the FPGA does; it is counted
        assert!(d.handle(src, dst, &bad).is_some());
        assert_eq!(d.stats.icrc_errors, 1);
    }

    #[test]
    fn other_traffic_is_refused() {
        let (src, dst) = addrs();
        let mut d = SensorTx::new();
        // a UC WRITE (the data channel's opcode), QP 1, and garbage
        let w = roce(Opcode(0x0A | 0x20), 2, 0, &[0; 4]);
        assert!(d.handle(src, dst, &w).is_none());
        assert!(
            d.handle(src, dst, &roce(Opcode::UC_SEND_ONLY, 1, 0, &[0; 4]))
                .is_none()
        );
        assert!(d.handle(src, dst, &[0x24, 0, 0]).is_none());
        assert_eq!(d.stats.refused, 3);
        assert_eq!(d.stats.packets, 0);
    }
}
