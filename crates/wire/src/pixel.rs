//! Pixel codecs of the sensors rocelink carries: MIPI CSI-2 RAW10/RAW12 (as IMX274 frames
//! hold them) and the Camera-over-Ethernet packed RAW10/RAW12 lines (`docs/reference/hsb.md`, "Formats").

/// Unpack CSI RAW10 (4 pixels in 5 bytes) to 10-bit values.
pub fn unpack_raw10(b: &[u8], out: &mut Vec<u16>) {
    for c in b.chunks_exact(5) {
        for i in 0..4 {
            out.push((u16::from(c[i]) << 2) | ((u16::from(c[4]) >> (2 * i)) & 3));
        }
    }
}

/// Unpack CSI RAW12 (2 pixels in 3 bytes) to 12-bit values.
pub fn unpack_raw12(b: &[u8], out: &mut Vec<u16>) {
    for c in b.chunks_exact(3) {
        out.push((u16::from(c[0]) << 4) | (u16::from(c[2]) & 0xF));
        out.push((u16::from(c[1]) << 4) | (u16::from(c[2]) >> 4));
    }
}

/// Bytes per line of the CoE (Camera-over-Ethernet / Thor packetizer) packed format:
/// RAW10 packs 3 pixels per little-endian 32-bit word, RAW12 2 pixels per 3 bytes; lines
/// are padded to 64 bytes (`docs/reference/hsb.md`, "Formats").
pub fn coe_bytes_per_line(width: usize, bits: usize) -> usize {
    let packed = if bits == 10 {
        width.div_ceil(3) * 4
    } else {
        (width * 3).div_ceil(2)
    };
    packed.next_multiple_of(64)
}

/// Unpack one CoE RAW10 line: `{2'b0, P2[9:0], P1[9:0], P0[9:0]}` per little-endian u32.
/// Pushes exactly `width` pixels (fewer if the line is short).
pub fn unpack_coe_raw10(line: &[u8], width: usize, out: &mut Vec<u16>) {
    let mut left = width;
    for c in line.chunks_exact(4) {
        let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        for i in 0..3.min(left) {
            out.push(((w >> (10 * i)) & 0x3FF) as u16);
        }
        left = left.saturating_sub(3);
        if left == 0 {
            break;
        }
    }
}

/// Unpack one CoE RAW12 line: `b0 = P0[7:0], b1 = P0[11:8] | P1[3:0]<<4, b2 = P1[11:4]`
/// (not the CSI order). Pushes exactly `width` pixels (fewer if the line is short).
pub fn unpack_coe_raw12(line: &[u8], width: usize, out: &mut Vec<u16>) {
    let mut left = width;
    for c in line.chunks_exact(3) {
        let p0 = u16::from(c[0]) | (u16::from(c[1] & 0xF) << 8);
        let p1 = u16::from(c[1] >> 4) | (u16::from(c[2]) << 4);
        for p in [p0, p1].into_iter().take(left) {
            out.push(p);
        }
        left = left.saturating_sub(2);
        if left == 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_raw10_and_raw12_byte_arrays() {
        // RAW10: four MSB bytes, then the four 2-bit LSBs packed low first
        let mut px = Vec::new();
        unpack_raw10(&[0xFF, 0x00, 0x80, 0x01, 0b11_10_01_00], &mut px);
        assert_eq!(px, [0x3FC, 0x001, 0x202, 0x007]);
        px.clear();
        // RAW12: two MSB bytes, then LSB nibbles (first pixel low)
        unpack_raw12(&[0xAB, 0xCD, 0x21], &mut px);
        assert_eq!(px, [0xAB1, 0xCD2]);
    }

    #[test]
    fn coe_lines() {
        assert_eq!(coe_bytes_per_line(100, 10), 192);
        assert_eq!(coe_bytes_per_line(100, 12), 192);
        let w = 0x3FFu32 | (0x155 << 10) | (0x2AA << 20);
        let mut px = Vec::new();
        unpack_coe_raw10(&w.to_le_bytes(), 2, &mut px);
        assert_eq!(px, [0x3FF, 0x155], "exactly width pixels");
        px.clear();
        unpack_coe_raw12(&[0x34, 0x52, 0x16], 2, &mut px);
        assert_eq!(px, [0x234, 0x165]);
    }
}
