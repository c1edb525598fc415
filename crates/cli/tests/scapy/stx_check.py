#!/usr/bin/env python3
"""Independent check of sensor TX captured by `rocelink emulate --pcap`.

Every datagram to UDP 4791 must be either a RoCE v2 packet whose ICRC scapy recomputes to
the same bytes (HSB's audio_player.py path), or HSB's Linux-player packet whose trailer is
zlib.crc32(chunk, 0xDEBB20E3) big-endian. The payloads (BTH, pad and trailer removed), in
capture order, must equal what the test sent, built here from the files themselves: each
WAV read with Python's `wave` module, every 3-byte sample followed by a zero byte, cut in
CHUNK-byte packets with the last padded with zeros; a raw file as it is.

usage: stx_check.py CAPTURE.pcap CHUNK FILE[:raw] ...   -> prints a JSON summary
"""
import json
import sys
import wave
import zlib

from scapy.all import IP, UDP, raw, rdpcap
from scapy.contrib.roce import BTH


def expected(spec, chunk):
    path, _, kind = spec.partition(":")
    if kind == "raw":
        return open(path, "rb").read()
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 3, "24-bit WAV expected"
        frames = w.readframes(w.getnframes())
    slots = b"".join(frames[i:i + 3] + b"\0" for i in range(0, len(frames), 3))
    pad = (-len(slots)) % chunk
    return slots + b"\0" * pad


def main():
    path, chunk, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    roce_ok, linux_ok, errors = 0, 0, []
    stream = bytearray()
    for p in rdpcap(path):
        ip = p[IP] if IP in p else IP(raw(p))
        if UDP not in ip or ip[UDP].dport != 4791:
            continue
        payload = raw(ip[UDP].payload)
        pad = (payload[1] >> 4) & 3
        body, trailer = payload[12:-4], payload[-4:]
        if zlib.crc32(body, 0xDEBB20E3).to_bytes(4, "big") == trailer:
            linux_ok += 1
            stream += body
            continue
        again = IP(raw(ip))
        del again[BTH].icrc
        if raw(again) != raw(ip):
            errors.append(f"PSN {int.from_bytes(payload[9:12], 'big')}: scapy's ICRC differs")
            continue
        roce_ok += 1
        stream += body[:len(body) - pad]
    want = b"".join(expected(f, chunk) for f in files)
    if bytes(stream) != want:
        at = next((i for i, (a, b) in enumerate(zip(stream, want)) if a != b), min(len(stream), len(want)))
        errors.append(f"stream differs at byte {at} (got {len(stream)} bytes, want {len(want)})")
    print(json.dumps({"roce_icrc_ok": roce_ok, "linux_trailer_ok": linux_ok,
                      "bytes": len(stream), "errors": errors[:10]}))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
