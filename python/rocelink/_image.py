"""Unpack the active image of a CSI or CoE RAW10/RAW12 frame into uint16 pixels."""
import numpy as np

IMAGE_LAYOUTS = ("csi-raw10", "csi-raw12", "coe-raw10", "coe-raw12")


def unpack(data, g):
    """``data`` (uint8) as a (height, width) uint16 Bayer image; ``g`` holds the layout,
    width, height, bits, start_byte and bytes_per_line (a recording's header, a frame's
    sensor geometry)."""
    layout = g.get("layout", "")
    if layout not in IMAGE_LAYOUTS:
        raise ValueError(f"layout {layout!r} is not an image")
    w, hgt, bpl, start, bits = g["width"], g["height"], g["bytes_per_line"], g["start_byte"], g["bits"]
    lines = np.asarray(data[start: start + hgt * bpl]).reshape(hgt, bpl)
    if layout == "coe-raw10":
        # 3 pixels per little-endian u32: P0 [9:0], P1 [19:10], P2 [29:20]
        words = lines[:, : -(-w // 3) * 4].copy().view("<u4")
        px = np.stack([(words >> (10 * k)) & 0x3FF for k in range(3)], axis=-1)
        return px.reshape(hgt, -1)[:, :w].astype(np.uint16)
    if layout == "coe-raw12":
        # b0 = P0[7:0], b1 = P0[11:8] | P1[3:0] << 4, b2 = P1[11:4]
        g3 = lines[:, : -(-w // 2) * 3].astype(np.uint16).reshape(hgt, -1, 3)
        px = np.stack([g3[:, :, 0] | ((g3[:, :, 1] & 0xF) << 8), (g3[:, :, 1] >> 4) | (g3[:, :, 2] << 4)], axis=-1)
        return px.reshape(hgt, -1)[:, :w]
    lines = lines[:, : w * bits // 8].astype(np.uint16)
    if bits == 10:
        g5 = lines.reshape(hgt, w // 4, 5)
        lsb = g5[:, :, 4]
        px = np.stack([(g5[:, :, k] << 2) | ((lsb >> (2 * k)) & 3) for k in range(4)], axis=-1)
    else:
        g3 = lines.reshape(hgt, w // 2, 3)
        px = np.stack([(g3[:, :, 0] << 4) | (g3[:, :, 2] & 0xF), (g3[:, :, 1] << 4) | (g3[:, :, 2] >> 4)], axis=-1)
    return px.reshape(hgt, w)
