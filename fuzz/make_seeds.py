#!/usr/bin/env python3
"""Write the committed seed corpus of every fuzz target (fuzz/corpus/<target>/).

Seeds come from the scapy-built RoCE packets of the cross-check test
(crates/cli/tests/scapy/gen_roce.py), a `rocelink demo` capture, and hand-built HSB/IMS
messages. usage: make_seeds.py SCAPY.pcap DEMO.pcap
"""
import hashlib
import os
import struct
import sys

from scapy.all import UDP, rdpcap, raw

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16] + ".bin"), "wb") as f:
        f.write(data)


def main():
    scapy_pcap, demo_pcap = sys.argv[1], sys.argv[2]
    frames = [raw(p) for p in rdpcap(scapy_pcap)] + [raw(p) for p in rdpcap(demo_pcap)[:3]] + [raw(p) for p in rdpcap(demo_pcap)[-1:]]
    for f in frames:
        put("decode", f)
        put("l2l3", f)
        put("l2l3", f[14:])
        put("decode", f[14:])
    for p in rdpcap(scapy_pcap):
        if UDP in p:
            put("ib", raw(p[UDP].payload))
            put("ib", raw(p[UDP].underlayer))
    for path in (scapy_pcap,):
        with open(path, "rb") as f:
            put("pcap", f.read()[:4096])
    with open(demo_pcap, "rb") as f:
        put("pcap", f.read()[:3000])
    # HSB: ECB requests (10-byte RD_DWORD, WR_BLOCK) and responses with both trailers
    put("hsb", struct.pack(">BBHBBI", 0x14, 3, 0x100, 0, 0, 0x80))
    put("hsb", struct.pack(">BBHHIIII", 0x09, 1, 7, 0, 0x1000, 0xCAF0, 0x1004, 0xBEEF))
    put("hsb", struct.pack(">BBHBBIIH", 0x94, 3, 0x100, 0, 0, 0x80, 0x2606, 0x100))
    put("hsb", struct.pack(">BBHBBIIHH", 0x94, 3, 0x100, 0x0B, 0, 0x80, 0, 0x100, 0))
    vend = bytes([0xE0, 0x38]) + b"NVDA" + bytes([0, 2]) + struct.pack("<H", 0x2603) + bytes(range(16)) + b"\x00\x00\x05\x00" + bytes(7) + struct.pack("<HH", 0x2606, 0x5AA5)
    vend = vend.ljust(64, b"\x00")
    bootp = struct.pack(">BBBBIHH4s4s4s4s16s", 1, 1, 6, 0, 0, 1, 1, bytes([192, 168, 0, 2]), bytes(4), bytes(4), bytes(4), bytes([2, 0, 0, 0, 0, 1]) + bytes(10)) + bytes(64 + 128) + vend
    put("hsb", bootp)
    put("hsb", bytes([2]) + bootp[1:16] + bytes([192, 168, 0, 50]) + bootp[20:])
    put("hsb", struct.pack(">IIQI", 1 << 16, 3, 1234, 5)[:4 + 4] + (1234).to_bytes(6, "big") + (5).to_bytes(4, "big"))
    put("hsb", struct.pack(">IIIQIQIQI", 1, 0x1005, 0xDEADBEEF, 1, 2, 4096, 3, 4, 5).ljust(128, b"\x00"))
    # IMS: status, ack, a small image
    put("ims", struct.pack(">BBBBIIIIII", 1, 1, 0, 4, 7, 0x48, 0x49, 0, 0, 0))
    put("ims", struct.pack(">IIII", 1, 5, 0x02000000, 0x40))
    put("ims", bytes([3, 5]) + bytes(64) + bytes(range(60)))


if __name__ == "__main__":
    main()
