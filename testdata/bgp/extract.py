#!/usr/bin/env python3
"""Extract the raw BGP byte streams from the pcaps written by capture.sh.

For every TCP connection in each <scenario>.pcap and each direction of it that carried payload,
writes <scenario>.<sender>.bin next to the pcap (and <scenario>.<sender>.args with the
bgp-decode flags for a non-default session context, derived from both sides' OPEN capabilities:
--as4=false, --extended-message, --add-path=<family>): the bytes the sender wrote to its BGP socket,
in order, exactly as on the wire (a concatenation of BGP messages, each starting with the
16-byte 0xff marker). TCP is reassembled from sequence numbers: retransmitted and duplicated
segments are dropped (their bytes are checked against what was already assembled), out-of-order
segments are put back in order. The result is then checked to be a sequence of complete BGP
messages; an incomplete message at the end of a stream (capture cut short) is trimmed and
reported.

Naming: <sender> is the router name from NAMES (falls back to the IP address). When one sender
talks to several peers in a scenario the name is <sender>-to-<receiver>; when the same pair has
several connections, .<n> (1-based, in order of connection start) is appended.

Standard library only. Usage:
    python3 testdata/bgp/extract.py                 # every *.pcap next to this script
    python3 testdata/bgp/extract.py X.pcap ...      # selected captures
    python3 testdata/bgp/extract.py --verify A.bin  # only check .bin files' framing
    python3 testdata/bgp/extract.py --selftest      # reassembly check on mutated captures
Exit status is non-zero if a stream has a hole, a bad marker or a bad length.
"""

import argparse
import glob
import ipaddress
import os
import struct
import sys
from collections import Counter

# Addresses used by capture.sh -> router names (keep in sync with capture.sh).
NAMES = {
    "10.0.1.1": "frr", "10.0.1.2": "bird",  # frr-bird
    "fd00:2::1": "frr", "fd00:2::2": "gobgp",  # frr-gobgp
    "10.0.3.1": "rr", "10.0.3.2": "c1",  # frr-ibgp, rr <-> c1
    "10.0.4.1": "rr", "10.0.4.2": "c2",  # frr-ibgp, rr <-> c2
    "10.0.5.1": "frr", "10.0.5.2": "bird",  # bad-peer-as
    "10.0.6.1": "frr", "10.0.6.2": "bird",  # hold-timer
    "10.0.7.1": "as4", "10.0.7.2": "legacy",  # as-trans
    "10.0.8.1": "frr", "10.0.8.2": "bird",  # frr-bird-lossy
}

BGP_PORT = 179
MSG_TYPES = {1: "OPEN", 2: "UPDATE", 3: "NOTIFICATION", 4: "KEEPALIVE", 5: "ROUTE-REFRESH"}

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10


class PcapError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# pcap reading and decapsulation


def read_pcap(path):
    """Yield (index, captured_bytes, original_length) for each record; returns link type first."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise PcapError(f"{path}: too short for a pcap header")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    elif magic == b"\x0a\x0d\x0d\x0a":
        raise PcapError(f"{path}: pcapng is not supported, write classic pcap (tcpdump -w)")
    else:
        raise PcapError(f"{path}: not a pcap file (magic {magic.hex()})")
    _vmaj, _vmin, _zone, _sigfigs, _snaplen, network = struct.unpack(endian + "HHiIII", data[4:24])
    linktype = network & 0x03FFFFFF
    records = []
    off, idx = 24, 0
    while off < len(data):
        if off + 16 > len(data):
            print(f"  warning: {path}: truncated record header at end of file", file=sys.stderr)
            break
        _sec, _frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            print(f"  warning: {path}: truncated last record", file=sys.stderr)
            break
        idx += 1
        records.append((idx, data[off:off + incl], orig))
        off += incl
    return linktype, records


def network_payload(linktype, frame):
    """Return (ethertype, l3 bytes) or None for frames that are not IPv4/IPv6."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        etype = struct.unpack("!H", frame[12:14])[0]
        off = 14
        while etype in (0x8100, 0x88A8, 0x9100):  # VLAN tags
            if len(frame) < off + 4:
                return None
            etype = struct.unpack("!H", frame[off + 2:off + 4])[0]
            off += 4
        return etype, frame[off:]
    if linktype == LINKTYPE_LINUX_SLL:
        if len(frame) < 16:
            return None
        return struct.unpack("!H", frame[14:16])[0], frame[16:]
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(frame) < 20:
            return None
        return struct.unpack("!H", frame[0:2])[0], frame[20:]
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not frame:
            return None
        version = frame[0] >> 4
        return (0x0800 if version == 4 else 0x86DD if version == 6 else 0), frame
    raise PcapError(f"unsupported link type {linktype}")


def tcp_segment(etype, pkt):
    """Return (src, dst, tcp_header_and_payload, truncated) or None if not TCP."""
    if etype == 0x0800:
        if len(pkt) < 20 or pkt[0] >> 4 != 4:
            return None
        ihl = (pkt[0] & 0x0F) * 4
        total = struct.unpack("!H", pkt[2:4])[0]
        frag = struct.unpack("!H", pkt[6:8])[0]
        if pkt[9] != 6:
            return None
        if frag & 0x3FFF:
            raise PcapError("IPv4 fragments are not supported")
        src = str(ipaddress.IPv4Address(pkt[12:16]))
        dst = str(ipaddress.IPv4Address(pkt[16:20]))
        truncated = len(pkt) < total
        return src, dst, pkt[ihl:total], truncated  # slicing to total drops Ethernet padding
    if etype == 0x86DD:
        if len(pkt) < 40 or pkt[0] >> 4 != 6:
            return None
        plen = struct.unpack("!H", pkt[4:6])[0]
        nxt = pkt[6]
        src = str(ipaddress.IPv6Address(pkt[8:24]))
        dst = str(ipaddress.IPv6Address(pkt[24:40]))
        end = 40 + plen
        truncated = len(pkt) < end
        off = 40
        while nxt in (0, 43, 60):  # hop-by-hop, routing, destination options
            if len(pkt) < off + 2:
                return None
            nxt, hlen = pkt[off], (pkt[off + 1] + 1) * 8
            off += hlen
        if nxt == 44:
            raise PcapError("IPv6 fragments are not supported")
        if nxt != 6:
            return None
        return src, dst, pkt[off:end], truncated
    return None


# --------------------------------------------------------------------------------------------
# TCP reassembly


class Direction:
    def __init__(self, src, sport, dst, dport):
        self.src, self.sport, self.dst, self.dport = src, sport, dst, dport
        self.isn = None  # sequence number of our SYN
        self.segments = []  # (seq, payload, packet index)
        self.fin = False
        self.rst = False
        self.truncated_packets = []


class Connection:
    def __init__(self, order, a, b):
        self.order = order
        self.dirs = {a: None, b: None}

    def direction(self, key):
        d = self.dirs.get(key)
        if d is None:
            d = self.dirs[key] = Direction(*key)
        return d


def seq_diff(a, b):
    """a - b in 32-bit sequence space, as a signed number."""
    d = (a - b) & 0xFFFFFFFF
    return d - (1 << 32) if d & 0x80000000 else d


def collect_connections(path):
    return connections_from_records(*read_pcap(path))


def connections_from_records(linktype, records):
    conns = []
    active = {}  # frozenset of both endpoints -> Connection
    for idx, frame, orig_len in records:
        l3 = network_payload(linktype, frame)
        if l3 is None:
            continue
        seg = tcp_segment(*l3)
        if seg is None:
            continue
        src, dst, tcp, truncated = seg
        if len(frame) < orig_len:
            truncated = True
        if len(tcp) < 20:
            continue
        sport, dport, seq, _ack, off_flags = struct.unpack("!HHIIH", tcp[:14])
        if BGP_PORT not in (sport, dport):
            continue
        hlen = (off_flags >> 12) * 4
        flags = off_flags & 0x3F
        payload = tcp[hlen:]
        key = (src, sport, dst, dport)
        rkey = (dst, dport, src, sport)
        conv = frozenset((key[:2], rkey[:2]))
        conn = active.get(conv)
        if flags & TCP_SYN and not flags & TCP_ACK:
            # A new active open, unless it repeats the SYN of the current connection.
            if conn is None or conn.dirs.get(key) is None or conn.dirs[key].isn != seq:
                conn = Connection(len(conns), key, rkey)
                conns.append(conn)
                active[conv] = conn
        if conn is None:  # capture started mid-connection
            conn = Connection(len(conns), key, rkey)
            conns.append(conn)
            active[conv] = conn
        d = conn.direction(key)
        if flags & TCP_SYN:
            d.isn = seq
            seq = (seq + 1) & 0xFFFFFFFF
        if truncated:
            d.truncated_packets.append(idx)
        if payload:
            d.segments.append((seq, payload, idx))
        if flags & TCP_FIN:
            d.fin = True
        if flags & TCP_RST:
            d.rst = True
    return conns


def reassemble(d):
    """Return (bytes, notes, holes). Bytes stop at the first hole."""
    notes = []
    if not d.segments:
        return b"", notes, 0
    if d.isn is not None:
        base = (d.isn + 1) & 0xFFFFFFFF
    else:
        ref = d.segments[0][0]
        base = min((s for s, _, _ in d.segments), key=lambda s: seq_diff(s, ref))
        notes.append("no SYN seen: stream starts at the lowest captured sequence number")
    segs = sorted(
        ((seq_diff(s, base), i, data, idx) for i, (s, data, idx) in enumerate(d.segments)),
        key=lambda t: (t[0], t[1]),
    )
    if any(i != n for n, (_, i, _, _) in enumerate(segs)):
        notes.append("out-of-order segments put back in sequence order")
    out = bytearray()
    dups = 0
    holes = 0
    for off, _i, data, idx in segs:
        if off < 0:
            notes.append(f"packet {idx}: data before the initial sequence number ignored")
            continue
        end = off + len(data)
        if off > len(out):
            holes += 1
            notes.append(
                f"HOLE: {off - len(out)} bytes missing before packet {idx} "
                f"(stream offset {len(out)}); stream cut there"
            )
            break
        if end <= len(out):
            dups += 1
            if bytes(out[off:end]) != data:
                notes.append(f"packet {idx}: retransmission differs from the original bytes")
            continue
        overlap = len(out) - off
        if overlap > 0:
            dups += 1
            if bytes(out[off:]) != data[:overlap]:
                notes.append(f"packet {idx}: overlapping bytes differ from the original")
        out += data[overlap:]
    if dups:
        notes.append(f"{dups} retransmitted/duplicate segment(s) dropped")
    if d.truncated_packets:
        notes.append(f"packets truncated by snaplen: {d.truncated_packets}")
    return bytes(out), notes, holes


# --------------------------------------------------------------------------------------------
# BGP framing check


def split_bgp(buf):
    """Split a stream into BGP messages. Returns (messages, complete_len, problem)."""
    msgs = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos < 19:
            return msgs, pos, f"incomplete header ({len(buf) - pos} bytes) at the end"
        if buf[pos:pos + 16] != b"\xff" * 16:
            return msgs, pos, f"BAD MARKER at offset {pos}"
        length = struct.unpack("!H", buf[pos + 16:pos + 18])[0]
        mtype = buf[pos + 18]
        if length < 19:
            return msgs, pos, f"BAD LENGTH {length} at offset {pos}"
        if mtype not in MSG_TYPES:
            return msgs, pos, f"BAD TYPE {mtype} at offset {pos}"
        if pos + length > len(buf):
            return msgs, pos, (
                f"incomplete {MSG_TYPES[mtype]} at the end ({len(buf) - pos} of {length} bytes)"
            )
        msgs.append(buf[pos:pos + length])
        pos += length
    return msgs, pos, None


def end_of_rib(msg):
    """'IPv4 unicast' etc. if the UPDATE is an End-of-RIB marker (RFC 4724), else None."""
    body = msg[19:]
    if len(body) < 4:
        return None
    wlen = struct.unpack("!H", body[:2])[0]
    if wlen != 0:
        return None
    alen = struct.unpack("!H", body[2:4])[0]
    if alen == 0 and len(body) == 4:
        return "afi 1 safi 1"
    attrs = body[4:4 + alen]
    if len(body) != 4 + alen or len(attrs) < 3:
        return None
    flags, atype = attrs[0], attrs[1]
    if flags & 0x10:
        if len(attrs) < 4:
            return None
        vlen, voff = struct.unpack("!H", attrs[2:4])[0], 4
    else:
        vlen, voff = attrs[2], 3
    if atype == 15 and vlen == 3 and voff + vlen == len(attrs):
        afi, safi = struct.unpack("!HB", attrs[voff:voff + 3])
        return f"afi {afi} safi {safi}"
    return None


def open_capabilities(msgs):
    """{capability code: [value, ...]} from the first OPEN of a stream (None if there is none)."""
    for m in msgs:
        if m[18] != 1:
            continue
        body = m[19:]
        if len(body) < 10:
            return None
        optlen, params = body[9], body[10:]
        ext = optlen == 255 and params[:1] == b"\xff"  # RFC 9072 extended optional parameters
        if ext:
            optlen, params = struct.unpack("!H", params[1:3])[0], params[3:]
        params = params[:optlen]
        caps = {}
        pos = 0
        while pos < len(params):
            ptype = params[pos]
            if ext:
                plen, hdr = struct.unpack("!H", params[pos + 1:pos + 3])[0], 3
            else:
                plen, hdr = params[pos + 1], 2
            value = params[pos + hdr:pos + hdr + plen]
            pos += hdr + plen
            if ptype != 2:  # only Capabilities (RFC 5492)
                continue
            cpos = 0
            while cpos + 2 <= len(value):
                code, clen = value[cpos], value[cpos + 1]
                caps.setdefault(code, []).append(value[cpos + 2:cpos + 2 + clen])
                cpos += 2 + clen
        return caps
    return None


FAMILY_FLAG = {(1, 1): "ipv4-unicast", (2, 1): "ipv6-unicast"}


def decode_flags(sender_caps, receiver_caps):
    """bgp-decode flags for the messages one side sends, from both sides' OPEN capabilities."""
    if sender_caps is None or receiver_caps is None:
        return []
    flags = []
    if 65 not in sender_caps or 65 not in receiver_caps:
        flags.append("--as4=false")
    if 6 in sender_caps and 6 in receiver_caps:
        flags.append("--extended-message")

    def addpath(caps):
        res = {}
        for v in caps.get(69, []):
            for i in range(0, len(v) - len(v) % 4, 4):
                afi, safi, sr = struct.unpack("!HBB", v[i:i + 4])
                res[(afi, safi)] = sr
        return res

    send, recv = addpath(sender_caps), addpath(receiver_caps)
    for fam in sorted(send):
        if send[fam] & 2 and recv.get(fam, 0) & 1:
            flags.append("--add-path=" + FAMILY_FLAG.get(fam, f"afi{fam[0]}-safi{fam[1]}"))
    return flags


def summarize(msgs):
    counts = Counter(MSG_TYPES[m[18]] for m in msgs)
    parts = []
    for t in ("OPEN", "UPDATE", "NOTIFICATION", "KEEPALIVE", "ROUTE-REFRESH"):
        if not counts[t]:
            continue
        extra = ""
        if t == "UPDATE":
            eors = Counter(e for e in (end_of_rib(m) for m in msgs if m[18] == 2) if e)
            if eors:
                extra = " (End-of-RIB: " + ", ".join(f"{k} x{v}" for k, v in sorted(eors.items())) + ")"
        if t == "ROUTE-REFRESH":
            # AFI (2 bytes), subtype (RFC 7313; "reserved" = 0 before it), SAFI
            sub = Counter({0: "request", 1: "BoRR", 2: "EoRR"}.get(m[21], f"subtype {m[21]}")
                          for m in msgs if m[18] == 5 and len(m) >= 23)
            extra = " (" + ", ".join(f"{k} x{v}" for k, v in sorted(sub.items())) + ")"
        if t == "NOTIFICATION":
            codes = [f"{m[19]}/{m[20]}" for m in msgs if m[18] == 3 and len(m) >= 21]
            extra = " (" + ", ".join(codes) + ")"
        parts.append(f"{t} {counts[t]}{extra}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------


def name_of(addr):
    return NAMES.get(addr, addr.replace(":", "_"))


def extract(pcap, outdir):
    scenario = os.path.basename(pcap)[:-5] if pcap.endswith(".pcap") else os.path.basename(pcap)
    ok = True
    print(f"{pcap}:")
    conns = collect_connections(pcap)
    streams = []  # (conn order, Direction, bytes, notes, holes)
    for conn in conns:
        for d in conn.dirs.values():
            if d is None:
                continue
            data, notes, holes = reassemble(d)
            if data or holes:
                streams.append((conn.order, d, data, notes, holes))
    # file names: <sender>, or <sender>-to-<receiver> if the sender talks to several peers,
    # plus .<n> if the same pair has several connections
    receivers_of = {}
    for _o, d, _data, _n, _h in streams:
        receivers_of.setdefault(name_of(d.src), set()).add(name_of(d.dst))
    names = []
    for _o, d, _data, _n, _h in streams:
        s = name_of(d.src)
        names.append(s if len(receivers_of[s]) == 1 else f"{s}-to-{name_of(d.dst)}")
    pairs = Counter(names)
    # each side's OPEN capabilities, per connection, for the .args files
    caps = {}
    for order, d, data, _n, _h in streams:
        caps[(order, d.src, d.sport)] = open_capabilities(split_bgp(data)[0])
    seen = Counter()
    for old in glob.glob(os.path.join(outdir, f"{scenario}.*.bin")) + glob.glob(
        os.path.join(outdir, f"{scenario}.*.args")
    ):
        os.remove(old)
    for (order, d, data, notes, holes), base in zip(streams, names):
        seen[base] += 1
        fname = base if pairs[base] == 1 else f"{base}.{seen[base]}"
        out = os.path.join(outdir, f"{scenario}.{fname}.bin")
        msgs, good, problem = split_bgp(data)
        if problem:
            if problem.startswith("incomplete"):
                notes.append(f"trimmed {len(data) - good} bytes: {problem}")
            else:
                notes.append(f"ERROR: {problem}; file ends before it")
                ok = False
        if holes:
            ok = False
        with open(out, "wb") as f:
            f.write(data[:good])
        # re-read and re-check what was written
        with open(out, "rb") as f:
            again, _glen, gprob = split_bgp(f.read())
        if gprob is not None or len(again) != len(msgs):
            raise PcapError(f"{out}: written file does not re-parse ({gprob})")
        flags = decode_flags(caps.get((order, d.src, d.sport)), caps.get((order, d.dst, d.dport)))
        if flags:
            with open(out[:-4] + ".args", "w") as f:
                f.write(" ".join(flags) + "\n")
        print(
            f"  {os.path.basename(out)}: {d.src}:{d.sport} -> {d.dst}:{d.dport} (connection "
            f"{order + 1}), {good} bytes, {len(msgs)} messages: {summarize(msgs)}"
            + (f"; .args: {' '.join(flags)}" if flags else "")
        )
        for n in notes:
            print(f"    note: {n}")
    if not streams:
        print("  no TCP payload on port 179")
    return ok


def verify(paths):
    ok = True
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        msgs, good, problem = split_bgp(data)
        status = "ok" if problem is None else f"PROBLEM: {problem}"
        if problem:
            ok = False
        print(f"{p}: {len(data)} bytes, {len(msgs)} messages: {summarize(msgs)} [{status}]")
    return ok


def _streams(linktype, records):
    """{(src, sport, dst, dport, connection order): (bytes, notes)}"""
    res = {}
    for conn in connections_from_records(linktype, records):
        for d in conn.dirs.values():
            if d is not None:
                data, notes, _holes = reassemble(d)
                if data:
                    res[(d.src, d.sport, d.dst, d.dport, conn.order)] = (data, notes)
    return res


def _payload_key(linktype, frame):
    l3 = network_payload(linktype, frame)
    seg = tcp_segment(*l3) if l3 else None
    if not seg or len(seg[2]) < 20:
        return None
    src, dst, tcp, _ = seg
    sport, dport, _seq, _ack, off_flags = struct.unpack("!HHIIH", tcp[:14])
    return (src, sport, dst, dport) if len(tcp) > (off_flags >> 12) * 4 else None


def _to_sll(linktype, frame):
    """Re-encapsulate a frame as Linux cooked v1 (what tcpdump -i any wrote before SLL2)."""
    etype, l3 = network_payload(linktype, frame)
    src = frame[6:12] if linktype == LINKTYPE_ETHERNET else b"\0" * 6
    return struct.pack("!HHH8sH", 0, 1, 6, src + b"\0\0", etype) + l3


def selftest(pcaps):
    """Mutate real captures the way lossy captures look and check the streams do not change."""
    ok = True
    for pcap in pcaps:
        linktype, recs = read_pcap(pcap)
        want = {k: v[0] for k, v in _streams(linktype, recs).items()}
        keys = [_payload_key(linktype, f) for _i, f, _o in recs]
        frames = [f for _i, f, _o in recs]
        variants = {}
        # 1. every data segment captured twice (retransmissions)
        dup = []
        for f, k in zip(frames, keys):
            dup += [f, f] if k else [f]
        variants["duplicated"] = (linktype, dup)
        # 2. consecutive data segments of one direction swapped (out of order)
        sw = list(frames)
        last = {}
        for i, k in enumerate(keys):
            if k is None:
                continue
            if k in last:
                j = last.pop(k)
                sw[i], sw[j] = sw[j], sw[i]
            else:
                last[k] = i
        variants["swapped"] = (linktype, sw)
        # 3. Linux cooked v1 encapsulation
        variants["sll"] = (LINKTYPE_LINUX_SLL, [_to_sll(linktype, f) for f in frames])
        for name, (lt, fs) in variants.items():
            got = {k: v[0] for k, v in _streams(lt, [(i + 1, f, len(f)) for i, f in enumerate(fs)]).items()}
            good = got == want
            ok &= good
            print(f"  selftest {os.path.basename(pcap)} {name}: {'ok' if good else 'FAILED'}")
        # 4. capture cut in the middle of the last data segment: a clean prefix must remain
        last_data = max(i for i, k in enumerate(keys) if k)
        cut = [(i + 1, f, len(f)) for i, f in enumerate(frames[:last_data])]
        f = frames[last_data]
        cut.append((last_data + 1, f[: len(f) - 10], len(f)))
        got = _streams(linktype, cut)
        good = True
        for k, (data, _notes) in got.items():
            msgs, n, problem = split_bgp(data)
            if not want[k].startswith(data) or (problem and not problem.startswith("incomplete")):
                good = False
        ok &= good
        print(f"  selftest {os.path.basename(pcap)} cut: {'ok' if good else 'FAILED'}")
    return ok


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="pcap files (default: *.pcap next to this script)")
    ap.add_argument("--out", help="output directory (default: next to each pcap)")
    ap.add_argument("--verify", action="store_true", help="files are .bin streams: check only")
    ap.add_argument("--selftest", action="store_true",
                    help="check reassembly on mutated copies (duplicates, reordering, SLL, cut)")
    args = ap.parse_args()
    if args.verify:
        return 0 if verify(args.files or sorted(glob.glob(os.path.join(here, "*.bin")))) else 1
    files = args.files or sorted(glob.glob(os.path.join(here, "*.pcap")))
    if not files:
        print("no pcap files", file=sys.stderr)
        return 1
    if args.selftest:
        return 0 if selftest(files) else 1
    ok = True
    for pcap in files:
        try:
            ok &= extract(pcap, args.out or os.path.dirname(os.path.abspath(pcap)))
        except PcapError as e:
            print(f"  ERROR: {e}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
