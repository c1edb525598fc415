//! The IPv4 Identification of a packet received through a UDP socket, recovered from its ICRC.

use super::Check;
use super::combine::POLY;
use super::combine::{multmodp, x8nmodp};
use crate::ib::{BTH_LEN, ICRC_LEN};
use crate::{ipv4, udp};

/// CRC register after `bytes` from a zero register, no final XOR.
fn crc_raw0(bytes: &[u8]) -> u32 {
    let mut c = 0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
        }
    }
    c
}

/// For an IPv4 packet received through a UDP socket, the IPv4 Identification is unknown.
/// Given the check made assuming ID 0 ([`super::check_socket`]) over `ib_len` bytes (BTH … ICRC),
/// find the ID that makes the ICRC correct, if any. The CRC is linear in the ID, so this is
/// a 16-unknown linear system; a random corruption passes with probability 2⁻¹⁶, so this
/// is a weaker check than an exact one and callers must report it as such.
pub fn recover_ipv4_ident(check: &Check, ib_len: usize) -> Option<u16> {
    if ib_len < BTH_LEN + ICRC_LEN {
        return None;
    }
    let target = check.received ^ check.computed;
    if target == 0 {
        return Some(0);
    }
    // ICRC input: 8 (LRH) + 20 (IPv4) + 8 (UDP) + BTH … pad; the ID is at bytes 12..14.
    let total = 8 + ipv4::HEADER_LEN + udp::HEADER_LEN + ib_len - ICRC_LEN;
    let shift = x8nmodp(total - 14);
    // basis: the CRC change caused by each ID bit
    let mut rows: [(u32, u16); 16] = [(0, 0); 16];
    for (j, row) in rows.iter_mut().enumerate() {
        let id = 1u16 << j;
        *row = (multmodp(shift, crc_raw0(&id.to_be_bytes())), id);
    }
    // Gaussian elimination over GF(2): reduce the target by the basis
    let mut t = (target, 0u16);
    let mut basis: Vec<(u32, u16)> = Vec::with_capacity(16);
    for mut r in rows {
        for b in &basis {
            if r.0 & top_bit(b.0) != 0 {
                r = (r.0 ^ b.0, r.1 ^ b.1);
            }
        }
        if r.0 != 0 {
            for b in basis.iter_mut() {
                if b.0 & top_bit(r.0) != 0 {
                    *b = (b.0 ^ r.0, b.1 ^ r.1);
                }
            }
            basis.push(r);
        }
    }
    for b in &basis {
        if t.0 & top_bit(b.0) != 0 {
            t = (t.0 ^ b.0, t.1 ^ b.1);
        }
    }
    (t.0 == 0).then_some(t.1)
}

fn top_bit(v: u32) -> u32 {
    1u32 << (31 - v.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn recovers_an_unknown_ipv4_ident() {
        use crate::ib::{BthRepr, IbRepr, Opcode};
        use crate::roce::{IpParams, RocePacket, RoceRepr};
        let (s, d) = (
            "10.0.0.1:49152".parse::<SocketAddr>().unwrap(),
            "10.0.0.2:4791".parse::<SocketAddr>().unwrap(),
        );
        let (mut wrong, mut tried) = (0, 0);
        for (i, ident) in [0u16, 1, 0x1234, 0xFFFF, 0x8000, 77]
            .into_iter()
            .enumerate()
        {
            let mut ip = IpParams::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
            if let IpParams::V4 { ident: id, .. } = &mut ip {
                *id = ident;
            }
            let plen = 1 + i * 700;
            let r = RoceRepr {
                ip,
                src_port: 49152,
                dst_port: 4791,
                ib: IbRepr {
                    bth: BthRepr {
                        opcode: Opcode::RC_SEND_ONLY,
                        psn: 5,
                        ..Default::default()
                    },
                    payload_len: plen,
                    ..Default::default()
                },
            };
            let mut full = vec![0u8; r.buffer_len()];
            r.emit(&mut full, &vec![0x3C; plen]).unwrap();
            let ib = RocePacket::parse(&full).unwrap().ib.bytes().to_vec();
            let c = check_socket(s, d, &ib).unwrap();
            assert_eq!(c.ok(), ident == 0);
            assert_eq!(recover_ipv4_ident(&c, ib.len()), Some(ident));
            // corrupt a payload byte: some ID might still fit (2^-16), almost never
            for flip in 0..64 {
                let mut bad = ib.clone();
                let at = 12 + (flip * 7) % (ib.len() - 16);
                bad[at] ^= 1 << (flip % 8);
                let cb = check_socket(s, d, &bad).unwrap();
                tried += 1;
                if recover_ipv4_ident(&cb, bad.len()).is_some() {
                    wrong += 1;
                }
            }
        }
        assert!(wrong <= 1, "{wrong} of {tried} corruptions passed");
    }
}
