#!/usr/bin/env python3
"""Independent check of an HSB stream captured by `rocelink emulate/demo --pcap`.

Every RoCE packet is rebuilt from its fields with scapy (IPv4 ToS 0, ID 0, DF, TTL 64,
UDP checksum 0, BTH P_Key 0xFFFF, scapy's own ICRC) and must be byte-identical to the
capture. Metadata records are read with the HSB host's format (">IIIQIQHHQI", big-endian),
frames are reassembled from the 0x2A packets by RETH VA, and the frame CRC must equal
zlib.crc32(frame) ^ 0xFFFFFFFF (CRC-32/JAMCRC) with the immediate = psn[19:0] << 12 | page.

usage: hsb_check.py CAPTURE.pcap FRAME_SIZE PAGE_SIZE   -> prints a JSON summary
"""
import json
import struct
import sys
import zlib

from scapy.all import IP, UDP, Raw, rdpcap, raw
from scapy.contrib.roce import BTH


def main():
    path, frame_size, page_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pkts = rdpcap(path)
    rebuilt_ok = 0
    frames = {}
    checked_frames = 0
    errors = []
    for p in pkts:
        ip = p[IP] if IP in p else IP(raw(p))
        if UDP not in ip or ip[UDP].sport != 12288:
            continue
        u = ip[UDP]
        payload = raw(u.payload)
        opcode = payload[0]
        dqpn = int.from_bytes(payload[5:8], "big")
        psn = int.from_bytes(payload[9:12], "big")
        rest = payload[12:-4]
        again = IP(src=ip.src, dst=ip.dst, id=0, flags="DF", ttl=64, tos=0) / \
            UDP(sport=u.sport, dport=u.dport, chksum=0) / \
            BTH(opcode=opcode, dqpn=dqpn, psn=psn, pkey=0xFFFF) / Raw(rest)
        if raw(again) != raw(ip):
            errors.append(f"packet psn {psn:#x}: scapy rebuild differs")
            continue
        rebuilt_ok += 1
        va, rkey, dlen = struct.unpack(">QII", rest[:16])
        if opcode == 0x2A:
            page, off = divmod(va, page_size)
            frames.setdefault(page, {})[off] = rest[16:16 + dlen]
        elif opcode == 0x2B:
            imm = struct.unpack(">I", rest[16:20])[0]
            md = rest[20:20 + 128]
            flags, mpsn, crc, sof_s, sof_ns, written, zero16, fnum, meta_s, meta_ns = struct.unpack(">IIIQIQHHQI", md[:48])
            page = imm & 0xFFF
            if mpsn != psn or zero16 != 0 or any(md[48:]) or (imm >> 12) != (psn & 0xFFFFF) or len(md) != 128:
                errors.append(f"metadata psn {psn:#x}: fields wrong")
            if va != page * page_size + (frame_size + 127) // 128 * 128:
                errors.append(f"metadata psn {psn:#x}: VA {va:#x} not the page's metadata slot")
            parts = frames.pop(page, {})
            data = b"".join(parts[k] for k in sorted(parts))
            if len(data) == written == frame_size:
                if (zlib.crc32(data) ^ 0xFFFFFFFF) != crc:
                    errors.append(f"frame {fnum}: CRC {crc:#x} != JAMCRC of the data")
                else:
                    checked_frames += 1
    print(json.dumps({"rebuilt_identical": rebuilt_ok, "frames_crc_checked": checked_frames, "errors": errors[:10]}))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
