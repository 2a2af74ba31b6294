#!/usr/bin/env python3
"""Cross-check extract.py's .bin files against tshark's own TCP reassembly and BGP dissector.

For each <scenario>.pcap, tshark (an independent implementation) gives
  1. the BGP messages of every TCP stream direction as (type, length), from its BGP dissector;
  2. the raw bytes of every TCP stream direction ("follow,tcp,raw", its own reassembly).
The matching <scenario>.*.bin file must have the same message sequence and the same bytes.
Needs tshark; standard library otherwise.
    python3 testdata/bgp/tshark_check.py [X.pcap ...]
"""

import glob
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in testdata
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import extract  # noqa: E402


def tshark_messages(pcap):
    """{(src, sport, dst, dport): [(type, length), ...]} per TCP direction, per tshark."""
    out = subprocess.run(
        ["tshark", "-r", pcap, "-Y", "bgp", "-o", "tcp.reassemble_out_of_order:TRUE",
         "-T", "fields", "-E", "occurrence=a", "-E", "separator=|",
         "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport",
         "-e", "ip.dst", "-e", "ipv6.dst", "-e", "tcp.dstport",
         "-e", "bgp.type", "-e", "bgp.length"],
        check=True, capture_output=True, text=True,
    ).stdout
    res = {}
    for line in out.splitlines():
        src4, src6, sport, dst4, dst6, dport, types, lengths = line.split("|")
        key = (src4 or src6, int(sport), dst4 or dst6, int(dport))
        ts = [int(t) for t in types.split(",") if t]
        ls = [int(x) for x in lengths.split(",") if x]
        if len(ts) != len(ls):
            raise SystemExit(f"{pcap}: tshark gave {len(ts)} types but {len(ls)} lengths: {line}")
        res.setdefault(key, []).extend(zip(ts, ls))
    return res


def tshark_follow(pcap):
    """{(src, sport, dst, dport): bytes} per TCP direction, from tshark's follow,tcp,raw."""
    streams = subprocess.run(
        ["tshark", "-r", pcap, "-T", "fields", "-e", "tcp.stream"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    res = {}
    for n in sorted({int(x) for x in streams}):
        out = subprocess.run(
            ["tshark", "-r", pcap, "-q", "-z", f"follow,tcp,raw,{n}"],
            check=True, capture_output=True, text=True,
        ).stdout
        nodes, data = {}, {0: bytearray(), 1: bytearray()}
        for line in out.splitlines():
            if line.startswith("Node 0: ") or line.startswith("Node 1: "):
                host, port = line[8:].rsplit(":", 1)
                nodes[int(line[5])] = (host.strip("[]"), int(port))
            elif line and not line.startswith(("=", "Follow:", "Filter:")):
                node = 1 if line.startswith("\t") else 0
                data[node] += bytes.fromhex(line.strip())
        for a, b in ((0, 1), (1, 0)):
            if data[a]:
                res[nodes[a] + nodes[b]] = bytes(data[a])
    return res


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    pcaps = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "*.pcap")))
    ok = True
    for pcap in pcaps:
        scenario = os.path.basename(pcap)[:-5]
        ts = tshark_messages(pcap)
        mine = {}
        for conn in extract.collect_connections(pcap):
            for d in conn.dirs.values():
                if d is None:
                    continue
                data, _notes, _holes = extract.reassemble(d)
                msgs, _good, _prob = extract.split_bgp(data)
                if msgs:
                    key = (d.src, d.sport, d.dst, d.dport)
                    mine.setdefault(key, []).extend((m[18], len(m)) for m in msgs)
        bins, raw = {}, {}
        for b in glob.glob(os.path.join(os.path.dirname(pcap), f"{scenario}.*.bin")):
            with open(b, "rb") as f:
                raw[os.path.basename(b)] = f.read()
            msgs, good, prob = extract.split_bgp(raw[os.path.basename(b)])
            bins[os.path.basename(b)] = [(m[18], len(m)) for m in msgs]
        follow = tshark_follow(pcap)
        for key in sorted(set(ts) | set(mine)):
            a, b = ts.get(key, []), mine.get(key, [])
            match = [name for name, v in bins.items() if v == b]
            status = "same" if a == b else "DIFFERENT"
            fb = follow.get(key)
            same_bytes = [name for name in match if raw[name] == fb]
            status += ", bytes " + ("identical" if len(same_bytes) == 1 else "DIFFER")
            if a != b or len(same_bytes) != 1:
                ok = False
            print(f"{scenario} {key[0]}:{key[1]} -> {key[2]}:{key[3]}: tshark {len(a)} msgs, "
                  f"extract {len(b)} msgs: {status}; .bin: {', '.join(match) or 'NONE'}")
            if a != b:
                print(f"   tshark:  {a}\n   extract: {b}")
    print("all directions agree with tshark" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
