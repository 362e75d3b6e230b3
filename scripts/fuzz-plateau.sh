#!/usr/bin/env bash
# How long each fuzz target's coverage keeps growing, to choose scripts/fuzz.sh's time per target
# (results/fuzz.md, "Time per target"). Each target runs from its seeds alone (an empty grown
# corpus, as CI starts) for SECONDS with scripts/fuzz.sh's limits; the time of its last new edge
# coverage (libFuzzer's `cov:`) is printed beside the coverage after the seeds and at the end, with
# the executions run by then: on a loaded machine the seconds stretch, the executions do not, so
# executions / (executions per second on the CI machine) is the time CI needs.
#   scripts/fuzz-plateau.sh 120                      every target, 120 s each
#   scripts/fuzz-plateau.sh 120 profile int_list     chosen targets
# Needs the fuzz build (scripts/fuzz.sh builds it into build-fuzz/, or FUZZ_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:?usage: fuzz-plateau.sh SECONDS [TARGET...]}
shift
source "$root/scripts/fuzz-common.sh"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${fuzz_all_targets[@]}"); fi
printf '%-20s %9s %9s %16s %19s %12s\n' target seeds_cov final_cov last_new_cov_s last_new_cov_execs \
  executions
for target in "${targets[@]}"; do
  binary=$build/fuzz/fuzz_$target
  if [ ! -x "$binary" ]; then
    echo "fuzz-plateau.sh: $binary not built (run scripts/fuzz.sh first)" >&2
    exit 1
  fi
  corpus=$(mktemp -d)
  findings=$(mktemp -d)
  start_us=${EPOCHREALTIME/./}
  seeds_cov=0 last_cov=0 last_us=0 last_executions=0 executions=0
  while IFS= read -r line; do
    if [[ $line =~ ^#([0-9]+).*cov:\ ([0-9]+) ]]; then
      executions=${BASH_REMATCH[1]}
      cov=${BASH_REMATCH[2]}
      if [[ $line == *INITED* ]]; then seeds_cov=$cov; fi
      if ((cov > last_cov)); then
        last_cov=$cov
        last_us=$((${EPOCHREALTIME/./} - start_us))
        last_executions=$executions
      fi
    fi
  done < <("$binary" "$corpus" "$root/tests/fuzz_corpus/$target" -max_total_time="$seconds" \
    "${fuzz_limits[@]}" -artifact_prefix="$findings/" 2>&1 || true)
  printf '%-20s %9d %9d %16.1f %19d %12d\n' "$target" "$seeds_cov" "$last_cov" \
    "$(awk -v us="$last_us" 'BEGIN { print us / 1e6 }')" "$last_executions" "$executions"
  if [ -n "$(ls -A "$findings")" ]; then
    echo "fuzz-plateau.sh: $target: FINDING kept in $findings" >&2
  else
    rm -rf "$findings"
  fi
  rm -rf "$corpus"
done
