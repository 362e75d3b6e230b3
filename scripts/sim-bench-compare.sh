#!/usr/bin/env bash
# Runs two builds of moelab_sim_bench interleaved on one core and summarises them, so a speed-up
# of the offload simulator is measured against its baseline in the same session on the same
# machine (results/sim-bench.md). The JSON of every run is kept in OUT_DIR.
#   scripts/sim-bench-compare.sh BASELINE_BENCH NEW_BENCH OUT_DIR [ROUNDS (3)] [FILTER (SimOffload)]
# Each round runs the baseline then the new build, 3 repetitions each, pinned to the last core.
# The table (OUT_DIR/summary.md) gives per case the median CPU time per run over all repetitions
# of all rounds, the spread (min-max), and expert events per second at the median.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BASELINE_BENCH NEW_BENCH OUT_DIR [ROUNDS] [FILTER]" >&2
  exit 1
fi
baseline=$1 new=$2 out=$3 rounds=${4:-3} filter=${5:-SimOffload}
for bench in "$baseline" "$new"; do
  [ -x "$bench" ] || { echo "$0: $bench is not an executable" >&2; exit 1; }
done
core=$(($(nproc) - 1))
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for side in baseline new; do
    bench=$baseline
    [ "$side" = new ] && bench=$new
    echo "round $round: $side" >&2
    taskset -c "$core" "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_out="$out/$side-$round.json.tmp" --benchmark_out_format=json >/dev/null
    mv "$out/$side-$round.json.tmp" "$out/$side-$round.json"
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/sim-bench-summary.py" "$out" > "$out/summary.md.tmp"
mv "$out/summary.md.tmp" "$out/summary.md"
cat "$out/summary.md"
