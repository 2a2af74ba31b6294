#!/usr/bin/env bash
# Capture a real Router Advertisement (FRR's zebra) and Router Solicitation
# (the Linux kernel) for ferrolb's ndp router tests and fuzz seeds.
#
# Usage (as root):  testdata/ndp/router/capture.sh
#
# Two network namespaces (flbra-<pid>-r, -h) joined by a veth pair whose ends
# live only inside them: r/vr 02:00:5e:10:00:01, h/vh 02:00:5e:10:00:02, with
# only their link-local addresses. zebra runs in r with `no ipv6 nd
# suppress-ra` on vr (as it does for BGP unnumbered); tcpdump runs in r on vr
# while vh is brought up, so the kernel of h solicits (it is a host) and
# zebra advertises. The ICMPv6 message of the first RS and the first RA is
# written next to this script as kernel-rs.icmp and frr-ra.icmp (what a raw
# ICMPv6 socket reads). Every process started is recorded by PID and killed
# by PID on exit, and the namespaces are deleted. KEEP=1 keeps the run
# directory.
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
    echo "capture.sh: must run as root (network namespaces, tcpdump, zebra)" >&2
    exit 1
fi
ZEBRA=/usr/lib/frr/zebra
for tool in ip tcpdump python3 "$ZEBRA"; do
    command -v "$tool" >/dev/null || { echo "capture.sh: $tool not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX="flbra-$$"
WORK=$(mktemp -d /tmp/flbra.XXXXXX)
R="$PREFIX-r"
H="$PREFIX-h"
PIDS=()
NSS=()

log() { printf '[capture-ra %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

stop_pid() {
    local pid=$1 i st
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
        [[ -z $st || $st == Z* ]] && break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

on_exit() {
    local rc=$? i
    set +e
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
    for ((i = ${#NSS[@]} - 1; i >= 0; i--)); do ip netns del "${NSS[i]}" 2>/dev/null; done
    if [[ ${KEEP:-0} == 1 ]]; then log "run directory kept: $WORK"; else rm -rf "$WORK"; fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

for ns in "$R" "$H"; do
    ip netns add "$ns"
    NSS+=("$ns")
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
done
ip -n "$R" link add vr address 02:00:5e:10:00:01 type veth peer name vh address 02:00:5e:10:00:02 netns "$H"
ip -n "$R" link set vr up

cat >"$WORK/zebra.conf" <<CONF
frr defaults traditional
hostname capture
log file $WORK/zebra.log
interface vr
 ipv6 nd ra-interval 1
 no ipv6 nd suppress-ra
CONF
chown -R frr:frr "$WORK"
ip netns exec "$R" "$ZEBRA" -f "$WORK/zebra.conf" -i "$WORK/zebra.pid" --vty_socket "$WORK" \
    -z "$WORK/zserv.api" -P 0 >"$WORK/zebra.out" 2>&1 &
PIDS+=($!)

ip netns exec "$R" tcpdump -Z root -i vr -w "$WORK/ra.pcap" -U 'icmp6 and (ip6[40] == 133 or ip6[40] == 134)' \
    >"$WORK/tcpdump.out" 2>&1 &
PIDS+=($!)
sleep 1
log "bringing vh up: the kernel solicits, zebra advertises"
ip -n "$H" link set vh up
sleep 4
stop_pid "${PIDS[1]}"

python3 - "$WORK/ra.pcap" "$HERE" <<'PY'
import pathlib, struct, sys
data = pathlib.Path(sys.argv[1]).read_bytes()
out = pathlib.Path(sys.argv[2])
i, seen = 24, {}
while i + 16 <= len(data):
    _, _, incl, _ = struct.unpack("<IIII", data[i:i + 16])
    frame = data[i + 16:i + 16 + incl]
    i += 16 + incl
    icmp = frame[14 + 40:14 + 40 + int.from_bytes(frame[18:20], "big")]
    name = {133: "kernel-rs", 134: "frr-ra"}.get(icmp[0])
    if name and name not in seen:
        seen[name] = icmp
        (out / f"{name}.icmp").write_bytes(icmp)
        print(f"capture.sh: wrote {name}.icmp ({len(icmp)} octets)")
if len(seen) != 2:
    raise SystemExit(f"capture.sh: captured {sorted(seen)}, need kernel-rs and frr-ra")
PY
