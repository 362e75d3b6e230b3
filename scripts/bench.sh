#!/usr/bin/env bash
# Runs the kernel benchmarks and the end-to-end `moelab run` on the issue's shape (16 layers, hidden
# 1024, 8 experts of width 3584, top-2) for every expert format (bf16, q8_0, q4_0), and writes
# results/kernels-cpu-<isa>.md (+ .json, the raw runs): every speed as a ratio against this
# machine's limits measured in the same run (DRAM read bandwidth; the compute peak of the active
# path: AVX512-BF16 dot where the CPU has it, else the fp32 FMA peak).
# Usage: scripts/bench.sh [repetitions]   (default 5; run on a quiet machine)
#   BUILD_DIR=dir          build folder (default build/)
#   BENCH_SKIP_BUILD=1     use the binaries already in BUILD_DIR (no install-deps, no build)
#   BENCH_OUT=dir          where the report goes (default results/)
#   MOELAB_ISA=avx2|...    forces a kernel path (kernels/cpu_features.h)
# Repetitions are interleaved: Google Benchmark shuffles the kernel benchmarks and their limits
# (this VM's DRAM bandwidth drifts by tens of percent), and the end-to-end runs go round by round
# over formats and workloads. Medians with min-max are reported.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repetitions=${1:-5}
build_dir=${BUILD_DIR:-$root/build}
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  "$root/scripts/install-deps.sh"
  BUILD_DIR="$build_dir" "$root/scripts/build.sh" >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

"$build_dir/bench/moelab_kernels_bench" \
  --benchmark_filter='DramRead|Bf16Peak|Fp32Peak|Int8Peak|ExpertFfn/(1|2|4|8|16|256)/|DecodeStep' \
  --benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true \
  --benchmark_format=json --benchmark_out="$work/kernels.json" --benchmark_out_format=json >/dev/null

shape=(--layers 16 --hidden 1024 --intermediate 3584 --experts 8 --top-k 2 --heads 16 --kv-heads 4 --vocab 32000)
for round in $(seq "$repetitions"); do
  for bits in 16 8 4; do
    for workload in "decode --tokens 64" "prefill --prompt 256"; do
      # shellcheck disable=SC2086  # the workload's flags are split on purpose
      "$build_dir/cli/moelab" run "${shape[@]}" --expert-bits "$bits" --workload $workload --json >"$work/run.json"
      python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["round"] = int(sys.argv[2]); print(json.dumps(r))' \
        "$work/run.json" "$round" >>"$work/end_to_end.jsonl"
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

isa=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["machine"]["isa"])' "$work/end_to_end.jsonl")
out="${BENCH_OUT:-$root/results}/kernels-cpu-$isa"
python3 "$root/scripts/bench_report.py" "$work/kernels.json" "$work/end_to_end.jsonl" "$repetitions" \
  "$load_before" "$load_after" >"$work/report.md"
python3 -c 'import json, sys; print(json.dumps({"kernels": json.load(open(sys.argv[1])),
  "end_to_end": [json.loads(l) for l in open(sys.argv[2])]}, indent=1))' \
  "$work/kernels.json" "$work/end_to_end.jsonl" >"$work/runs.json"
# Both written beside the results, then renamed: no partial result file.
cp "$work/report.md" "$out.md.tmp" && mv "$out.md.tmp" "$out.md"
cp "$work/runs.json" "$out.json.tmp" && mv "$out.json.tmp" "$out.json"
cat "$out.md"
