#!/usr/bin/env bash
# Times oscil-report on a synthetic run of 200 flows over 60 s at 100 ms (120,000 rows per
# side), written by the synth_run example. Prints seconds of wall time per report.
# Usage: analysis/bench/report-200-flows.sh [FLOWS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
flows=${1:-200}
seconds=${2:-60}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p oscil-report --bin oscil-report --example synth_run
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$target/release/examples/synth_run" "$scratch/run" "$flows" "$seconds"
rows=$(($(wc -l <"$scratch/run/sender.csv") - 1))
echo "synthetic run: $flows flows, $seconds s, $rows sender rows, $(du -sh "$scratch/run" | cut -f1)"
for attempt in 1 2 3; do
  start=$(date +%s.%N)
  "$target/release/oscil-report" "$scratch/run" --out "$scratch/out" --force >/dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" -v n="$attempt" 'BEGIN { printf "report %d: %.2f s\n", n, b - a }'
done
