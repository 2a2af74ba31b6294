#!/usr/bin/env python3
"""Splits testdata/ndp/ndp.pcap into one raw Ethernet frame per file.

Each frame is named after what it is, kernel-<kind>-<target>.frame:
  kind     ns (to a multicast address), unicast-ns (NUD probe), dad-ns
           (source ::), na (unicast), unsolicited-na (to a multicast
           address); "-bare" is appended when the link-layer address option
           is absent (outside DAD)
  target   the target address, ":" written as "_"
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


def has_option(icmp, wanted):
    opts = icmp[24:]
    while len(opts) >= 2 and opts[1] > 0:
        if opts[0] == wanted:
            return True
        opts = opts[opts[1] * 8:]
    return False


def name(frame):
    if frame[12:14] != b"\x86\xdd" or frame[20] != 58:
        return None
    src = ipaddress.IPv6Address(frame[22:38])
    dst = ipaddress.IPv6Address(frame[38:54])
    icmp = frame[54:]
    target = str(ipaddress.IPv6Address(icmp[8:24])).replace(":", "_")
    if icmp[0] == 135:
        if src.is_unspecified:
            kind = "dad-ns"
        else:
            kind = "ns" if dst.is_multicast else "unicast-ns"
            if not has_option(icmp, 1):
                kind += "-bare"
    elif icmp[0] == 136:
        kind = "unsolicited-na" if dst.is_multicast else "na"
        if not has_option(icmp, 2):
            kind += "-bare"
    else:
        return None
    return f"kernel-{kind}-{target}"


seen = set()
for f in frames(HERE / "ndp.pcap"):
    n = name(f)
    if n is None or n in seen:
        continue
    seen.add(n)
    (HERE / f"{n}.frame").write_bytes(f)
    print(f"{n}.frame ({len(f)} octets)")
