#!/usr/bin/env bash
# Compares two oscil-link binaries on the same link, alternating run by run (the machine's
# load moves between runs, so before/after figures only compare within one invocation).
# Root only; each run is link/bench/measure.sh with one of the binaries.
#   link/bench/ab.sh BEFORE_BIN AFTER_BIN RATE RTT [FLOWS] [ROUNDS] [SECONDS]
#   e.g.  link/bench/ab.sh /tmp/oscil-link-old target/release/oscil-link 10gbit 10ms 4 2
set -euo pipefail
before=${1:?before binary}; after=${2:?after binary}; rate=${3:?rate}; rtt=${4:?rtt}
flows=${5:-1}; rounds=${6:-2}; secs=${7:-15}
for bin in "$before" "$after"; do
  [[ -x $bin ]] || { echo "ab.sh: $bin is not an executable" >&2; exit 2; }
done
for round in $(seq "$rounds"); do
  for side in before after; do
    bin=$before; [[ $side == after ]] && bin=$after
    echo "### round $round $side ($bin), load $(cut -d' ' -f1-3 /proc/loadavg)"
    OSCIL_LINK=$bin timeout $((secs + 120)) "$(dirname "$0")/measure.sh" "$rate" "$rtt" "$secs" cubic "$flows" \
      | grep -E "idle ping|under load|wire-equiv|a_to_b|b_to_a|emulator CPU|iperf3 CPU" \
      || echo "ab.sh: measure.sh failed"
  done
done
