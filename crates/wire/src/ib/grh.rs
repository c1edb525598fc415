//! The 40-byte GRH slot at the front of every UD receive buffer.
//!
//! For RoCE v2 over IPv4 the 20-byte IPv4 header sits in the **last** 20 bytes of the slot
//! and the first 20 are zero; over IPv6 the 40-byte IPv6 header fills the slot (Linux
//! `union rdma_network_hdr`, rxe `execute`).

use crate::{Error, Result, ipv4, ipv6};

/// Size of the slot.
pub const SLOT_LEN: usize = 40;

/// Which network header a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkHeader<'a> {
    /// IPv4 header (the slot's last 20 bytes).
    V4(&'a [u8]),
    /// IPv6 header (all 40 bytes).
    V6(&'a [u8]),
}

/// Fill `slot` from a network header: 20 bytes (IPv4) or 40 bytes (IPv6).
pub fn fill(slot: &mut [u8], net_header: &[u8]) -> Result<()> {
    if slot.len() < SLOT_LEN {
        return Err(Error::Truncated);
    }
    match net_header.len() {
        ipv4::HEADER_LEN => {
            slot[..20].fill(0);
            slot[20..40].copy_from_slice(net_header);
        }
        ipv6::HEADER_LEN => slot[..40].copy_from_slice(net_header),
        _ => return Err(Error::Malformed),
    }
    Ok(())
}

/// Read which header a slot holds: version 6 in byte 0 → IPv6, else version 4 in byte 20 → IPv4.
pub fn parse(slot: &[u8]) -> Result<NetworkHeader<'_>> {
    if slot.len() < SLOT_LEN {
        return Err(Error::Truncated);
    }
    if slot[0] >> 4 == 6 {
        Ok(NetworkHeader::V6(&slot[..40]))
    } else if slot[20] >> 4 == 4 && slot[..20].iter().all(|&b| b == 0) {
        Ok(NetworkHeader::V4(&slot[20..40]))
    } else {
        Err(Error::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_in_last_20() {
        let mut hdr = [0u8; 20];
        hdr[0] = 0x45;
        hdr[19] = 9;
        let mut slot = [0xA5u8; 40];
        fill(&mut slot, &hdr).unwrap();
        assert_eq!(&slot[..20], &[0u8; 20]);
        assert_eq!(parse(&slot).unwrap(), NetworkHeader::V4(&hdr[..]));
    }

    #[test]
    fn ipv6_fills_slot_and_errors() {
        let mut hdr = [0u8; 40];
        hdr[0] = 0x60;
        let mut slot = [0u8; 40];
        fill(&mut slot, &hdr).unwrap();
        assert_eq!(parse(&slot).unwrap(), NetworkHeader::V6(&hdr[..]));
        assert_eq!(fill(&mut slot, &hdr[..10]), Err(Error::Malformed));
        assert_eq!(parse(&slot[..39]), Err(Error::Truncated));
        assert_eq!(parse(&[0u8; 40]), Err(Error::Malformed));
    }
}
