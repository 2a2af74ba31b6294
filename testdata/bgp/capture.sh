#!/usr/bin/env bash
# Capture real BGP sessions between FRR, BIRD 2 and GoBGP for ferrolb's codec tests.
#
# Usage (as root):  testdata/bgp/capture.sh [scenario ...]
#   scenarios: frr-bird frr-gobgp frr-ibgp as-trans bad-peer-as hold-timer frr-bird-lossy
#   (default: all)
# Then:             python3 testdata/bgp/extract.py
#
# Every router runs in a network namespace created here (names flbcap-<pid>-*), linked by veth
# pairs whose both ends live inside those namespaces; addresses are 10.0.x.0/24 and fd00:x::/64
# only, so no packet ever leaves them. tcpdump runs inside one namespace per scenario and writes
# <scenario>.pcap next to this script. Everything started is recorded by PID and killed by PID
# on exit (trap EXIT), and the namespaces are deleted. KEEP=1 keeps the run directory (logs).
set -euo pipefail

if [[ ${EUID} -ne 0 ]]; then
    echo "capture.sh: must run as root (network namespaces, tcpdump)" >&2
    exit 1
fi
for tool in /usr/lib/frr/zebra /usr/lib/frr/bgpd vtysh bird birdc gobgpd gobgp tcpdump nft ss \
    unshare python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "capture.sh: $tool missing (apt-get install frr bird2 gobgpd tcpdump nftables)" >&2
        exit 1
    fi
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$HERE}
FRR=/usr/lib/frr
PREFIX="flbcap-$$"
WORK=$(mktemp -d /tmp/flbcap.XXXXXX)
chmod 755 "$WORK" # zebra/bgpd drop to user frr and must reach their run dirs

PIDS=() # every background process we started, in start order
NSS=()  # every namespace we created

log() { printf '[capture %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    log "ERROR: $*"
    if [[ -n ${PAUSE_ON_ERROR:-} ]]; then
        log "pausing ${PAUSE_ON_ERROR}s for inspection (run dir $WORK, namespaces ${NSS[*]})"
        sleep "$PAUSE_ON_ERROR"
    fi
    exit 1
}

# Terminate one recorded PID (TERM, then KILL after 5 s) and reap it. Only if it is still our
# own child (every process we start is), so a recycled PID is never signalled.
stop_pid() {
    local pid=$1 sig=${2:-TERM} i st
    [[ $(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ') == "$$" ]] || return 0
    kill -"$sig" "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true # in case it was SIGSTOPped
    for ((i = 0; i < 50; i++)); do
        st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
        [[ -z $st || $st == Z* ]] && break
        sleep 0.1
    done
    st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
    if [[ -n $st && $st != Z* ]]; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# Kill everything recorded (newest first) and delete our namespaces.
teardown() {
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        stop_pid "${PIDS[i]}"
    done
    PIDS=()
    for ((i = ${#NSS[@]} - 1; i >= 0; i--)); do
        ip netns del "${NSS[i]}" 2>/dev/null || true
    done
    NSS=()
}

on_exit() {
    local rc=$?
    set +e
    teardown
    if [[ ${KEEP:-0} == 1 ]]; then
        log "run directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

# wait_until SECONDS cmd... : poll cmd every 0.2 s until it succeeds; fail after SECONDS.
wait_until() {
    local t=$1 end
    shift
    end=$((SECONDS + t))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || return 1
        sleep 0.2
    done
}

# ---------------------------------------------------------------------------------------------
# Namespaces and links

# mkns SHORT -> creates namespace $PREFIX-SHORT, loopback up, no IPv6 DAD.
mkns() {
    local ns="$PREFIX-$1"
    ip netns add "$ns"
    NSS+=("$ns")
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
}

# link NS_A IF_A MAC_A NS_B IF_B MAC_B : veth pair created directly inside the two namespaces.
link() {
    ip -n "$PREFIX-$1" link add "$2" address "$3" type veth peer name "$5" address "$6" netns "$PREFIX-$4"
    ip -n "$PREFIX-$1" link set "$2" up
    ip -n "$PREFIX-$4" link set "$5" up
}

# addr NS IF ADDR/LEN...
addr() {
    local ns="$PREFIX-$1" ifc=$2 a
    shift 2
    for a in "$@"; do
        if [[ $a == *:* ]]; then
            ip -n "$ns" addr add "$a" dev "$ifc" nodad
        else
            ip -n "$ns" addr add "$a" dev "$ifc"
        fi
    done
}

# in_ns SHORT cmd... : run a command inside one of our namespaces.
in_ns() {
    local ns="$PREFIX-$1"
    shift
    ip netns exec "$ns" "$@"
}

# spawn LOGFILE SHORT_NS cmd... : start in background inside a namespace, record PID in LASTPID.
LASTPID=
spawn() {
    local logf=$1 ns="$PREFIX-$2"
    shift 2
    ip netns exec "$ns" "$@" >"$logf" 2>&1 &
    LASTPID=$!
    PIDS+=("$LASTPID")
}

# (no "cmd | grep -q" anywhere: with pipefail, grep -q exiting early fails the pipeline)
listening() { # listening SHORT_NS : something listens on TCP 179
    local out
    out=$(in_ns "$1" ss -Hltn 'sport = :179')
    [[ $out == *LISTEN* ]]
}

# ---------------------------------------------------------------------------------------------
# tcpdump

TCPDUMP_PID=
start_capture() { # start_capture SHORT_NS IFACE SCENARIO
    local logf="$WORK/$3.tcpdump.log"
    spawn "$logf" "$1" tcpdump -i "$2" -n -U -Z root -s 0 -w "$WORK/$3.pcap" 'tcp port 179'
    TCPDUMP_PID=$LASTPID
    wait_until 10 grep -q 'listening on' "$logf" || die "tcpdump did not start: $(cat "$logf")"
}

stop_capture() { # stop_capture SCENARIO : flush, stop, copy the pcap to $OUT
    sleep 1
    stop_pid "$TCPDUMP_PID" INT
    local keep=() p
    for p in "${PIDS[@]}"; do [[ $p == "$TCPDUMP_PID" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
    cp "$WORK/$1.pcap" "$OUT/$1.pcap"
    chmod 644 "$OUT/$1.pcap"
    log "$1: wrote $OUT/$1.pcap ($(stat -c %s "$OUT/$1.pcap") bytes)"
}

# ---------------------------------------------------------------------------------------------
# FRR

frr_header() { # frr_header HOSTNAME DIR
    cat <<EOF
frr defaults traditional
hostname $1
log file $2/bgpd.log
log timestamp precision 3
!
EOF
}

# start_frr SHORT_NS DIR LISTEN_ADDR... : zebra + bgpd in the foreground, config in DIR/bgpd.conf
start_frr() {
    local ns=$1 dir=$2 a
    shift 2
    local largs=()
    for a in "$@"; do largs+=(-l "$a"); done
    printf 'hostname %s-zebra\nlog file %s/zebra.log\n' "$ns" "$dir" >"$dir/zebra.conf"
    chown -R frr:frr "$dir"
    spawn "$dir/zebra.out" "$ns" "$FRR/zebra" -f "$dir/zebra.conf" -i "$dir/zebra.pid" \
        --vty_socket "$dir" -z "$dir/zserv.api" -P 0
    wait_until 10 test -S "$dir/zserv.api" || die "zebra in $ns did not start: $(cat "$dir/zebra.out")"
    wait_until 10 zebra_knows_addrs "$ns" "$dir" || die "zebra in $ns does not see all addresses"
    spawn "$dir/bgpd.out" "$ns" "$FRR/bgpd" -f "$dir/bgpd.conf" -i "$dir/bgpd.pid" \
        --vty_socket "$dir" -z "$dir/zserv.api" -P 0 "${largs[@]}"
    wait_until 10 test -S "$dir/bgpd.vty" || die "bgpd in $ns did not start: $(cat "$dir/bgpd.out")"
}

# zebra_knows_addrs SHORT_NS DIR : zebra lists every address of the namespace (incl. IPv6
# link-local), so bgpd can pick its next hops (global + link-local) from the first UPDATE on.
zebra_knows_addrs() {
    local ns=$1 dir=$2 a out
    out=$(vtysh --vty_socket "$dir" -d zebra -c 'show interface')
    for a in $(in_ns "$ns" ip -o addr show | awk '$2 != "lo" {print $4}'); do
        [[ $out == *" $a"* ]] || return 1
    done
}

# vty DIR CMD... : run vtysh commands (one -c per argument) against the daemons of DIR.
vty() {
    local dir=$1 c
    shift
    local args=()
    for c in "$@"; do args+=(-c "$c"); done
    vtysh --vty_socket "$dir" "${args[@]}"
}

# frr_pfx DIR AFI PEER -> prints pfxRcd when Established, else -1
frr_pfx() {
    vtysh --vty_socket "$1" -d bgpd -c "show bgp $2 unicast summary json" 2>/dev/null |
        python3 -c '
import json, sys
try:
    p = json.load(sys.stdin).get("peers", {}).get(sys.argv[1], {})
except ValueError:
    p = {}
print(p.get("pfxRcd", -1) if p.get("state") == "Established" else -1)' "$3"
}
frr_has() { [[ $(frr_pfx "$1" "$2" "$3") == "$4" ]]; }

frr_state() { # frr_state DIR PEER -> bgpState
    vtysh --vty_socket "$1" -d bgpd -c "show bgp neighbors $2 json" 2>/dev/null |
        python3 -c '
import json, sys
try:
    print(json.load(sys.stdin).get(sys.argv[1], {}).get("bgpState", "?"))
except ValueError:
    print("?")' "$2"
}
frr_not_established() { [[ $(frr_state "$1" "$2") != Established ]]; }

# ---------------------------------------------------------------------------------------------
# BIRD

start_bird() { # start_bird SHORT_NS DIR  (config in DIR/bird.conf)
    spawn "$2/bird.out" "$1" bird -f -c "$2/bird.conf" -s "$2/bird.ctl" -P "$2/bird.pid"
    wait_until 10 test -S "$2/bird.ctl" || die "bird in $1 did not start: $(cat "$2/bird.out")"
}

# bird_routes DIR PROTO TABLE -> number of routes in TABLE learned from PROTO
bird_routes() {
    birdc -s "$1/bird.ctl" show route table "$3" protocol "$2" count 2>/dev/null |
        sed -n 's/^\([0-9][0-9]*\) of [0-9]* routes.*/\1/p'
}
bird_has() { [[ $(bird_routes "$1" "$2" "$3") == "$4" ]]; }
bird_established() {
    local out
    out=$(birdc -s "$1/bird.ctl" show protocols "$2")
    [[ $out == *Established* ]]
}
bird_not_established() { ! bird_established "$@"; }

# ---------------------------------------------------------------------------------------------
# GoBGP

# GoBGP advertises the FQDN capability with the OS host name: run it in its own UTS namespace
# named "gobgp" so the capture does not depend on (or leak) this machine's name. unshare and sh
# exec, so the recorded PID is gobgpd's.
start_gobgp() { # start_gobgp SHORT_NS DIR  (config in DIR/gobgpd.toml)
    spawn "$2/gobgpd.out" "$1" unshare --uts sh -c 'hostname gobgp && exec "$@"' sh \
        gobgpd -f "$2/gobgpd.toml" -t toml -p -l info --pprof-disable --api-hosts=127.0.0.1:50051
    wait_until 15 in_ns "$1" gobgp global || die "gobgpd in $1 did not start: $(cat "$2/gobgpd.out")"
}
gobgp_cli() { # gobgp_cli SHORT_NS args...
    local ns=$1
    shift
    in_ns "$ns" gobgp "$@"
}
gobgp_established() {
    local out
    out=$(gobgp_cli "$1" neighbor "$2")
    [[ ${out,,} == *"bgp state = established"* ]]
}

# =============================================================================================
# Scenario frr-bird: eBGP over IPv4 transport, IPv4 + IPv6 unicast, graceful restart (End-of-RIB),
# communities / large / extended communities, MED, AS-path prepend; withdrawals; route refresh in
# both directions; administrative shutdown with an RFC 9003 message.
#   FRR  AS 64501 10.0.1.1 fd00:1::1   <-- veth -->   BIRD AS 64502 10.0.1.2 fd00:1::2

frr_bird_frr_conf() { # DIR
    frr_header frr "$1"
    cat <<'EOF'
route-map FB-AGG permit 10
 set community 64501:100 64501:200
 set large-community 64501:1:100
 set extcommunity rt 64501:100
 set metric 100
!
route-map FB-HOST permit 10
 set community 64501:300 no-peer
 set large-community 64501:2:300 64501:2:301
 set extcommunity rt 64501:300
 set metric 5
!
route-map FB-PREPEND permit 10
 set as-path prepend 64501 64501 64501 64501 64501 64501
 set community 64501:666
 set metric 50
!
router bgp 64501
 bgp router-id 10.0.1.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 bgp graceful-restart
 neighbor 10.0.1.2 remote-as 64502
 neighbor 10.0.1.2 description bird
 neighbor 10.0.1.2 timers connect 2
 !
 address-family ipv4 unicast
  network 10.1.0.0/16 route-map FB-AGG
  network 10.1.1.1/32 route-map FB-HOST
  network 10.1.2.0/24 route-map FB-PREPEND
  network 10.1.3.3/32 route-map FB-HOST
 exit-address-family
 !
 address-family ipv6 unicast
  network fd00:a::/48 route-map FB-AGG
  network fd00:a::1/128 route-map FB-HOST
  network fd00:a:2::/64 route-map FB-PREPEND
  network fd00:a::3/128 route-map FB-HOST
  neighbor 10.0.1.2 activate
 exit-address-family
!
EOF
}

frr_bird_bird_conf() { # DIR WITHDRAWN(0|1)
    local dir=$1 w=$2
    cat <<EOF
log "$dir/bird.log" all;
router id 10.0.1.2;
protocol device { }
protocol static st4 {
  ipv4;
  route 10.2.0.0/16 blackhole;
  route 10.2.2.2/32 blackhole;
  $([[ $w == 1 ]] && echo '#')route 10.2.3.0/24 blackhole;
  $([[ $w == 1 ]] && echo '#')route 10.2.4.4/32 blackhole;
}
protocol static st6 {
  ipv6;
  route fd00:b::/48 blackhole;
  route fd00:b::2/128 blackhole;
  $([[ $w == 1 ]] && echo '#')route fd00:b:3::/64 blackhole;
  $([[ $w == 1 ]] && echo '#')route fd00:b::4/128 blackhole;
}
filter to_frr {
  if source != RTS_STATIC then reject;
  if net ~ [ 10.2.0.0/16 ] || net ~ [ fd00:b::/48 ] then {
    bgp_community.add((64502,100));
    bgp_large_community.add((64502,1,100));
    bgp_ext_community.add((rt,64502,100));
    bgp_med = 200;
  }
  if net ~ [ 10.2.2.2/32, 10.2.4.4/32 ] || net ~ [ fd00:b::2/128, fd00:b::4/128 ] then {
    bgp_community.add((65535,65281));
    bgp_community.add((64502,300));
    bgp_large_community.add((64502,2,300));
    bgp_ext_community.add((rt,64502,300));
    bgp_med = 7;
  }
  if net ~ [ 10.2.3.0/24 ] || net ~ [ fd00:b:3::/64 ] then {
    bgp_path.prepend(64502);
    bgp_path.prepend(64502);
    bgp_path.prepend(64502);
    bgp_path.prepend(64502);
    bgp_path.prepend(64502);
    bgp_community.add((65535,65282));
    bgp_large_community.add((64502,3,1));
  }
  accept;
}
protocol bgp frr {
  local 10.0.1.2 as 64502;
  neighbor 10.0.1.1 as 64501;
  passive on;
  graceful restart on;
  ipv4 { import all; export filter to_frr; };
  ipv6 { import all; export filter to_frr; next hop address fd00:1::2; };
}
EOF
}

scenario_frr_bird() {
    local s=frr-bird
    local fd="$WORK/$s/frr" bd="$WORK/$s/bird"
    mkdir -p "$fd" "$bd"
    mkns fb-frr
    mkns fb-bird
    link fb-frr eth0 02:00:00:00:01:01 fb-bird eth0 02:00:00:00:01:02
    addr fb-frr eth0 10.0.1.1/24 fd00:1::1/64
    addr fb-bird eth0 10.0.1.2/24 fd00:1::2/64
    frr_bird_frr_conf "$fd" >"$fd/bgpd.conf"
    frr_bird_bird_conf "$bd" 0 >"$bd/bird.conf"

    start_capture fb-frr eth0 "$s"
    start_bird fb-bird "$bd"
    wait_until 10 listening fb-bird || die "$s: bird not listening"
    start_frr fb-frr "$fd" 10.0.1.1
    wait_until 30 frr_has "$fd" ipv4 10.0.1.2 4 || die "$s: FRR did not get 4 IPv4 routes"
    wait_until 30 frr_has "$fd" ipv6 10.0.1.2 4 || die "$s: FRR did not get 4 IPv6 routes"
    wait_until 30 bird_has "$bd" frr master4 4 || die "$s: BIRD did not get 4 IPv4 routes"
    wait_until 30 bird_has "$bd" frr master6 4 || die "$s: BIRD did not get 4 IPv6 routes"
    sleep 3
    log "$s: established, routes exchanged; withdrawing"

    # Withdrawals: FRR removes two network statements per family, BIRD reloads a config
    # without two statics per family.
    vty "$fd" 'configure terminal' 'router bgp 64501' 'address-family ipv4 unicast' \
        'no network 10.1.1.1/32 route-map FB-HOST' 'no network 10.1.2.0/24 route-map FB-PREPEND' \
        'exit-address-family' 'address-family ipv6 unicast' \
        'no network fd00:a::1/128 route-map FB-HOST' 'no network fd00:a:2::/64 route-map FB-PREPEND' \
        >/dev/null
    wait_until 20 bird_has "$bd" frr master4 2 || die "$s: BIRD did not see IPv4 withdrawals"
    wait_until 20 bird_has "$bd" frr master6 2 || die "$s: BIRD did not see IPv6 withdrawals"
    sleep 1
    frr_bird_bird_conf "$bd" 1 >"$bd/bird.conf"
    birdc -s "$bd/bird.ctl" configure >/dev/null
    wait_until 20 frr_has "$fd" ipv4 10.0.1.2 2 || die "$s: FRR did not see IPv4 withdrawals"
    wait_until 20 frr_has "$fd" ipv6 10.0.1.2 2 || die "$s: FRR did not see IPv6 withdrawals"
    sleep 2

    log "$s: route refresh FRR -> BIRD"
    vty "$fd" 'clear bgp ipv4 unicast 10.0.1.2 soft in' >/dev/null
    sleep 2
    vty "$fd" 'clear bgp ipv6 unicast 10.0.1.2 soft in' >/dev/null
    sleep 2
    log "$s: route refresh BIRD -> FRR"
    birdc -s "$bd/bird.ctl" reload in frr >/dev/null
    sleep 3

    log "$s: administrative shutdown"
    vty "$fd" 'configure terminal' 'router bgp 64501' \
        'neighbor 10.0.1.2 shutdown message ferrolb capture: planned maintenance' >/dev/null
    wait_until 20 bird_not_established "$bd" frr || die "$s: BIRD still established"
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario frr-gobgp: eBGP over IPv6 transport, IPv4 + IPv6 unicast, graceful restart; GoBGP
# (passive) gets routes added and deleted live through its CLI.
#   FRR AS 64501 fd00:2::1 10.0.2.1   <-- veth -->   GoBGP AS 64503 fd00:2::2 10.0.2.2

frr_gobgp_frr_conf() { # DIR
    frr_header frr "$1"
    cat <<'EOF'
route-map FG-OUT4 permit 10
 set community 64501:400 graceful-shutdown
 set large-community 64501:4:400
 set extcommunity rt 64501:400
 set metric 40
!
route-map FG-OUT6 permit 10
 set community 64501:600 64501:601
 set large-community 64501:6:600
 set extcommunity rt 64501:600
 set metric 60
!
router bgp 64501
 bgp router-id 10.0.2.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 bgp graceful-restart
 neighbor fd00:2::2 remote-as 64503
 neighbor fd00:2::2 description gobgp
 neighbor fd00:2::2 timers connect 2
 !
 address-family ipv4 unicast
  network 10.1.4.0/24 route-map FG-OUT4
  network 10.1.4.4/32 route-map FG-OUT4
  neighbor fd00:2::2 activate
 exit-address-family
 !
 address-family ipv6 unicast
  network fd00:a:4::/64 route-map FG-OUT6
  network fd00:a:4::4/128 route-map FG-OUT6
  neighbor fd00:2::2 activate
 exit-address-family
!
EOF
}

frr_gobgp_gobgp_conf() {
    cat <<'EOF'
[global.config]
  as = 64503
  router-id = "10.0.2.2"

[[neighbors]]
  [neighbors.config]
    neighbor-address = "fd00:2::1"
    peer-as = 64501
  [neighbors.transport.config]
    passive-mode = true
    local-address = "fd00:2::2"
  [neighbors.graceful-restart.config]
    enabled = true
    restart-time = 120
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
EOF
}

scenario_frr_gobgp() {
    local s=frr-gobgp
    local fd="$WORK/$s/frr" gd="$WORK/$s/gobgp"
    mkdir -p "$fd" "$gd"
    mkns fg-frr
    mkns fg-gobgp
    link fg-frr eth0 02:00:00:00:02:01 fg-gobgp eth0 02:00:00:00:02:02
    addr fg-frr eth0 fd00:2::1/64 10.0.2.1/24
    addr fg-gobgp eth0 fd00:2::2/64 10.0.2.2/24
    frr_gobgp_frr_conf "$fd" >"$fd/bgpd.conf"
    frr_gobgp_gobgp_conf >"$gd/gobgpd.toml"

    start_capture fg-frr eth0 "$s"
    start_gobgp fg-gobgp "$gd"
    wait_until 10 listening fg-gobgp || die "$s: gobgpd not listening"
    start_frr fg-frr "$fd" fd00:2::1
    wait_until 30 gobgp_established fg-gobgp fd00:2::1 || die "$s: session not established"
    wait_until 30 frr_has "$fd" ipv4 fd00:2::2 0 || die "$s: FRR not established"
    sleep 3
    log "$s: established; adding routes in GoBGP"
    gobgp_cli fg-gobgp global rib add -a ipv4 10.3.0.0/24 origin igp med 30 \
        community 64503:100,no-export large-community 64503:1:100,64503:1:101
    sleep 1
    gobgp_cli fg-gobgp global rib add -a ipv4 10.3.1.1/32 origin incomplete \
        community 64503:200 large-community 64503:2:200
    sleep 1
    gobgp_cli fg-gobgp global rib add -a ipv6 fd00:c::/48 origin igp med 31 \
        community 64503:300,no-export large-community 64503:3:300
    sleep 1
    gobgp_cli fg-gobgp global rib add -a ipv6 fd00:c::1/128 origin igp \
        community 64503:400 large-community 64503:4:400
    wait_until 20 frr_has "$fd" ipv4 fd00:2::2 2 || die "$s: FRR did not get 2 IPv4 routes"
    wait_until 20 frr_has "$fd" ipv6 fd00:2::2 2 || die "$s: FRR did not get 2 IPv6 routes"
    sleep 2
    log "$s: deleting routes in GoBGP"
    gobgp_cli fg-gobgp global rib del -a ipv4 10.3.1.1/32
    sleep 1
    gobgp_cli fg-gobgp global rib del -a ipv6 fd00:c::1/128
    wait_until 20 frr_has "$fd" ipv4 fd00:2::2 1 || die "$s: FRR did not see IPv4 deletion"
    wait_until 20 frr_has "$fd" ipv6 fd00:2::2 1 || die "$s: FRR did not see IPv6 deletion"
    sleep 2
    log "$s: administrative shutdown"
    vty "$fd" 'configure terminal' 'router bgp 64501' \
        'neighbor fd00:2::2 shutdown message ferrolb capture: done' >/dev/null
    wait_until 20 frr_not_established "$fd" fd00:2::2 || die "$s: still established"
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario frr-ibgp: iBGP, 4-octet AS 4200000001 (OPEN carries AS_TRANS 23456), route reflector
# (ORIGINATOR_ID, CLUSTER_LIST), LOCAL_PREF, ADD-PATH (rr sends all paths to c2).
#   c1 10.0.3.2 fd00:3::2 <-> 10.0.3.1 fd00:3::1 rr 10.0.4.1 fd00:4::1 <-> 10.0.4.2 fd00:4::2 c2
# Captured on every interface of rr (tcpdump -i any: Linux cooked capture).

ibgp_rr_conf() {
    frr_header rr "$1"
    cat <<'EOF'
route-map RR-LOCAL permit 10
 set local-preference 50
 set community 65000:50
 set large-community 4200000001:0:50
!
router bgp 4200000001
 bgp router-id 10.255.0.1
 bgp cluster-id 10.255.255.1
 bgp log-neighbor-changes
 no bgp network import-check
 neighbor 10.0.3.2 remote-as 4200000001
 neighbor 10.0.3.2 description c1
 neighbor 10.0.3.2 passive
 neighbor 10.0.4.2 remote-as 4200000001
 neighbor 10.0.4.2 description c2
 neighbor 10.0.4.2 passive
 !
 address-family ipv4 unicast
  network 10.30.0.0/24 route-map RR-LOCAL
  neighbor 10.0.3.2 route-reflector-client
  neighbor 10.0.4.2 route-reflector-client
  neighbor 10.0.4.2 addpath-tx-all-paths
 exit-address-family
 !
 address-family ipv6 unicast
  network fd00:30::/48 route-map RR-LOCAL
  neighbor 10.0.3.2 activate
  neighbor 10.0.3.2 route-reflector-client
  neighbor 10.0.4.2 activate
  neighbor 10.0.4.2 route-reflector-client
  neighbor 10.0.4.2 addpath-tx-all-paths
 exit-address-family
!
EOF
}

ibgp_c1_conf() {
    frr_header c1 "$1"
    cat <<'EOF'
route-map C1-BEST permit 10
 set local-preference 200
 set community 65000:200 no-export
 set large-community 4200000001:200:1
 set extcommunity rt 64512:200
 set as-path prepend 4200000099 4200000098
 set metric 20
!
route-map C1-HOST permit 10
 set local-preference 300
 set community 65000:300 65000:301
 set large-community 4200000001:300:1
!
router bgp 4200000001
 bgp router-id 10.255.0.2
 bgp log-neighbor-changes
 no bgp network import-check
 neighbor 10.0.3.1 remote-as 4200000001
 neighbor 10.0.3.1 description rr
 neighbor 10.0.3.1 timers connect 2
 !
 address-family ipv4 unicast
  network 10.30.0.0/24 route-map C1-BEST
  network 10.31.1.1/32 route-map C1-HOST
 exit-address-family
 !
 address-family ipv6 unicast
  network fd00:30::/48 route-map C1-BEST
  network fd00:31::1/128 route-map C1-HOST
  neighbor 10.0.3.1 activate
 exit-address-family
!
EOF
}

ibgp_c2_conf() {
    frr_header c2 "$1"
    cat <<'EOF'
route-map C2-OWN permit 10
 set community 65000:2
!
router bgp 4200000001
 bgp router-id 10.255.0.3
 bgp log-neighbor-changes
 no bgp network import-check
 neighbor 10.0.4.1 remote-as 4200000001
 neighbor 10.0.4.1 description rr
 neighbor 10.0.4.1 timers connect 2
 !
 address-family ipv4 unicast
  network 10.32.2.0/24 route-map C2-OWN
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor 10.0.4.1 activate
 exit-address-family
!
EOF
}

scenario_frr_ibgp() {
    local s=frr-ibgp
    local rd="$WORK/$s/rr" c1="$WORK/$s/c1" c2="$WORK/$s/c2"
    mkdir -p "$rd" "$c1" "$c2"
    mkns ib-rr
    mkns ib-c1
    mkns ib-c2
    link ib-rr eth1 02:00:00:00:03:01 ib-c1 eth0 02:00:00:00:03:02
    link ib-rr eth2 02:00:00:00:04:01 ib-c2 eth0 02:00:00:00:04:02
    addr ib-rr eth1 10.0.3.1/24 fd00:3::1/64
    addr ib-rr eth2 10.0.4.1/24 fd00:4::1/64
    addr ib-c1 eth0 10.0.3.2/24 fd00:3::2/64
    addr ib-c2 eth0 10.0.4.2/24 fd00:4::2/64
    ibgp_rr_conf "$rd" >"$rd/bgpd.conf"
    ibgp_c1_conf "$c1" >"$c1/bgpd.conf"
    ibgp_c2_conf "$c2" >"$c2/bgpd.conf"

    start_capture ib-rr any "$s"
    # rr (passive) first; each client connects when started.
    start_frr ib-rr "$rd" 10.0.3.1 10.0.4.1
    start_frr ib-c1 "$c1" 10.0.3.2
    wait_until 30 frr_has "$rd" ipv4 10.0.3.2 2 || die "$s: rr did not get c1's IPv4 routes"
    wait_until 30 frr_has "$rd" ipv6 10.0.3.2 2 || die "$s: rr did not get c1's IPv6 routes"
    start_frr ib-c2 "$c2" 10.0.4.2
    # c2 gets, with add-path: 10.30.0.0/24 x2 (c1's and rr's), 10.31.1.1/32; same for IPv6.
    wait_until 30 frr_has "$c2" ipv4 10.0.4.1 3 || die "$s: c2 did not get 3 IPv4 paths"
    wait_until 30 frr_has "$c2" ipv6 10.0.4.1 3 || die "$s: c2 did not get 3 IPv6 paths"
    wait_until 30 frr_has "$c1" ipv4 10.0.3.1 2 || die "$s: c1 did not get 2 IPv4 routes"
    sleep 3
    log "$s: c1 withdraws its best path for 10.30.0.0/24 and fd00:30::/48"
    vty "$c1" 'configure terminal' 'router bgp 4200000001' 'address-family ipv4 unicast' \
        'no network 10.30.0.0/24 route-map C1-BEST' 'exit-address-family' \
        'address-family ipv6 unicast' 'no network fd00:30::/48 route-map C1-BEST' >/dev/null
    wait_until 20 frr_has "$c2" ipv4 10.0.4.1 2 || die "$s: c2 did not see the IPv4 withdrawal"
    wait_until 20 frr_has "$c2" ipv6 10.0.4.1 2 || die "$s: c2 did not see the IPv6 withdrawal"
    sleep 2
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario as-trans: FRR with 4-octet AS 4200000002 towards an FRR that negotiates no capability
# at all (dont-capability-negotiate) and so is a 2-octet-only speaker: OPEN with My AS 23456,
# AS_PATH with AS_TRANS plus AS4_PATH, OPENs without optional parameters.
#   as4 AS 4200000002 10.0.7.1  <-- veth -->  legacy AS 64510 10.0.7.2

as_trans_as4_conf() {
    frr_header as4 "$1"
    cat <<'EOF'
route-map AT-OUT permit 10
 set as-path prepend 4200000002 4200000077 64999
 set community 64510:1
!
router bgp 4200000002
 bgp router-id 10.0.7.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.7.2 remote-as 64510
 neighbor 10.0.7.2 timers connect 2
 !
 address-family ipv4 unicast
  network 10.70.0.0/24 route-map AT-OUT
  network 10.70.1.0/24
 exit-address-family
!
EOF
}

as_trans_legacy_conf() {
    frr_header legacy "$1"
    cat <<'EOF'
bgp as-path access-list LEGACY-LOCAL seq 5 permit ^$
!
route-map LEGACY-OUT permit 10
 match as-path LEGACY-LOCAL
!
router bgp 64510
 bgp router-id 10.0.7.2
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.7.1 remote-as 4200000002
 neighbor 10.0.7.1 dont-capability-negotiate
 neighbor 10.0.7.1 passive
 !
 address-family ipv4 unicast
  network 10.71.0.0/24
  neighbor 10.0.7.1 route-map LEGACY-OUT out
 exit-address-family
!
EOF
}

scenario_as_trans() {
    local s=as-trans
    local nd="$WORK/$s/as4" od="$WORK/$s/legacy"
    mkdir -p "$nd" "$od"
    mkns at-as4
    mkns at-legacy
    link at-as4 eth0 02:00:00:00:07:01 at-legacy eth0 02:00:00:00:07:02
    addr at-as4 eth0 10.0.7.1/24
    addr at-legacy eth0 10.0.7.2/24
    as_trans_as4_conf "$nd" >"$nd/bgpd.conf"
    as_trans_legacy_conf "$od" >"$od/bgpd.conf"
    start_capture at-as4 eth0 "$s"
    start_frr at-legacy "$od" 10.0.7.2
    wait_until 10 listening at-legacy || die "$s: legacy not listening"
    start_frr at-as4 "$nd" 10.0.7.1
    wait_until 30 frr_has "$nd" ipv4 10.0.7.2 1 || die "$s: as4 did not get 1 route"
    wait_until 30 frr_has "$od" ipv4 10.0.7.1 2 || die "$s: legacy did not get 2 routes"
    sleep 3
    log "$s: shutdown"
    vty "$nd" 'configure terminal' 'router bgp 4200000002' 'neighbor 10.0.7.2 shutdown' >/dev/null
    wait_until 20 frr_not_established "$od" 10.0.7.1 || die "$s: still established"
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario bad-peer-as: BIRD (active) expects AS 64999 but FRR (passive) is AS 64501: BIRD answers
# FRR's OPEN with NOTIFICATION OPEN Message Error / Bad Peer AS, then waits its error wait time
# (>= 60 s) and FRR is passive, so exactly one connection is captured.
#   FRR AS 64501 10.0.5.1 (passive)  <-- veth -->  BIRD AS 64502 10.0.5.2

scenario_bad_peer_as() {
    local s=bad-peer-as
    local fd="$WORK/$s/frr" bd="$WORK/$s/bird"
    mkdir -p "$fd" "$bd"
    mkns bp-frr
    mkns bp-bird
    link bp-frr eth0 02:00:00:00:05:01 bp-bird eth0 02:00:00:00:05:02
    addr bp-frr eth0 10.0.5.1/24
    addr bp-bird eth0 10.0.5.2/24
    {
        frr_header frr "$fd"
        cat <<'EOF'
router bgp 64501
 bgp router-id 10.0.5.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 neighbor 10.0.5.2 remote-as 64502
 neighbor 10.0.5.2 passive
!
EOF
    } >"$fd/bgpd.conf"
    cat >"$bd/bird.conf" <<EOF
log "$bd/bird.log" all;
router id 10.0.5.2;
protocol device { }
protocol bgp frr {
  local 10.0.5.2 as 64502;
  neighbor 10.0.5.1 as 64999;
  connect delay time 1;
  ipv4 { import all; export none; };
}
EOF
    start_capture bp-frr eth0 "$s"
    start_frr bp-frr "$fd" 10.0.5.1
    wait_until 10 listening bp-frr || die "$s: FRR not listening"
    start_bird bp-bird "$bd"
    wait_until 20 grep -q 'NOTIFICATION: received from neighbor 10.0.5.2 2/2' "$fd/bgpd.log" ||
        die "$s: FRR got no Bad Peer AS"
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario hold-timer: BIRD (passive, hold time 3 s) and FRR; once Established and routes are
# exchanged, FRR's bgpd is frozen (SIGSTOP by PID; its kernel still ACKs): BIRD sends
# NOTIFICATION Hold Timer Expired. Neither reconnects (BIRD passive, bgpd frozen).
#   FRR AS 64501 10.0.6.1  <-- veth -->  BIRD AS 64502 10.0.6.2 (passive)

scenario_hold_timer() {
    local s=hold-timer
    local fd="$WORK/$s/frr" bd="$WORK/$s/bird"
    mkdir -p "$fd" "$bd"
    mkns ht-frr
    mkns ht-bird
    link ht-frr eth0 02:00:00:00:06:01 ht-bird eth0 02:00:00:00:06:02
    addr ht-frr eth0 10.0.6.1/24
    addr ht-bird eth0 10.0.6.2/24
    {
        frr_header frr "$fd"
        cat <<'EOF'
router bgp 64501
 bgp router-id 10.0.6.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.6.2 remote-as 64502
 neighbor 10.0.6.2 timers connect 2
 address-family ipv4 unicast
  network 10.6.0.0/24
 exit-address-family
!
EOF
    } >"$fd/bgpd.conf"
    cat >"$bd/bird.conf" <<EOF
log "$bd/bird.log" all;
router id 10.0.6.2;
protocol device { }
protocol static st4 { ipv4; route 10.6.1.0/24 blackhole; }
protocol bgp frr {
  local 10.0.6.2 as 64502;
  neighbor 10.0.6.1 as 64501;
  passive on;
  hold time 3;
  # BIRD treats a hold timer expiry towards a GR/LLGR-capable peer (FRR advertises both by
  # default) as a graceful restart and closes WITHOUT a NOTIFICATION; switch GR off.
  graceful restart off;
  long lived graceful restart off;
  ipv4 { import all; export where source = RTS_STATIC; };
}
EOF
    start_capture ht-frr eth0 "$s"
    start_bird ht-bird "$bd"
    wait_until 10 listening ht-bird || die "$s: bird not listening"
    start_frr ht-frr "$fd" 10.0.6.1
    local bgpd_pid=$LASTPID
    wait_until 30 frr_has "$fd" ipv4 10.0.6.2 1 || die "$s: FRR did not get BIRD's route"
    wait_until 30 bird_has "$bd" frr master4 1 || die "$s: BIRD did not get FRR's route"
    sleep 1
    log "$s: freezing FRR bgpd (SIGSTOP $bgpd_pid)"
    kill -STOP "$bgpd_pid"
    wait_until 20 bird_not_established "$bd" frr || die "$s: BIRD still established"
    stop_capture "$s"
    teardown
}

# =============================================================================================
# Scenario frr-bird-lossy: a plain IPv4 eBGP session carrying 1000 prefixes each way while
# nftables in FRR's namespace drops every second large TCP segment in both directions. tcpdump
# (FRR's side) sees BIRD's dropped segments and then their retransmissions (duplicates), and never
# sees FRR's dropped ones, only their later retransmissions (out of order): real material for
# extract.py's TCP reassembly. The BGP content is dull on purpose (1000 /32s, no policy).
#   FRR AS 64501 10.0.8.1  <-- veth -->  BIRD AS 64502 10.0.8.2 (passive)

scenario_frr_bird_lossy() {
    local s=frr-bird-lossy
    local fd="$WORK/$s/frr" bd="$WORK/$s/bird" i
    mkdir -p "$fd" "$bd"
    mkns fl-frr
    mkns fl-bird
    link fl-frr eth0 02:00:00:00:08:01 fl-bird eth0 02:00:00:00:08:02
    addr fl-frr eth0 10.0.8.1/24
    addr fl-bird eth0 10.0.8.2/24
    {
        frr_header frr "$fd"
        cat <<'EOF'
router bgp 64501
 bgp router-id 10.0.8.1
 bgp log-neighbor-changes
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.8.2 remote-as 64502
 neighbor 10.0.8.2 timers connect 2
 address-family ipv4 unicast
EOF
        for ((i = 0; i < 1000; i++)); do
            echo "  network 10.89.$((i / 250)).$((i % 250 + 1))/32"
        done
        printf ' exit-address-family\n!\n'
    } >"$fd/bgpd.conf"
    {
        cat <<EOF
log "$bd/bird.log" all;
router id 10.0.8.2;
protocol device { }
protocol static st4 {
  ipv4;
EOF
        for ((i = 0; i < 1000; i++)); do
            echo "  route 10.88.$((i / 250)).$((i % 250 + 1))/32 blackhole;"
        done
        cat <<EOF
}
protocol bgp frr {
  local 10.0.8.2 as 64502;
  neighbor 10.0.8.1 as 64501;
  passive on;
  ipv4 { import all; export where source = RTS_STATIC; };
}
EOF
    } >"$bd/bird.conf"
    in_ns fl-frr nft -f - <<'EOF'
table inet flbcap_lossy {
  chain out {
    type filter hook output priority 0; policy accept;
    tcp dport 179 ip length > 400 numgen inc mod 2 == 0 counter drop
  }
  chain in {
    type filter hook input priority 0; policy accept;
    tcp sport 179 ip length > 400 numgen inc mod 2 == 0 counter drop
  }
}
EOF
    start_capture fl-frr eth0 "$s"
    start_bird fl-bird "$bd"
    wait_until 10 listening fl-bird || die "$s: bird not listening"
    start_frr fl-frr "$fd" 10.0.8.1
    wait_until 60 frr_has "$fd" ipv4 10.0.8.2 1000 || die "$s: FRR did not get 1000 routes"
    wait_until 60 bird_has "$bd" frr master4 1000 || die "$s: BIRD did not get 1000 routes"
    sleep 2
    in_ns fl-frr nft list table inet flbcap_lossy | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' |
        paste -sd' ' | { read -r o i && log "$s: nft dropped $o outgoing, $i incoming segments"; }
    log "$s: shutdown"
    vty "$fd" 'configure terminal' 'router bgp 64501' 'neighbor 10.0.8.2 shutdown' >/dev/null
    wait_until 20 bird_not_established "$bd" frr || die "$s: BIRD still established"
    stop_capture "$s"
    teardown
}

# =============================================================================================

ALL=(frr-bird frr-gobgp frr-ibgp as-trans bad-peer-as hold-timer frr-bird-lossy)
SCEN=("$@")
((${#SCEN[@]})) || SCEN=("${ALL[@]}")
for s in "${SCEN[@]}"; do
    case $s in
    frr-bird) scenario_frr_bird ;;
    frr-gobgp) scenario_frr_gobgp ;;
    frr-ibgp) scenario_frr_ibgp ;;
    as-trans) scenario_as_trans ;;
    bad-peer-as) scenario_bad_peer_as ;;
    hold-timer) scenario_hold_timer ;;
    frr-bird-lossy) scenario_frr_bird_lossy ;;
    *) die "unknown scenario $s (known: ${ALL[*]})" ;;
    esac
done
log "done: ${SCEN[*]}"
