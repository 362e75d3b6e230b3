#!/usr/bin/env bash
# Runs two builds of moelab_sim_bench interleaved on one core and summarises them, so a speed-up
# of the offload simulator is measured against its baseline in the same session on the same
# machine (results/sim-bench.md). The JSON of every run is kept in OUT_DIR.
#   scripts/sim-bench-compare.sh BASELINE_BENCH NEW_BENCH OUT_DIR [ROUNDS (3)] [FILTER (SimOffload)]
# Each round runs every case on both builds back to back, 3 repetitions each, pinned to the last
# core; the build that goes first alternates round by round. This machine has slow stretches of a
# minute or more (1.4x): a round of all cases on one build, then all on the other, put whole
# sides in them. The table (OUT_DIR/summary.md) gives per case the median CPU time per run over
# all repetitions of all rounds, the spread (min-max), the speed-up of the medians and the median
# of the rounds' paired speed-ups (each round's two medians, taken a few seconds apart), and
# expert events per second at the median.
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
# A folder of an earlier comparison would mix its runs into this one's medians.
if compgen -G "$out/baseline-*.json" >/dev/null || compgen -G "$out/new-*.json" >/dev/null; then
  echo "$0: $out already holds a comparison's runs; give an empty or new folder" >&2
  exit 1
fi
# The cases both builds have (a case one of them lacks would leave an empty run file).
cases=$(comm -12 <("$baseline" --benchmark_filter="$filter" --benchmark_list_tests | sort) \
                 <("$new" --benchmark_filter="$filter" --benchmark_list_tests | sort) |
        grep -Fxf - <("$new" --benchmark_filter="$filter" --benchmark_list_tests) || true)
[ -n "$cases" ] || { echo "$0: no case matches '$filter' in both builds" >&2; exit 1; }
for round in $(seq "$rounds"); do
  sides="baseline new"
  [ $((round % 2)) -eq 0 ] && sides="new baseline"
  echo "round $round ($sides)" >&2
  number=0
  for name in $cases; do
    number=$((number + 1))
    for side in $sides; do
      bench=$baseline
      [ "$side" = new ] && bench=$new
      file="$out/$side-$round-$number.json"
      taskset -c "$core" "$bench" --benchmark_filter="^$name\$" --benchmark_repetitions=3 \
        --benchmark_out="$file.tmp" --benchmark_out_format=json >/dev/null
      mv "$file.tmp" "$file"
    done
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/sim-bench-summary.py" "$out" > "$out/summary.md.tmp"
mv "$out/summary.md.tmp" "$out/summary.md"
cat "$out/summary.md"
