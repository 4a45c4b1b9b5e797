#!/usr/bin/env bash
# The oscil pair through oscil-link, alternating with and without --zerocopy: goodput, the
# daemon's CPU per GB and the sender's memory. Root only; a benchmark, not a test.
#   link/bench/zerocopy.sh RATE RTT_MS [FLOWS] [SECONDS] [ROUNDS]   e.g.  link/bench/zerocopy.sh 5gbit 10 4 10 2
set -euo pipefail
rate=${1:?rate, e.g. 5gbit}; rtt_ms=${2:?RTT in ms}; flows=${3:-4}; secs=${4:-10}; rounds=${5:-2}
[[ $(id -u) == 0 ]] || { echo "zerocopy.sh: needs root (network namespaces, TUN)" >&2; exit 1; }
bin=${OSCIL_BIN_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
dir=$(mktemp -d)
source "$(dirname "$0")/netns.sh"
trap 'link_down; rm -rf "$dir"' EXIT INT TERM
link_up "$rate" $((rtt_ms * 500)) "$dir/link.json"
ip netns exec "$a" "$bin/oscil-daemon" --listen 10.77.0.1:5250 --insecure-no-auth 2>"$dir/daemon.log" &
sleep 0.5
daemon=$(ip netns pids "$a" | head -1)
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$daemon/stat"; }
echo "== oscil pair through oscil-link: $rate, RTT ${rtt_ms} ms, $flows cubic flow(s) of ${secs}s"
for round in $(seq "$rounds"); do
  for zc in off on; do
    before=$(cpu_s)
    ip netns exec "$b" timeout $((secs + 30)) "$bin/oscil-reader" --connect 10.77.0.1:5250 \
      --out "$dir/run" --force --flows "$flows" -t "${secs}s" --congestion cubic --quiet --json \
      $([[ $zc == on ]] && echo --zerocopy) >"$dir/summary.json"
    python3 - "$dir/summary.json" "$round" "$zc" "$before" "$(cpu_s)" <<'PY'
import json, sys
fast = json.load(open(sys.argv[1]))["phases"]["fast"]
cpu = float(sys.argv[5]) - float(sys.argv[4])
print(f"round {sys.argv[2]} zerocopy {sys.argv[3]:3}: {fast['read_bps'] / 1e9:.2f} Gbit/s, daemon CPU "
      f"{cpu:.2f} s = {cpu / (fast['bytes_read'] / 1e9):.3f} s/GB, wmem_queued mean "
      f"{fast['wmem_queued_mean_bytes'] / 2**20:.1f} MiB")
PY
  done
done
