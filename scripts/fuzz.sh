#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang-14, ASan + UBSan) into build-fuzz/ and runs each for a
# while from its seed corpus (tests/fuzz_corpus/<target>/); fails on the first crash, sanitizer
# report, leak, timeout or out-of-memory. Findings (crash-*, leak-*, timeout-*, oom-*) are left in
# build-fuzz/findings/<target>/ to become regression tests.
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS (default 30) each
#   FUZZ_SECONDS=300 scripts/fuzz.sh profile routing_trace    chosen targets, longer
#   FUZZ_JOBS=1 scripts/fuzz.sh     one target at a time (default: nproc at once)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}
compiler=${FUZZ_CXX:-clang++-14}
# Targets run FUZZ_JOBS at a time (default: nproc): each is one single-threaded libFuzzer process
# for a fixed time, so on 2 cores two at once halve the stage's minutes and give each the same
# seconds of one core.
jobs=${FUZZ_JOBS:-$(nproc)}
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: FUZZ_JOBS=$jobs: expected a positive whole number of targets at once" >&2
  exit 1
fi
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}  # build.sh
"$root/scripts/install-deps.sh"
if ! command -v "$compiler" >/dev/null; then
  echo "fuzz.sh: $compiler not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
# MOELAB_WERROR=ON (CI sets it: .ci/run) makes every clang warning an error, as scripts/build.sh.
werror=()
if [ -n "${MOELAB_WERROR:-}" ]; then werror=(-DMOELAB_WERROR="$MOELAB_WERROR"); fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$compiler" \
  -DMOELAB_FUZZ=ON -DBUILD_TESTING=OFF -DMOELAB_CUDA=OFF "${werror[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target moelab_fuzz

source "$root/scripts/fuzz-common.sh"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${fuzz_all_targets[@]}"); fi
summary=$build/fuzz-summary.txt
: >"$summary"
# Each target once: two fuzzers of one target would share its corpus and log.
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | awk '!seen[$0]++')
fuzz_one() {
  local target=$1
  local corpus=$build/corpus/$target  # grows as the fuzzer finds new coverage; seeds are read-only
  local findings=$build/findings/$target
  mkdir -p "$corpus" "$findings"
  "$build/fuzz/fuzz_$target" "$corpus" "$root/tests/fuzz_corpus/$target" \
    -max_total_time="$seconds" "${fuzz_limits[@]}" \
    -artifact_prefix="$findings/" -print_final_stats=1 >"$build/fuzz-$target.log" 2>&1
}
declare -A pid_of
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$target" &
  pid_of[$target]=$!
done
status=0
# Reported in the targets' order, each with its own exit status.
for target in "${targets[@]}"; do
  log=$build/fuzz-$target.log
  if ! wait "${pid_of[$target]}"; then
    echo "fuzz.sh: $target: FINDING (log: $log, inputs: $build/findings/$target/)" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || echo "?")
  files=$(find "$build/corpus/$target" -type f | wc -l)
  printf '%-20s %10s executions  %6s corpus files  %ss\n' "$target" "$runs" "$files" "$seconds" | tee -a "$summary"
done
exit $status
