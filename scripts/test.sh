#!/usr/bin/env bash
# The README's second command: install what is missing, build, run every test.
#   scripts/test.sh             Release build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UBSan build in build-sanitize/
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
if [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=$root/build-sanitize
  # Without the CUDA targets (the GPU code has compute-sanitizer on a GPU: scripts/gpu_check.sh) and
  # the benchmarks (no test runs them): both only cost CI build time here.
  "$root/scripts/build.sh" -DMOELAB_SANITIZE=ON -DMOELAB_CUDA=OFF -DMOELAB_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Tests labelled `slow` (ep_validation_cli_test: validate --cases ep's whole profile -> fit ->
  # predict -> run across two ranks, minutes of timing) run in the Release suite only; the code
  # paths they drive run under the sanitizers in expert_parallel_cli_test and
  # collective_profile_cli_test.
  ctest_filter=(-LE slow)
else
  export BUILD_DIR=$root/build
  "$root/scripts/build.sh"
  ctest_filter=()
fi
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 600 "${ctest_filter[@]}"
