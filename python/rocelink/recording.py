"""Read a rocelink recording (``rocelink receive --record DIR``) as numpy arrays.

Needs only numpy. The data file is memory-mapped: frames are views, nothing is copied.

    from rocelink import Recording
    rec = Recording("DIR")
    print(len(rec), rec.header["sensor"])
    for meta, data in rec:                  # data: numpy uint8 array of the frame's bytes
        print(meta["frame_number"], meta["good"], meta["crc"], data.shape)
    meta, data = rec.frame(1234)            # by the device's frame number
    img = rec.image(0)                      # CSI/CoE recordings: uint16 (height, width) Bayer image

Layout (see crates/record/src/format.rs): recording.json (stream parameters), data.bin
(frames at 4096-aligned offsets), index.bin (128-byte little-endian records, magic "RLIX",
CRC32C-protected). A torn last record is ignored; an invalid record before the last is
skipped and listed in ``damaged_records``; a record with frame number 2**64-1 and length 0
is a drop marker (frames lost after the last indexed one), counted in ``recorder_drops``.
"""
import json
import os
import zlib

import numpy as np

from ._image import unpack

_INDEX = np.dtype([
    ("magic", "S4"), ("version", "<u2"), ("verdict", "<u2"),
    ("frame_number", "<u8"), ("offset", "<u8"), ("length", "<u8"),
    ("crc", "<u4"), ("flags", "<u4"), ("dropped_packets", "<u8"),
    ("sof_s", "<u8"), ("sof_ns", "<u4"), ("meta_ns", "<u4"), ("meta_s", "<u8"),
    ("recorded_ns", "<u8"), ("packets", "<u4"), ("page", "<u4"), ("dropped_before", "<u4"),
    ("reserved", "V32"), ("record_crc", "<u4"),
])
assert _INDEX.itemsize == 128
_DROP_MARKER = 2**64 - 1


def _crc32c(b):
    crc = 0xFFFFFFFF
    for byte in b:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


class Recording:
    """A recording directory: ``len(rec)``, ``rec[i]``, iteration of ``(meta, data)``."""

    def __init__(self, path, verify=True):
        self.path = path
        with open(os.path.join(path, "recording.json")) as f:
            self.header = json.load(f)
        if self.header.get("format") != "rocelink-recording" or self.header.get("version") != 1:
            raise ValueError(f"{path}: not a rocelink recording (version 1)")
        raw = np.fromfile(os.path.join(path, "index.bin"), dtype=np.uint8)
        n = len(raw) // 128
        idx = raw[: n * 128].view(_INDEX)
        data_size = os.path.getsize(os.path.join(path, "data.bin"))

        def valid(i):
            r = idx[i]
            if r["magic"] != b"RLIX" or r["version"] != 1:
                return False
            return not verify or _crc32c(raw[i * 128: i * 128 + 124].tobytes()) == int(r["record_crc"])

        ok = [valid(i) for i in range(n)]
        last = max((i for i in range(n) if ok[i]), default=-1)
        keep = []
        self.damaged_records = []   # byte offsets in index.bin of invalid records before the last
        self.missing_data = []      # frame numbers whose data lies past the end of data.bin
        self.recorder_drops = 0     # frames the recorder dropped (before frames, and after the last)
        self.torn_bytes = len(raw) - n * 128
        for i in range(n):
            r = idx[i]
            if not ok[i]:
                if i < last:
                    self.damaged_records.append(i * 128)
                else:
                    self.torn_bytes += 128
                continue
            self.recorder_drops += int(r["dropped_before"])
            if int(r["frame_number"]) == _DROP_MARKER and int(r["length"]) == 0:
                continue
            if int(r["offset"]) + int(r["length"]) > data_size:
                self.missing_data.append(int(r["frame_number"]))
                continue
            keep.append(i)
        self.index = idx[keep]
        self._by_number = {}
        for k, fn in enumerate(self.index["frame_number"].tolist()):
            self._by_number.setdefault(fn, k)
        self._data = np.memmap(os.path.join(path, "data.bin"), dtype=np.uint8, mode="r") if data_size else np.zeros(0, np.uint8)

    @property
    def frame_numbers(self):
        """The device frame numbers, in recording order."""
        return self.index["frame_number"].tolist()

    def frame(self, number):
        """``(meta, data)`` of the frame with the device's frame number ``number``."""
        k = self._by_number.get(int(number))
        if k is None:
            if len(self) == 0:
                raise KeyError(f"frame {number}: the recording holds no frame")
            fns = self.index["frame_number"]
            raise KeyError(f"frame {number} is not in the recording ({len(self)} frames, numbers {int(fns.min())}..={int(fns.max())})")
        return self[k]

    def verify(self, i):
        """True if frame ``i``'s stored bytes match its recorded CRC; None for a frame recorded damaged."""
        meta, data = self[i]
        if not meta["good"]:
            return None
        return (zlib.crc32(data) ^ 0xFFFFFFFF) == meta["crc"]

    def __len__(self):
        return len(self.index)

    def meta(self, i):
        r = self.index[i]
        v = int(r["verdict"])
        return {
            "frame_number": int(r["frame_number"]), "good": bool(v & 1), "complete": bool(v & 2),
            "crc_ok": bool(v & 4), "crc_present": bool(v & 8), "crc": int(r["crc"]), "flags": int(r["flags"]),
            "length": int(r["length"]), "dropped_packets": int(r["dropped_packets"]),
            "sof": (int(r["sof_s"]), int(r["sof_ns"])), "meta": (int(r["meta_s"]), int(r["meta_ns"])),
            "recorded_ns": int(r["recorded_ns"]), "packets": int(r["packets"]), "page": int(r["page"]),
            "dropped_before": int(r["dropped_before"]),
        }

    def __getitem__(self, i):
        if not -len(self) <= i < len(self):
            raise IndexError(f"position {i}: the recording holds {len(self)} frames (rec.frame(n) takes a frame number)")
        r = self.index[i]
        off, n = int(r["offset"]), int(r["length"])
        return self.meta(i), self._data[off: off + n]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def image(self, i):
        """The active image of a CSI or CoE RAW10/RAW12 frame as uint16 (height, width)."""
        h = self.header
        layout = h.get("layout", "")
        if layout not in ("csi-raw10", "csi-raw12", "coe-raw10", "coe-raw12"):
            raise ValueError(f"layout {layout!r} is not an image")
        _, data = self[i]
        return unpack(data, h)
