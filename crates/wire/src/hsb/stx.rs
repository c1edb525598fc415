//! Sensor TX (host → device → sensor): what the device takes off the wire and hands to a
//! sensor's transmit port, and the packet HSB's Linux audio player builds by hand.
//!
//! The device (`sensor_tx_pkt_proc`, `rx_parser`) accepts, on its RoCE port (the
//! `stx_udp_port` register, 4791 after reset), UC SEND packets and — with RoCE ACKs
//! built in — RC SEND/WRITE packets whose destination QP is not the ECB-over-RoCE QP.
//! It drops the 54 header bytes (Ethernet, IPv4, UDP, BTH) and the 4 trailing bytes and
//! routes the rest by the destination QP: sensor TX port `(qp >> 1) − 1`, so HSB's audio
//! players' QP 2 (and 3) reach port 0. The device does not check the ICRC.
//!
//! HSB has two audio senders. `audio_player.py` posts ibverbs UC SENDs to QP 2 (a true
//! RoCE v2 packet, ICRC included). `linux_audio_player.py` sends a hand-built BTH from a
//! plain UDP socket to port 4791: opcode `UC_SEND_ONLY`, the MigReq bit set, P_Key
//! 0xFFFF, QP 2, the PSN counting packets from 0, then the chunk, then — where an ICRC
//! would be — zlib's CRC-32 of the chunk alone started from 0xDEBB20E3, big-endian
//! ([`linux_trailer`]). Both reach the sensor identically.

use crate::ib::Opcode;

/// The destination QP of HSB's audio players (sensor TX port 0).
pub const AUDIO_QP: u32 = 2;

/// BTH bytes of a Linux-player packet.
pub const LINUX_HEADER_LEN: usize = 12;
/// Trailer bytes of a Linux-player packet.
pub const LINUX_TRAILER_LEN: usize = 4;

/// The sensor TX port a packet for destination QP `qp` reaches, if any (QPs 0 and 1
/// reach none).
pub fn port_for_qp(qp: u32) -> Option<usize> {
    (((qp >> 1) & 0xFF) as usize).checked_sub(1)
}

/// Whether the device hands a packet with this opcode to a sensor: UC SEND (any part),
/// RC SEND or RC WRITE (any part; devices built with RoCE ACKs).
pub fn accepts(op: Opcode) -> bool {
    let code = op.0;
    let (transport, base) = (code & 0xE0, code & 0x1F);
    let send = base <= 0x05;
    let write = (0x06..=0x0B).contains(&base);
    (transport == 0x20 && send) || (transport == 0x00 && (send || write))
}

/// The Linux player's trailer for `chunk`: zlib `crc32(0xDEBB20E3, chunk)`.
pub fn linux_trailer(chunk: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(0xDEBB_20E3);
    h.update(chunk);
    h.finalize()
}

/// Append the Linux player's packet for `chunk` with packet number `psn` to `out`:
/// BTH, chunk, trailer (the UDP payload sent to the device's port 4791).
pub fn emit_linux(psn: u32, chunk: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&((u32::from(Opcode::UC_SEND_ONLY.0) << 24) | 0x40_FFFF).to_be_bytes());
    out.extend_from_slice(&(AUDIO_QP & 0xFF_FFFF).to_be_bytes());
    out.extend_from_slice(&(psn & 0xFF_FFFF).to_be_bytes());
    out.extend_from_slice(chunk);
    out.extend_from_slice(&linux_trailer(chunk).to_be_bytes());
}

/// Whether `ib` (BTH … trailer) carries the Linux player's trailer over its payload.
pub fn is_linux_packet(ib: &[u8]) -> bool {
    if ib.len() < LINUX_HEADER_LEN + LINUX_TRAILER_LEN {
        return false;
    }
    let (body, tail) = ib.split_at(ib.len() - LINUX_TRAILER_LEN);
    let trailer = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]);
    linux_trailer(&body[LINUX_HEADER_LEN..]) == trailer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_to_port_follows_the_device() {
        assert_eq!(port_for_qp(0), None);
        assert_eq!(port_for_qp(1), None);
        assert_eq!(port_for_qp(2), Some(0));
        assert_eq!(port_for_qp(3), Some(0));
        assert_eq!(port_for_qp(4), Some(1));
        assert_eq!(port_for_qp(17), Some(7));
        // only bits 8:1 of the QP are looked at
        assert_eq!(port_for_qp(0x202), Some(0));
    }

    #[test]
    fn accepted_opcodes() {
        assert!(accepts(Opcode::UC_SEND_ONLY));
        assert!(accepts(Opcode::UC_SEND_FIRST));
        assert!(accepts(Opcode::UC_SEND_ONLY_WITH_IMMEDIATE));
        assert!(accepts(Opcode::RC_SEND_ONLY));
        assert!(accepts(Opcode(0x0A))); // RC WRITE ONLY
        assert!(!accepts(Opcode(0x2A))); // UC WRITE ONLY: the data channel's, not sensor TX
        assert!(!accepts(Opcode::UD_SEND_ONLY));
        assert!(!accepts(Opcode::RC_RDMA_READ_REQUEST));
    }

    #[test]
    fn linux_packet_bytes() {
        let chunk = [1u8, 2, 3, 0, 4, 5, 6, 0];
        let mut out = Vec::new();
        emit_linux(7, &chunk, &mut out);
        assert_eq!(
            &out[..12],
            &[0x24, 0x40, 0xFF, 0xFF, 0, 0, 0, 2, 0, 0, 0, 7],
            "opcode, MigReq, P_Key, QP 2, PSN"
        );
        assert_eq!(&out[12..20], &chunk);
        assert_eq!(out.len(), 24);
        assert!(is_linux_packet(&out));
        out[13] ^= 1;
        assert!(!is_linux_packet(&out));
    }

    #[test]
    fn trailer_is_zlib_crc32_continued_from_the_residue() {
        // zlib: crc32(0xdebb20e3, b"123456789", 9) — computed with Python's
        // zlib.crc32(b"123456789", 0xdebb20e3)
        assert_eq!(linux_trailer(b"123456789"), 0x3B7F_805B);
        assert_eq!(linux_trailer(b""), 0xDEBB_20E3);
    }
}
