#!/usr/bin/env python3
"""Independent check of I2C over HSB's sequencer, from the ECB traffic of a capture.

Replays every register write the host sent to the device (UDP 8192: WR_DWORD 0x04, WR_BLOCK
0x09) into a plain dict, and whenever the software event (0x22C) goes 0 -> 1 runs the
program its vector (APB RAM 0x2000 + 2*4) points at with an interpreter written here from
HSB's description (a command word of sixteen 2-bit ops, POLL=0 addr/match/mask, WR=1
addr/value, RD=2 addr/slot, 0xFFFFFFFF ends), against a model of the I2C controller at
0x03000200 (START in control starts a transaction of num_bytes[8:0] write and [24:16] read
bytes, little-endian in the buffer words at +0x100; status +0x80: DONE 0x10, NAK 0x08) with an
expander at 0x70 and one IMX274 at 0x1A (16-bit register, big-endian, 8-bit values) on bus 1.

Every read reply the device sent (0x94 / 0x99) for an address inside APB RAM must equal what
this replay holds there: the copied status words and read bytes the host takes its answers
from. Prints a JSON summary.

usage: sequencer_check.py CAPTURE.pcap
"""
import json
import struct
import sys

from scapy.all import IP, UDP, rdpcap, raw

APB_RAM, APB_END = 0x2000, 0x3000
SW_EVENT, I2C = 0x22C, 0x03000200


class Device:
    def __init__(self):
        self.mem = {}
        self.expander = 0
        self.cam = {0x3000: 0x12, 0x3004: 0xFF, 0x30E2: 0xFF}
        self.programs = 0
        self.transactions = 0

    def read(self, a):
        return self.mem.get(a, 0)

    def write(self, a, v):
        old = self.mem.get(a, 0)
        self.mem[a] = v
        if a == I2C and v & 1 and not old & 1:
            self.i2c()
        elif a == I2C and not v & 1:
            self.mem[I2C + 0x80] = 0
        if a == SW_EVENT and v & 1 and not old & 1:
            self.run(self.read(APB_RAM + 2 * 4))

    def i2c(self):
        self.transactions += 1
        n = self.read(I2C + 8)
        wn, rn = n & 0x1FF, (n >> 16) & 0x1FF
        buf = b"".join(struct.pack("<I", self.read(I2C + 0x100 + 4 * i)) for i in range(64))
        wbytes = buf[:wn]
        addr = (self.read(I2C) >> 16) & 0x7F
        bus = self.read(I2C + 4)
        out = None
        if bus == 1 and addr == 0x70:
            if wbytes:
                self.expander = wbytes[-1]
            out = bytes([self.expander] * rn)
        elif bus == 1 and addr == 0x1A and self.expander & 1 and len(wbytes) >= 2:
            reg = int.from_bytes(wbytes[:2], "big")
            for i, b in enumerate(wbytes[2:]):
                self.cam[reg + i] = b
            out = bytes(self.cam.get(reg + i, 0) for i in range(rn))
        if out is None:
            self.mem[I2C + 0x80] = 0x10 | 0x08
            return
        out = out + bytes(-len(out) % 4)
        for i in range(0, len(out), 4):
            self.mem[I2C + 0x100 + i] = struct.unpack("<I", out[i:i + 4])[0]
        self.mem[I2C + 0x80] = 0x10

    def run(self, ip):
        self.programs += 1
        op_bit, command = 32, 0
        while APB_RAM <= ip < APB_END:
            if op_bit >= 32:
                command, ip, op_bit = self.read(ip), ip + 4, 0
                continue
            operand, ip = self.read(ip), ip + 4
            if operand == 0xFFFFFFFF:
                return
            op = (command >> op_bit) & 3
            op_bit += 2
            if op == 0:
                match, mask = self.read(ip), self.read(ip + 4)
                ip += 8
                if self.read(operand) & mask != match:
                    return
            elif op == 1:
                self.write(operand, self.read(ip))
                ip += 4
            elif op == 2:
                self.write(ip, self.read(operand))
                ip += 4
            else:
                return


def main():
    dev = Device()
    checked, mismatches = 0, []
    for p in rdpcap(sys.argv[1]):
        ip = p[IP] if IP in p else IP(raw(p))
        if UDP not in ip:
            continue
        u, b = ip[UDP], raw(ip[UDP].payload)
        pairs = range(6, 6 + 8 * ((len(b) - 6) // 8), 8)
        if u.dport == 8192 and len(b) >= 14 and b[0] in (0x04, 0x09):
            for i in pairs:
                a, v = struct.unpack(">II", b[i:i + 8])
                dev.write(a, v)
        elif u.sport == 8192 and len(b) >= 6 and b[0] in (0x94, 0x99) and b[4] == 0:
            for i in pairs:
                a, v = struct.unpack(">II", b[i:i + 8])
                if APB_RAM <= a < APB_END:
                    checked += 1
                    if dev.read(a) != v:
                        mismatches.append([hex(a), hex(v), hex(dev.read(a))])
    print(json.dumps({"programs": dev.programs, "transactions": dev.transactions,
                      "replies_checked": checked, "mismatches": mismatches[:10],
                      "camera": {hex(k): v for k, v in sorted(dev.cam.items())}}))


if __name__ == "__main__":
    main()
