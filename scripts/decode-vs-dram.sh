#!/usr/bin/env bash
# Decode at batch 1 against the DRAM bound for every expert format (issue 42's AVX2 quantized
# decode): moelab_kernels_bench's DecodeByFormat/B/L (the default model, experts bf16 / q8_0 /
# q4_0; 8 layers, and issue 11's 16) interleaved with DramRead in one process per layer count,
# REPETITIONS repetitions of each in random order (Google Benchmark's random interleaving), so the
# probe and the decode share the machine's state. Prints the table (decode_vs_dram_report.py).
# Usage: scripts/decode-vs-dram.sh [repetitions]   (default 9; on an idle machine for a record)
#   scripts/record.sh results/decode-vs-dram-avx2-DATE bash scripts/decode-vs-dram.sh 9
#   BENCH=path       the benchmark binary (default build/bench/moelab_kernels_bench)
#   MOELAB_ISA=...   forces a kernel path (kernels/cpu_features.h)
# Writes decode-8-layers.json and decode-16-layers.json (the raw runs) into $RECORD when run
# through scripts/record.sh, else into a temporary folder that is removed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repetitions=${1:-9}
case "$repetitions" in
  '' | *[!0-9]* | 0) echo "decode-vs-dram.sh: repetitions must be a positive integer, got '$repetitions'" >&2; exit 1 ;;
esac
bench=${BENCH:-$root/build/bench/moelab_kernels_bench}
if [ -n "${RECORD:-}" ]; then
  out=$RECORD
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
for layers in 8 16; do
  # Written beside, then renamed: a failed run leaves no partial JSON.
  "$bench" --benchmark_filter="^(DramRead|DecodeByFormat/[0-9]+/$layers/)" \
    --benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out/decode-$layers-layers.json.tmp" --benchmark_out_format=json >/dev/null
  mv "$out/decode-$layers-layers.json.tmp" "$out/decode-$layers-layers.json"
done
python3 "$root/scripts/decode_vs_dram_report.py" "$out/decode-8-layers.json" "$out/decode-16-layers.json"
