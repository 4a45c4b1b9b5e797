#!/usr/bin/env bash
# The a74f0fa scenario through oscil-link: 100 flows over a 100 ms RTT link, tcp_wmem max
# 64 MB on the sender, read at full speed, once with the default TCP_NOTSENT_LOWAT and once
# with 2 MiB; prints the sender's memory (sum over flows of SO_MEMINFO wmem_queued, mean and
# peak; sockstat TCP memory peak) of each and the ratio, and whether the emulator held the
# link meanwhile (frames written more than 1 ms late, per direction). Each lowat gets a
# fresh link, so each link.json covers one run. Root only; a benchmark, not a test.
#   [CONGESTION=cubic] link/bench/lowat.sh RATE [SECONDS] [FLOWS]   e.g.  link/bench/lowat.sh 1gbit 20
# (CONGESTION unset: the namespace default, bbr here.)
set -euo pipefail
rate=${1:?rate, e.g. 1gbit}; secs=${2:-20}; flows=${3:-100}
[[ $(id -u) == 0 ]] || { echo "lowat.sh: needs root (network namespaces, TUN)" >&2; exit 1; }
bin=${OSCIL_BIN_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
dir=$(mktemp -d)
source "$(dirname "$0")/netns.sh"
trap 'link_down; [[ -n ${KEEP:-} ]] || rm -rf "$dir"' EXIT INT TERM
echo "== a74f0fa: $flows flows, RTT 100 ms, $rate, tcp_wmem max 64 MB, ${secs}s at full speed"
for lowat in default 2M; do
  link_up "$rate" "${ONE_WAY_US:-50000}" "$dir/link-$lowat.json"
  # The daemon's default startup limits (10 unauthenticated connections per source) refuse
  # 100 data connections opened at once over a 100 ms RTT, hence the raised limits.
  ip netns exec "$a" sysctl -qw net.ipv4.tcp_wmem="4096 16384 67108864"
  ip netns exec "$a" "$bin/oscil-daemon" --listen 10.77.0.1:5250 --insecure-no-auth \
    --max-startups 1000:30:2000 --per-source-max-startups 1000 2>"$dir/daemon-$lowat.log" &
  sleep 0.5
  ip netns exec "$b" timeout $((secs + 60)) "$bin/oscil-reader" --connect 10.77.0.1:5250 \
    --out "$dir/run-$lowat" --flows "$flows" -t "${secs}s" --quiet --json ${CONGESTION:+--congestion "$CONGESTION"} \
    $([[ $lowat == default ]] || echo --notsent-lowat "$lowat") >"$dir/$lowat.json"
  link_down
done
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
fast = {l: json.load(open(f"{d}/{l}.json"))["phases"]["fast"] for l in ("default", "2M")}
for l, f in fast.items():
    print(f"lowat {l:8} goodput {f['net_goodput_bps']/1e9:6.3f} Gbit/s; sender wmem_queued mean "
          f"{f['wmem_queued_mean_bytes']/2**20:8.1f} MiB, peak {f['wmem_queued_peak_bytes']/2**20:8.1f} MiB;"
          f" sockstat TCP peak {f['sender_tcp_mem_peak_bytes']/2**20:8.1f} MiB")
    link = json.load(open(f"{d}/link-{l}.json"))
    late = []
    for k, name in (("a_to_b", "data"), ("b_to_a", "ACKs")):
        e, n = link[k]["emulator"], link[k]["link"]["packets_in"]
        late.append(f"{name} {e['packets_late_over_1ms']} of {n} late > 1 ms"
                    f" ({100 * e['packets_late_over_1ms'] / max(n, 1):.3f}%, worst {e['max_late_us'] / 1e3:.1f} ms,"
                    f" TUN drops {e['tun_tx_dropped']})")
    c = link["cpu"]
    print(f"  emulator: {'; '.join(late)}; CPU {100 * (c['user_s'] + c['system_s']) / link['elapsed_s']:.0f}% of a core")
r = lambda k: fast["2M"][k] / fast["default"][k] if fast["default"][k] else float("nan")
print(f"ratio 2M/default: wmem_queued mean {r('wmem_queued_mean_bytes'):.3f}x, peak {r('wmem_queued_peak_bytes'):.3f}x,"
      f" goodput {r('net_goodput_bps'):.3f}x")
PY
