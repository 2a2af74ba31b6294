#!/usr/bin/env python3
"""Splits testdata/arp/arp.pcap into one raw Ethernet frame per file.

Each frame is named after what it is, <sender>-<kind>-<address>.frame:
  sender   kernel, or arping (arping pads its frames past 42 octets;
           Linux never pads on a veth)
  kind     request, unicast-request (Ethernet destination not broadcast),
           gratuitous-request (sender IP = target IP), probe (sender IP
           0.0.0.0, RFC 5227), reply, reply-to-probe (target IP 0.0.0.0),
           gratuitous-reply
  address  the IP being resolved (target of a request, sender of a reply)
The first frame of each name is kept. Run after capture.sh; see README.md.
"""
import ipaddress
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent


def frames(path):
    data = path.read_bytes()
    magic, = struct.unpack("<I", data[:4])
    if magic != 0xA1B2C3D4:
        raise SystemExit(f"{path}: not a little-endian classic pcap")
    linktype, = struct.unpack("<I", data[20:24])
    if linktype != 1:
        raise SystemExit(f"{path}: link type {linktype}, not Ethernet")
    i = 24
    while i + 16 <= len(data):
        _, _, incl, orig = struct.unpack("<IIII", data[i:i + 16])
        if incl != orig:
            raise SystemExit(f"{path}: truncated frame in capture")
        yield data[i + 16:i + 16 + incl]
        i += 16 + incl


def name(frame):
    dst, ethertype = frame[0:6], frame[12:14]
    if ethertype != b"\x08\x06":
        return None
    op, = struct.unpack("!H", frame[20:22])
    sip = ipaddress.IPv4Address(frame[28:32])
    tip = ipaddress.IPv4Address(frame[38:42])
    sender = "arping" if len(frame) > 42 else "kernel"
    broadcast = dst == b"\xff" * 6
    if op == 1:
        if int(sip) == 0:
            kind = "probe"
        elif sip == tip:
            kind = "gratuitous-request"
        elif broadcast:
            kind = "request"
        else:
            kind = "unicast-request"
        return f"{sender}-{kind}-{tip}"
    if op == 2:
        if int(tip) == 0:
            kind = "reply-to-probe"
        elif broadcast:
            kind = "gratuitous-reply"
        else:
            kind = "reply"
        return f"{sender}-{kind}-{sip}"
    return f"{sender}-op{op}-{tip}"


seen = set()
for f in frames(HERE / "arp.pcap"):
    n = name(f)
    if n is None or n in seen:
        continue
    seen.add(n)
    (HERE / f"{n}.frame").write_bytes(f)
    print(f"{n}.frame ({len(f)} octets)")
