# Sourced by the link benchmarks: two namespaces $a and $b joined by oscil-link.
#   link_up RATE ONE_WAY_US STATS_FILE [more oscil-link flags]   then   link_down
# Needs root; sets $a, $b, $p (the scratch namespace they are made from; unique by PID)
# and $link_pid; A is 10.77.0.1, B is 10.77.0.2.
# LINK_CPUS=LIST runs oscil-link under `taskset -c LIST`; LINK_RPS=MASK steers the receive
# processing of the packets it writes into each TUN to the CPUs of MASK (RPS, rx-0/rps_cpus),
# off the emulator's threads (issue 21).
a=olbA$$ b=olbB$$ p=olbP$$ link_pid=
link_bin=${OSCIL_LINK:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/oscil-link}

link_up() {
  local rate=$1 delay_us=$2 stats=$3; shift 3
  local n
  # Each namespace gets an established-socket hash table of its own, as the lab makes them
  # (lab/src/backend/netns.rs): the samplers' namespace walks then cost ~0.1 ms, not 1.2-2.6 ms.
  ip netns add "$p"; ip netns exec "$p" sysctl -qw net.ipv4.tcp_child_ehash_entries=16384 || true
  for n in "$a" "$b"; do
    nsenter --net="/run/netns/$p" ip netns add "$n"; ip -n "$n" link set lo up
    ip -n "$n" tuntap add dev osl0 mode tun vnet_hdr
    ip -n "$n" link set osl0 up txqueuelen 10000
    ip netns exec "$n" sysctl -qw net.ipv4.tcp_rmem="8192 262144 536870912" \
      net.ipv4.tcp_wmem="4096 16384 536870912"
  done
  ip netns del "$p"
  if [[ -n ${LINK_RPS:-} ]]; then
    for n in "$a" "$b"; do
      ip netns exec "$n" sh -c "echo $LINK_RPS > /sys/class/net/osl0/queues/rx-0/rps_cpus"
    done
  fi
  ip -n "$a" addr add 10.77.0.1/24 dev osl0; ip -n "$b" addr add 10.77.0.2/24 dev osl0
  ${LINK_CPUS:+taskset -c "$LINK_CPUS"} "$link_bin" --a-netns "$a" --b-netns "$b" --a-dev osl0 --b-dev osl0 --rate "$rate" \
    --delay "${delay_us}us" --stats "$stats" "$@" &
  link_pid=$!
  sleep 0.5
}

# Ends the link and every process left in the namespaces, then removes them.
link_down() {
  [[ -n $link_pid ]] && kill "$link_pid" 2>/dev/null && wait "$link_pid" 2>/dev/null
  link_pid=
  local n
  for n in "$a" "$b"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  ip netns del "$p" 2>/dev/null || true
}
