#!/usr/bin/env bash
# Capture real Neighbor Discovery frames sent by the Linux kernel for ferrolb's ndp tests.
#
# Usage (as root):  testdata/ndp/capture.sh
# Then:             python3 testdata/ndp/extract.py
#
# Two network namespaces (flbndp-<pid>-a, -b) joined by a veth pair whose ends live only inside
# them: a/va 02:00:5e:10:00:01 2001:db8::1/64, b/vb 02:00:5e:10:00:02 2001:db8::2/64
# (documentation prefix, locally administered MACs), so no frame ever leaves them. tcpdump runs
# in b on vb and writes ndp.pcap next to this script (NS and NA only). Every process started is
# recorded by PID and killed by PID on exit (trap EXIT), and the namespaces are deleted.
# KEEP=1 keeps the run directory (logs).
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
    echo "capture.sh: must run as root (network namespaces, tcpdump)" >&2
    exit 1
fi
for tool in ip tcpdump ping; do
    command -v "$tool" >/dev/null || { echo "capture.sh: $tool not found" >&2; exit 1; }
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$HERE}
PREFIX="flbndp-$$"
WORK=$(mktemp -d /tmp/flbndp.XXXXXX)
A="$PREFIX-a"
B="$PREFIX-b"
MAC_A=02:00:5e:10:00:01
MAC_B=02:00:5e:10:00:02

PIDS=() # background processes we started
NSS=()  # namespaces we created

log() { printf '[capture-ndp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

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
# No link-local DAD noise: link-locals without DAD; DAD is exercised on purpose in step 4.
ip netns exec "$A" sysctl -qw net.ipv6.conf.va.accept_dad=0 \
    net.ipv6.conf.va.ndisc_notify=1 net.ipv6.neigh.va.delay_first_probe_time=1
ip netns exec "$B" sysctl -qw net.ipv6.conf.vb.accept_dad=0
ip -n "$A" addr add 2001:db8::1/64 dev va nodad
ip -n "$B" addr add 2001:db8::2/64 dev vb nodad
ip -n "$B" link set vb up

# NS and NA only (no MLD, no router discovery).
ip netns exec "$B" tcpdump -i vb -n -U -s 0 -w "$WORK/ndp.pcap" \
    'icmp6 and (ip6[40] == 135 or ip6[40] == 136)' >"$WORK/tcpdump.log" 2>&1 &
TCPDUMP_PID=$!
PIDS+=("$TCPDUMP_PID")
for ((i = 0; i < 50; i++)); do
    grep -q 'listening on' "$WORK/tcpdump.log" && break
    sleep 0.1
done
grep -q 'listening on' "$WORK/tcpdump.log" || { log "tcpdump did not start"; exit 1; }

log "1. va up: kernel unsolicited NAs to ff02::1 (ndisc_notify)"
ip -n "$A" link set va up
sleep 1.5

log "2. ping 2001:db8::2: kernel multicast NS from a, solicited NA from b"
ip netns exec "$A" ping -6 -c1 -W2 2001:db8::2 >/dev/null

log "3. ping 2001:db8::10 (nobody has it, our VIP in the tests): kernel NSs from a"
ip netns exec "$A" ping -6 -c1 -W1 2001:db8::10 >/dev/null || true
sleep 2

log "4. add 2001:db8::3 with DAD: kernel DAD NS from :: (with an RFC 7527 nonce)"
ip netns exec "$A" sysctl -qw net.ipv6.conf.va.accept_dad=1
ip -n "$A" addr add 2001:db8::3/64 dev va
sleep 1.5

log "5. neighbour stale, ping again: kernel unicast NS (NUD probe) from a, NA from b"
ip -n "$A" neigh replace 2001:db8::2 lladdr "$MAC_B" dev va nud stale
ip netns exec "$A" ping -6 -c1 -W2 2001:db8::2 >/dev/null
sleep 2.5

stop_pid "$TCPDUMP_PID" INT
PIDS=()
cp "$WORK/ndp.pcap" "$OUT/ndp.pcap"
chmod 644 "$OUT/ndp.pcap"
log "wrote $OUT/ndp.pcap ($(stat -c %s "$OUT/ndp.pcap") bytes)"
