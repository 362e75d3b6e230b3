#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang-14, ASan + UBSan) into build-fuzz/ and runs each for a
# while from its seed corpus (tests/fuzz_corpus/<target>/); fails on the first crash, sanitizer
# report, leak, timeout or out-of-memory. Findings (crash-*, leak-*, timeout-*, oom-*) are left in
# build-fuzz/findings/<target>/ to become regression tests.
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS (default 30) each
#   FUZZ_SECONDS=300 scripts/fuzz.sh profile routing_trace    chosen targets, longer
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}
compiler=${FUZZ_CXX:-clang++-14}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}  # build.sh
"$root/scripts/install-deps.sh"
if ! command -v "$compiler" >/dev/null; then
  echo "fuzz.sh: $compiler not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$compiler" \
  -DMOELAB_FUZZ=ON -DBUILD_TESTING=OFF -DMOELAB_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target moelab_fuzz

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(hf_config model_file hardware_file profile fit_file sd_measurements routing_trace popularity
           safetensors_header safetensors_index int_list byte_size)
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
summary=$build/fuzz-summary.txt
: >"$summary"
status=0
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target        # grows as the fuzzer finds new coverage; seeds are read-only
  findings=$build/findings/$target
  mkdir -p "$corpus" "$findings"
  log=$build/fuzz-$target.log
  # -rss_limit_mb / -malloc_limit_mb: a parser asking for more than 2 GB on any input is a finding.
  if ! "$build/fuzz/fuzz_$target" "$corpus" "$root/tests/fuzz_corpus/$target" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz.sh: $target: FINDING (log: $log, inputs: $findings/)" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || echo "?")
  files=$(find "$corpus" -type f | wc -l)
  printf '%-20s %10s executions  %6s corpus files  %ss\n' "$target" "$runs" "$files" "$seconds" | tee -a "$summary"
done
exit $status
