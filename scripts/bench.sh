#!/usr/bin/env bash
# Runs the kernel and executor benchmarks and writes results/kernels-cpu.md: every speed as a ratio
# against this machine's own limits (DRAM read bandwidth, AVX512-BF16 peak) measured in the same
# run. Usage: scripts/bench.sh [repetitions]   (run on a quiet machine; medians are reported)
# Repetitions of all benchmarks are interleaved (Google Benchmark shuffles them), so the limits are sampled
# across the same minutes as the kernels (this VM's DRAM bandwidth drifts by tens of percent).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repetitions=${1:-5}
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null
json=$(mktemp)
"$root/build/bench/moelab_kernels_bench" --benchmark_repetitions="$repetitions" \
  --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_out="$json" \
  --benchmark_out_format=json >/dev/null
python3 "$root/scripts/bench_report.py" "$json" "$repetitions" > "$root/results/kernels-cpu.md.tmp"
mv "$root/results/kernels-cpu.md.tmp" "$root/results/kernels-cpu.md"
cp "$json" "$root/results/kernels-cpu.json"
rm -f "$json"
cat "$root/results/kernels-cpu.md"
