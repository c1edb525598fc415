//! Big-endian field helpers shared by every view.
//!
//! Callers pass slices whose length was established by `new_checked`; each helper reads
//! exactly the bytes it needs and panics only on a shorter slice (a bug, never input).

/// Read a big-endian `u16` from the first two bytes.
#[inline]
pub fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Read a big-endian 24-bit value from the first three bytes.
#[inline]
pub fn be_u24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// Read a big-endian `u32` from the first four bytes.
#[inline]
pub fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Read a big-endian `u64` from the first eight bytes.
#[inline]
pub fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Read a little-endian `u16` from the first two bytes.
#[inline]
pub fn le_u16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// Read a little-endian `u32` from the first four bytes.
#[inline]
pub fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Read a little-endian `u64` from the first eight bytes.
#[inline]
pub fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Write a big-endian `u16` into the first two bytes.
#[inline]
pub fn set_be_u16(b: &mut [u8], v: u16) {
    b[..2].copy_from_slice(&v.to_be_bytes());
}

/// Write the low 24 bits of `v` big-endian into the first three bytes.
#[inline]
pub fn set_be_u24(b: &mut [u8], v: u32) {
    b[..3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// Write a big-endian `u32` into the first four bytes.
#[inline]
pub fn set_be_u32(b: &mut [u8], v: u32) {
    b[..4].copy_from_slice(&v.to_be_bytes());
}

/// Write a big-endian `u64` into the first eight bytes.
#[inline]
pub fn set_be_u64(b: &mut [u8], v: u64) {
    b[..8].copy_from_slice(&v.to_be_bytes());
}

/// Write a little-endian `u16` into the first two bytes.
#[inline]
pub fn set_le_u16(b: &mut [u8], v: u16) {
    b[..2].copy_from_slice(&v.to_le_bytes());
}

/// Write a little-endian `u32` into the first four bytes.
#[inline]
pub fn set_le_u32(b: &mut [u8], v: u32) {
    b[..4].copy_from_slice(&v.to_le_bytes());
}

/// Write a little-endian `u64` into the first eight bytes.
#[inline]
pub fn set_le_u64(b: &mut [u8], v: u64) {
    b[..8].copy_from_slice(&v.to_le_bytes());
}

/// Internet (RFC 1071) one's-complement sum of `data`, folded, not inverted.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// A MAC address.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: Mac = Mac([0xFF; 6]);

    /// Read from the first six bytes.
    pub fn from_bytes(b: &[u8]) -> Mac {
        Mac([b[0], b[1], b[2], b[3], b[4], b[5]])
    }
}

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl core::str::FromStr for Mac {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Mac> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split([':', '-']) {
            if n == 6 || part.len() != 2 {
                return Err(crate::Error::Malformed);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| crate::Error::Malformed)?;
            n += 1;
        }
        if n != 6 {
            return Err(crate::Error::Malformed);
        }
        Ok(Mac(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example bytes: 00 01 f2 03 f4 f5 f6 f7 -> sum 0xddf2
        assert_eq!(
            ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn mac_round_trip() {
        let m: Mac = "48:B0:2D:ee:84:da".parse().unwrap();
        assert_eq!(m.0, [0x48, 0xb0, 0x2d, 0xee, 0x84, 0xda]);
        assert_eq!(m.to_string(), "48:b0:2d:ee:84:da");
        assert!("48:b0:2d:ee:84".parse::<Mac>().is_err());
        assert!("48:b0:2d:ee:84:da:00".parse::<Mac>().is_err());
        assert!("4:b0:2d:ee:84:da".parse::<Mac>().is_err());
    }
}
