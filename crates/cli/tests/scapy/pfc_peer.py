"""A PFC peer on a raw socket: sends 802.1Qbb pause frames on a schedule and captures the
RoCE v2 packets a device sends, with their arrival times.

    pfc_peer.py IFACE DEVICE_IP SCHEDULE_JSON

SCHEDULE_JSON: a list of {"at_ms", "classes" (bit n = class n), "quanta", "every_ms",
"for_ms"} — from "at_ms" after the first RoCE packet from DEVICE_IP, a frame pausing
"classes" for "quanta" every "every_ms" during "for_ms" (one frame when "for_ms" is 0).
Prints JSON: {"roce_ms": [arrival of each RoCE packet from the device, ms after the
first], "sent": [[ms, classes, quanta], ...], "end_ms": when capture stopped}.
Written for this test from 802.1Qbb's frame layout; only the standard library.
"""

import json
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def pfc_frame(src_mac, classes, quanta):
    dst = bytes.fromhex("0180c2000001")
    times = [quanta if classes & (1 << c) else 0 for c in range(8)]
    payload = struct.pack("!HH8H", 0x0101, classes, *times)
    frame = dst + src_mac + struct.pack("!H", 0x8808) + payload
    return frame + bytes(max(0, 60 - len(frame)))


def is_roce_from(frame, ip):
    if len(frame) < 42 or frame[12:14] != b"\x08\x00":
        return False
    ihl = (frame[14] & 15) * 4
    if frame[23] != 17 or socket.inet_ntoa(frame[26:30]) != ip:
        return False
    dport = struct.unpack("!H", frame[14 + ihl + 2:14 + ihl + 4])[0]
    return dport == 4791


def main():
    iface, device_ip, schedule = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    src_mac = s.getsockname()[4]
    sends = []
    for p in schedule:
        n = 1 if p["for_ms"] == 0 else max(1, int(p["for_ms"] // p["every_ms"]))
        for i in range(n):
            sends.append((p["at_ms"] + i * p["every_ms"], p["classes"], p["quanta"]))
    sends.sort()
    end_ms = (max(p["at_ms"] + p["for_ms"] for p in schedule) if schedule else 0) + 800
    # wait for the stream (at most 20 s)
    t0 = None
    give_up = time.monotonic() + 20
    while t0 is None and time.monotonic() < give_up:
        r, _, _ = select.select([s], [], [], 0.5)
        if r:
            f, addr = s.recvfrom(65535)
            if addr[2] != socket.PACKET_OUTGOING and is_roce_from(f, device_ip):
                t0 = time.monotonic()
    if t0 is None:
        print(json.dumps({"error": "no RoCE packet from the device in 20 s"}))
        return 1
    roce = [0.0]
    sent = []
    while True:
        now_ms = (time.monotonic() - t0) * 1e3
        while sends and sends[0][0] <= now_ms:
            _, classes, quanta = sends.pop(0)
            s.send(pfc_frame(src_mac, classes, quanta))
            sent.append([round((time.monotonic() - t0) * 1e3, 3), classes, quanta])
        if now_ms >= end_ms:
            break
        wait_ms = min(sends[0][0] if sends else end_ms, end_ms) - now_ms
        r, _, _ = select.select([s], [], [], max(0.0, wait_ms) / 1e3)
        for _ in range(256 if r else 0):
            try:
                f, addr = s.recvfrom(65535, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            if addr[2] != socket.PACKET_OUTGOING and is_roce_from(f, device_ip):
                roce.append(round((time.monotonic() - t0) * 1e3, 3))
    print(json.dumps({"roce_ms": roce, "sent": sent, "end_ms": end_ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
