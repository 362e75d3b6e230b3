#!/usr/bin/env bash
# Interleaved A/B of two builds of this tree on this machine (a kernel change, say): per round,
# each build's kernels bench (ExpertFfn and the machine's DRAM read and int8 peak) and its
# `moelab run` decode and prefill with quantized experts, A then B then B then A on alternate
# rounds, so drift of a shared machine falls on both. Writes OUT/ROUND-{a,b}-{bench,run-*}.json;
# scripts/ab_builds_report.py turns them into medians and spreads. BITS: the expert formats
# measured (16 bf16, 8 q8_0, 4 q4_0), default "8 4".
#   scripts/ab-builds.sh BUILD_A BUILD_B OUT [ROUNDS [BITS]]
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/ab-builds.sh BUILD_A BUILD_B OUT [ROUNDS [BITS]]" >&2
  exit 2
fi
a=$1 b=$2 out=$3 rounds=${4:-3} bits_list=${5:-8 4}
formats=${bits_list// /|}
for build in "$a" "$b"; do
  for binary in cli/moelab bench/moelab_kernels_bench; do
    [ -x "$build/$binary" ] || { echo "ab-builds.sh: $build/$binary is missing" >&2; exit 1; }
  done
done
mkdir -p "$out"
shape=(--layers 8 --hidden 1024 --intermediate 3584 --heads 16 --kv-heads 4 --head-dim 64)
one() {  # one build's measurements for round $2, tagged $3
  local build=$1 round=$2 tag=$3
  "$build/bench/moelab_kernels_bench" \
    --benchmark_filter='DramRead|Int8Peak|ExpertFfn/(1|2|4|8|9|12|16|32|64|128|256|1024)/('"$formats"')/' \
    --benchmark_min_time=0.3 --benchmark_format=json > "$out/$round-$tag-bench.json" 2>/dev/null
  for bits in $bits_list; do
    for batch in 16 64; do
      "$build/cli/moelab" run --model mixtral-8x7b "${shape[@]}" --expert-bits "$bits" \
        --workload decode --batch "$batch" --prompt 32 --tokens 16 --seed 1 --json \
        > "$out/$round-$tag-run-decode-q$bits-b$batch.json" 2>/dev/null
    done
    "$build/cli/moelab" run --model mixtral-8x7b "${shape[@]}" --expert-bits "$bits" \
      --workload prefill --batch 1 --prompt 256 --tokens 1 --seed 1 --json \
      > "$out/$round-$tag-run-prefill-q$bits-p256.json" 2>/dev/null
  done
}
for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds" >&2
  if [ $((round % 2)) -eq 1 ]; then
    one "$a" "$round" a
    one "$b" "$round" b
  else
    one "$b" "$round" b
    one "$a" "$round" a
  fi
done
