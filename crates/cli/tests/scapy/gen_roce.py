#!/usr/bin/env python3
"""Independent RoCE v2 packets for rocelink's cross-check test.

Builds packets with scapy's RoCE layer (scapy.contrib.roce: BTH with ICRC, AETH, CNP; the
extended headers scapy lacks are raw bytes), writes them to a pcap, and writes, for every
packet, the fields scapy reads back from the final bytes plus whether scapy's own ICRC
computation agrees with the trailer. rocelink must report the same.

usage: gen_roce.py OUT.pcap OUT.expected.jsonl
"""
import json
import random
import struct
import sys

from scapy.all import ARP, ICMP, IP, UDP, Ether, IPv6, Raw, raw, wrpcap
from scapy.contrib.roce import AETH, BTH, CNP_OPCODE, cnp

random.seed(4791)

SRC4, DST4 = "10.77.0.1", "10.77.0.11"
SRC6, DST6 = "fd00:77::1", "fd00:77::11"
MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def deth(qkey, src_qp):
    return struct.pack("!II", qkey, src_qp & 0xFFFFFF)


def imm(v):
    return struct.pack("!I", v)


def pad(payload):
    return (-len(payload)) & 3


def payload(n):
    return bytes(random.getrandbits(8) for _ in range(n))


# (description, ip version, ip kwargs, bth kwargs, ext bytes (after BTH; None = scapy layer),
#  payload bytes, expected extended-header fields)
CASES = []


def case(name, v, ipkw, bthkw, ext, pl, exp, layer=None):
    CASES.append((name, v, ipkw, bthkw, ext, pl, exp, layer))


p = payload(1024)
case("rc_send_first", 4, dict(tos=(26 << 2) | 1, ttl=17), dict(opcode=0x00, fecn=1, dqpn=0x11, psn=100), b"", p, {})
p = payload(6)
case("rc_send_last_imm_pad2", 4, dict(tos=2, ttl=1, id=0x1234, flags=0),
     dict(opcode=0x03, becn=1, ackreq=1, solicited=1, migreq=1, dqpn=0x11, psn=101), imm(0xDEADBEEF), p,
     {"immdt": 0xDEADBEEF})
p = payload(4096)
case("rc_write_first", 4, dict(ttl=64, flags="DF"), dict(opcode=0x06, dqpn=0x123456, psn=0xFFFFFF, pkey=0x8001),
     reth(0x7F00_1234_5678, 0xABCDEF01, 8192), p, {"reth": {"va": 0x7F00_1234_5678, "rkey": 0xABCDEF01, "dma_len": 8192}})
case("rc_read_request", 4, dict(tos=0xB8), dict(opcode=0x0C, ackreq=1, dqpn=0x22, psn=7),
     reth(0x1000, 0x42, 65536), b"", {"reth": {"va": 0x1000, "rkey": 0x42, "dma_len": 65536}})
p = payload(1024)
case("rc_read_response_first", 4, dict(), dict(opcode=0x0D, dqpn=0x33, psn=7), struct.pack("!I", (0x1F << 24) | 5), p,
     {"aeth": {"syndrome": 0x1F, "msn": 5}})
p = payload(1024)
case("rc_read_response_middle", 4, dict(), dict(opcode=0x0E, dqpn=0x33, psn=8), b"", p, {})
case("rc_ack", 4, dict(tos=3, ttl=200), dict(opcode=0x11, becn=1, dqpn=0x44, psn=0x10), None, b"",
     {"aeth": {"syndrome": 0x1F, "msn": 0x123456}}, layer=AETH(syndrome=0x1F, msn=0x123456))
case("rc_nak_psn_seq", 4, dict(), dict(opcode=0x11, dqpn=0x44, psn=0x11), None, b"",
     {"aeth": {"syndrome": 0x60, "msn": 3}}, layer=AETH(syndrome=0x60, msn=3))
case("rc_atomic_ack", 4, dict(), dict(opcode=0x12, dqpn=0x44, psn=0x12),
     struct.pack("!I", (0x1F << 24) | 9) + struct.pack("!Q", 0x0102030405060708), b"",
     {"aeth": {"syndrome": 0x1F, "msn": 9}, "atomic_ack": 0x0102030405060708})
case("rc_compare_swap", 4, dict(), dict(opcode=0x13, ackreq=1, dqpn=0x44, psn=0x13),
     struct.pack("!QIQQ", 0x8000, 0x77, 5, 6), b"",
     {"atomic_eth": {"va": 0x8000, "rkey": 0x77, "swap_add": 5, "compare": 6}})
p = payload(13)
case("rc_send_only_inv", 4, dict(), dict(opcode=0x17, dqpn=0x55, psn=1), struct.pack("!I", 0xCAFE), p, {"ieth": 0xCAFE})
p = payload(1408)
case("uc_write_only_hsb", 4, dict(flags="DF", id=0), dict(opcode=0x2A, dqpn=0xCAF0, psn=0x1000),
     reth(0x580, 0xBEEF, 1408), p, {"reth": {"va": 0x580, "rkey": 0xBEEF, "dma_len": 1408}})
p = payload(128)
case("uc_write_only_imm_hsb", 4, dict(flags="DF", id=0), dict(opcode=0x2B, dqpn=0xCAF0, psn=0x1001),
     reth(0x27D880, 0xBEEF, 128) + imm(0x01001001), p,
     {"reth": {"va": 0x27D880, "rkey": 0xBEEF, "dma_len": 128}, "immdt": 0x01001001})
p = payload(5)
case("ud_send_imm_v6", 6, dict(tc=0xB9, fl=0xABCDE, hlim=3), dict(opcode=0x65, fecn=1, becn=1, dqpn=0x66, psn=2, solicited=1),
     deth(0x11111111, 0x99) + imm(7), p, {"deth": {"qkey": 0x11111111, "src_qp": 0x99}, "immdt": 7})
p = payload(256)
case("ud_send_only_v6", 6, dict(), dict(opcode=0x64, dqpn=0x1, psn=0xABCDEF, pkey=0xFFFF),
     deth(0x80010000, 0x1), p, {"deth": {"qkey": 0x80010000, "src_qp": 1}})
p = payload(2048)
case("uc_send_first_v6", 6, dict(tc=0x02, hlim=64), dict(opcode=0x20, dqpn=0x77, psn=0xFFFFFE), b"", p, {})
p = payload(192)
# IMS: a UC WRITE LAST carrying the sender's "end of bad frame" mark in the BTH's resv7
case("uc_write_last_ims_ebf", 4, dict(flags="DF", id=0), dict(opcode=0x28, dqpn=0x11, psn=7, resv7=0x02), b"", p, {})
case("rc_ack_v6", 6, dict(hlim=1), dict(opcode=0x11, dqpn=0x44, psn=0x10), None, b"",
     {"aeth": {"syndrome": 0x0A, "msn": 1}}, layer=AETH(syndrome=0x0A, msn=1))


def build(v, ipkw, bthkw, ext, pl, layer, sport=0xC123):
    ipl = IP(src=SRC4, dst=DST4, **ipkw) if v == 4 else IPv6(src=SRC6, dst=DST6, **ipkw)
    bth = BTH(padcount=pad(pl), **bthkw)
    body = layer if layer is not None else None
    tail = ext + pl + b"\x00" * pad(pl)
    if body is not None:
        pkt = Ether(src=MAC_A, dst=MAC_B) / ipl / UDP(sport=sport, dport=4791) / bth / body / Raw(tail) if tail else \
            Ether(src=MAC_A, dst=MAC_B) / ipl / UDP(sport=sport, dport=4791) / bth / body
    else:
        pkt = Ether(src=MAC_A, dst=MAC_B) / ipl / UDP(sport=sport, dport=4791) / bth / Raw(tail)
    return raw(pkt)


def scapy_icrc_ok(frame):
    """scapy's own verdict: rebuild the ICRC over the given bytes and compare with the trailer."""
    p = Ether(frame)
    trailer = frame[-4:]
    ip = p[IP] if IP in p else p[IPv6]
    q = ip.copy()
    q[BTH].icrc = None
    # rebuild from raw BTH bytes so scapy does not normalise any field
    udp_payload = raw(p[UDP].payload)
    q[UDP].remove_payload()
    q[UDP].add_payload(BTH(udp_payload[:-4] + b"\x00\x00\x00\x00"))
    q[BTH].icrc = None
    if IP in q:
        q[IP].len = None
        q[IP].chksum = None
        q[IP].len = p[IP].len
        q[IP].chksum = p[IP].chksum
    rebuilt = raw(q)
    return rebuilt[-4:] == trailer


def expected(index, frame, ext_fields, payload_len):
    p = Ether(frame)
    bth = p[BTH]
    e = {
        "index": index,
        "len": len(frame),
        "kind": "roce",
        "src_port": p[UDP].sport,
        "dst_port": p[UDP].dport,
        "opcode": bth.opcode,
        "se": bool(bth.solicited),
        "migreq": bool(bth.migreq),
        "pad_count": bth.padcount,
        "tver": bth.version,
        "pkey": bth.pkey,
        "fecn": bool(bth.fecn),
        "becn": bool(bth.becn),
        "dest_qp": bth.dqpn,
        "ack_req": bool(bth.ackreq),
        "resv7": bth.resv7,
        "psn": bth.psn,
        # scapy shows the trailer read big-endian; the ICRC value is the byte-swapped number
        "icrc": struct.unpack("<I", struct.pack(">I", bth.icrc))[0],
        "icrc_ok": scapy_icrc_ok(frame),
        "payload_len": payload_len,
        "reth": None, "aeth": None, "deth": None, "immdt": None, "ieth": None,
    }
    if bth.opcode in (0x81,):
        e["opcode_name"] = "CNP"
    if IP in p:
        e.update(src_ip=p[IP].src, dst_ip=p[IP].dst, ttl=p[IP].ttl, dscp=p[IP].tos >> 2, ecn=p[IP].tos & 3,
                 ip_id=p[IP].id, ip_version=4)
    else:
        e.update(src_ip=p[IPv6].src, dst_ip=p[IPv6].dst, ttl=p[IPv6].hlim, dscp=p[IPv6].tc >> 2, ecn=p[IPv6].tc & 3,
                 flow_label=p[IPv6].fl, ip_version=6)
    if AETH in p:
        e["aeth"] = {"syndrome": p[AETH].syndrome, "msn": p[AETH].msn}
    e.update(ext_fields)
    return e


def main():
    out_pcap, out_exp = sys.argv[1], sys.argv[2]
    frames, exps = [], []

    def add(frame, exp_fields, payload_len, variant):
        e = expected(len(frames), frame, exp_fields, payload_len)
        e["variant"] = variant
        frames.append(Ether(frame))
        exps.append(e)

    for name, v, ipkw, bthkw, ext, pl, ext_exp, layer in CASES:
        f = build(v, ipkw, bthkw, ext or b"", pl, layer)
        add(f, ext_exp, len(pl), name)
        good = scapy_icrc_ok(f)
        assert good, name
        b = bytearray(f)
        # masked variant: change every field the ICRC masks; the ICRC must still hold
        if v == 4:
            b[15] ^= 0xFD  # ToS
            b[22] ^= 0x5A  # TTL
            b[24] ^= 0x11  # header checksum
            b[40] ^= 0x77  # UDP checksum
            b[46] ^= 0xC0  # FECN, BECN
        else:
            b[14] ^= 0x0A  # traffic class + flow label bits
            b[16] ^= 0x3C
            b[21] ^= 0x21  # hop limit
            b[60] ^= 0x13  # UDP checksum
            b[66] ^= 0x40  # BECN
        add(bytes(b), ext_exp, len(pl), name + "/masked")
        # corrupted copies: one bit of the payload/last header byte, and one unmasked header field
        c = bytearray(f)
        if pl:
            c[-5 - pad(pl)] ^= 0x01  # last payload byte
        else:
            c[(14 + 20 + 8 if v == 4 else 14 + 40 + 8) + 11] ^= 0x01  # PSN low bit
        add(bytes(c), ext_exp, len(pl), name + "/corrupt-tail")
        c = bytearray(f)
        if v == 4:
            c[19] ^= 0x01  # IPv4 identification: covered by the ICRC
        else:
            c[37] ^= 0x01  # IPv6 source address
        add(bytes(c), ext_exp, len(pl), name + "/corrupt-ip")
        if bthkw.get("resv7"):
            # the mark removed in transit: the ICRC covers resv7, so this must fail
            c = bytearray(f)
            c[14 + 20 + 8 + 8] &= 0x80
            add(bytes(c), ext_exp, len(pl), name + "/mark-removed")

    # CNP built by scapy
    f = raw(Ether(src=MAC_A, dst=MAC_B) / IP(src=SRC4, dst=DST4, tos=1) / UDP(sport=0xC001, dport=4791) / cnp(0x123))
    add(f, {}, 0, "cnp")

    # non-RoCE frames
    others = [
        (Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, psrc=SRC4, pdst=DST4, hwsrc=MAC_A), "arp"),
        (Ether(src=MAC_A, dst=MAC_B) / IP(src=SRC4, dst=DST4) / ICMP(type=8, id=7, seq=9) / Raw(b"ping"), "icmp"),
        (Ether(src=MAC_A, dst=MAC_B) / IP(src=SRC4, dst=DST4) / UDP(sport=5000, dport=5001) / Raw(b"x" * 20), "udp"),
        (Ether(src=MAC_A, dst="01:80:c2:00:00:01", type=0x8808) /
         Raw(struct.pack("!HH8H", 0x0101, 0x09, 0xFFFF, 0, 0, 0x1234, 0, 0, 0, 0) + b"\x00" * 26), "pfc"),
        (Ether(src=MAC_A, dst="01:80:c2:00:00:01", type=0x8808) /
         Raw(struct.pack("!HH8H", 0x0101, 0x84, 0, 0, 0, 0, 0, 0, 0, 0) + b"\x00" * 26), "pfc"),
        (Ether(src=MAC_A, dst=MAC_B, type=0x88B5) / Raw(b"\x00" * 46), "other"),
    ]
    for pkt, kind in others:
        frames.append(pkt)
        exps.append({"index": len(exps), "len": len(raw(pkt)), "kind": kind, "variant": kind})

    wrpcap(out_pcap, frames)
    with open(out_exp, "w") as fh:
        for e in exps:
            fh.write(json.dumps(e) + "\n")


if __name__ == "__main__":
    main()
