#!/usr/bin/env bash
# Capture real ARP frames sent by the Linux kernel (and arping) for ferrolb's arp tests.
#
# Usage (as root):  testdata/arp/capture.sh
# Then:             python3 testdata/arp/extract.py
#
# Two network namespaces (flbarp-<pid>-a, -b) joined by a veth pair whose ends live only inside
# them: a/va 02:00:5e:10:00:01 192.0.2.1/24, b/vb 02:00:5e:10:00:02 192.0.2.2/24 (TEST-NET-1,
# locally administered MACs), so no frame ever leaves them. tcpdump runs in b on vb and writes
# arp.pcap next to this script. Every process started is recorded by PID and killed by PID on
# exit (trap EXIT), and the namespaces are deleted. KEEP=1 keeps the run directory (logs).
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
    echo "capture.sh: must run as root (network namespaces, tcpdump)" >&2
    exit 1
fi
for tool in ip tcpdump ping arping; do
    command -v "$tool" >/dev/null || { echo "capture.sh: $tool not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$HERE}
PREFIX="flbarp-$$"
WORK=$(mktemp -d /tmp/flbarp.XXXXXX)
A="$PREFIX-a"
B="$PREFIX-b"
MAC_A=02:00:5e:10:00:01
MAC_B=02:00:5e:10:00:02

PIDS=() # background processes we started
NSS=()  # namespaces we created

log() { printf '[capture-arp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Terminate one recorded PID (given signal, then KILL after 5 s) and reap it.
stop_pid() {
    local pid=$1 sig=${2:-TERM} i st
    kill -"$sig" "$pid" 2>/dev/null || true
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

for ns in "$A" "$B"; do
    ip netns add "$ns"
    NSS+=("$ns")
    ip -n "$ns" link set lo up
done
ip -n "$A" link add va address "$MAC_A" type veth peer name vb address "$MAC_B" netns "$B"
ip -n "$A" addr add 192.0.2.1/24 dev va
ip -n "$B" addr add 192.0.2.2/24 dev vb
# a: gratuitous ARP when va comes up (arp_notify); quick NUD probes (see step 4).
ip netns exec "$A" sysctl -qw net.ipv4.conf.va.arp_notify=1 \
    net.ipv4.neigh.va.delay_first_probe_time=1
ip -n "$B" link set vb up

# Start the capture before va comes up, to catch the gratuitous ARP.
ip netns exec "$B" tcpdump -i vb -n -U -s 0 -w "$WORK/arp.pcap" arp >"$WORK/tcpdump.log" 2>&1 &
TCPDUMP_PID=$!
PIDS+=("$TCPDUMP_PID")
for ((i = 0; i < 50; i++)); do
    grep -q 'listening on' "$WORK/tcpdump.log" && break
    sleep 0.1
done
grep -q 'listening on' "$WORK/tcpdump.log" || { log "tcpdump did not start"; exit 1; }

log "1. va up: kernel gratuitous ARP request (arp_notify)"
ip -n "$A" link set va up
sleep 1

log "2. ping 192.0.2.2: kernel broadcast request from a, kernel reply from b"
ip netns exec "$A" ping -c1 -W2 192.0.2.2 >/dev/null

log "3. ping 192.0.2.10 (nobody has it, our VIP in the tests): kernel requests from a"
ip netns exec "$A" ping -c1 -W1 192.0.2.10 >/dev/null || true
sleep 2

log "4. neighbour stale, ping again: kernel unicast probe (PROBE state) from a, reply from b"
ip -n "$A" neigh replace 192.0.2.2 lladdr "$MAC_B" dev va nud stale
ip netns exec "$A" ping -c1 -W2 192.0.2.2 >/dev/null
sleep 2.5

log "5. arping -0: RFC 5227 probe (sender 0.0.0.0) from a, kernel reply from b"
ip netns exec "$A" arping -0 -c1 -w 2 -i va 192.0.2.2 >/dev/null || true

log "6. arping -U: gratuitous request from a"
ip netns exec "$A" arping -U -c1 -w 1 -i va -S 192.0.2.1 192.0.2.1 >/dev/null 2>&1 || true
sleep 1

stop_pid "$TCPDUMP_PID" INT
PIDS=()
cp "$WORK/arp.pcap" "$OUT/arp.pcap"
chmod 644 "$OUT/arp.pcap"
log "wrote $OUT/arp.pcap ($(stat -c %s "$OUT/arp.pcap") bytes)"
