# Why netem's queue and oscil-link's differ (issue 32, link/README.md): the lab's netem
# link (veth, netem delay + rate + limit on each side's egress, as lab/src/backend/netns.rs sets it)
# built by hand twice, with the sender's veth making GSO skbs (as the lab's does) and with
# gso_max_segs 1 (one segment per skb, as a router's queue holds packets), and the seed's
# F3 session over each: 16 KiB per-wake writes, lowat default, time-scaled as
# scripts/guest/side-by-side.sh (SCALE 5: 2 Mbit/s, 100 ms, limit 50 + 9 in the delay line).
#
#   scripts/kernel-matrix --kernels 6.1 --suite scripts/guest/queue-units.sh --smp 2
# About 2 min in a guest; compare run/sender.csv rtt_us and run/markers.csv latency_us.

with_libs
# iproute2's, not busybox's applets (the suite's sh runs an applet for a bare name).
IP=/bin/ip TC=/bin/tc
need inet_diag tcp_diag sch_netem veth
# `ip netns exec` execs the daemon: $! is its PID.
daemon_ns() {
    $IP netns exec qs oscil-daemon --listen 10.9.0.1 --key-file "$KEY" --congestion cubic \
        > "$OUT/daemon-$1.log" 2>&1 &
    DPID=$!
    i=0
    until $IP netns exec qs grep -q ':1482 00000000:0000 0A' /proc/net/tcp; do
        i=$((i + 1)); [ $i -lt 200 ] || return 1; sleep 0.1
    done
}
pair() {
    $IP netns del qs 2>/dev/null; $IP netns del qr 2>/dev/null
    $IP netns add qs; $IP netns add qr
    $IP link add oslv gso_max_segs "$1" netns qs type veth peer name oslv netns qr
    for ns in qs qr; do
        $IP -n $ns link set lo up; $IP -n $ns link set oslv up
        $TC -n $ns qdisc replace dev oslv root netem delay 50ms rate 2000kbit limit 59
    done
    $IP -n qs addr add 10.9.0.1/24 dev oslv; $IP -n qr addr add 10.9.0.2/24 dev oslv
}
session_ns() {
    $IP netns exec qr oscil-reader --connect 10.9.0.1 --key-file "$KEY" --out "$STEP/run" --quiet \
        --json --time 40s --write-size 16k --write-mode per-wake --congestion cubic \
        --marker-every 5s
}
for segs in 65535 1; do
    pair $segs
    daemon_ns $segs
    step "netem-gso-max-segs-$segs" session_ns
    $TC -n qs -s qdisc show dev oslv > "$OUT/netem-gso-max-segs-$segs/qdisc.txt"
    kill -INT "$DPID"; wait "$DPID"
done
$IP netns del qs; $IP netns del qr
