#!/usr/bin/env bash
# Issue 21's side-by-side table of the link emulator: for each cell, link/bench/measure.sh
# (ping idle and under load, iperf3 cubic flows), then one table of late share, worst
# lateness, idle and loaded RTT and delivered rate. Root only; needs iperf3, ping, python3.
#   link/bench/table.sh [SECONDS]        (default 15 s per cell; about 25 s per cell in all)
# CELLS="RATE RTT FLOWS;..." replaces the default cells; OSCIL_LINK / OSCIL_LINK_ARGS as for
# measure.sh (e.g. OSCIL_LINK_ARGS=--no-realtime).
set -euo pipefail
secs=${1:-15}
here=$(cd "$(dirname "$0")" && pwd)
cells=${CELLS:-"1gbit 466ms 1;1gbit 466ms 4;5gbit 100ms 8;5gbit 100ms 100;10gbit 10ms 4"}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "# $(date -u +%FT%TZ), $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
IFS=';' read -ra list <<<"$cells"
for cell in "${list[@]}"; do
  read -r rate rtt flows <<<"$cell"
  MEASURE_JSON=$rows timeout $((secs + 120)) "$here/measure.sh" "$rate" "$rtt" "$secs" cubic "$flows" \
    >"$rows.$flows.$rate.$rtt.log" 2>&1 || echo "== $rate $rtt $flows flows: measure.sh failed or timed out (log $rows.$flows.$rate.$rtt.log)"
done
python3 - "$rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = lambda v, fmt: "-" if v is None else format(v, fmt)
print("| rate | RTT | flows | late > 1 ms | worst late | idle RTT (ping) | loaded RTT (ping / srtt mean) | delivered | TUN drops | emulator CPU | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    idle = r["idle_rtt_ms"]
    err = "" if idle is None else f" ({100 * (idle - r['rtt_ms']) / r['rtt_ms']:+.2f}%)"
    print(f"| {r['rate']} | {r['rtt_ms']:.0f} ms | {r['flows']} | {r['late']} of {r['frames']} ({r['late_pct']:.3f}%) "
          f"| {r['worst_late_ms']:.1f} ms | {f(idle, '.3f')} ms{err} | {f(r['loaded_rtt_ms'], '.1f')} / {r['srtt_mean_ms']:.1f} ms "
          f"| {r['delivered_pct']:.1f}% | {r['tun_tx_dropped']} | {r['emulator_cpu_pct']:.0f}% | {r['load']} |")
PY
