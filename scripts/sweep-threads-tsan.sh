#!/usr/bin/env bash
# `moelab sweep --threads` under ThreadSanitizer: every sweepable command's spec in
# tests/data/sweep_specs/ run on 4 threads by a ThreadSanitizer build, which must report no race,
# and its rows compared with the Release build's on one thread (provenance aside).
# Usage: scripts/sweep-threads-tsan.sh   (configures and builds build-tsan/ the first time: about
#        30 minutes on 2 cores; then seconds)
#   BUILD_DIR=dir        the Release build (default build/)
#   TSAN_BUILD_DIR=dir   the ThreadSanitizer build (default build-tsan/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
release=${BUILD_DIR:-$root/build}/cli/moelab
[ -x "$release" ] || { echo "sweep-threads-tsan: no $release (build the moelab target)" >&2; exit 1; }
tsan_dir=${TSAN_BUILD_DIR:-$root/build-tsan}
if [ ! -f "$tsan_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$tsan_dir" -DCMAKE_BUILD_TYPE=Release -DMOELAB_CUDA=OFF -DMOELAB_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -g -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread"
fi
cmake --build "$tsan_dir" --target moelab -j"$(nproc)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TSAN_OPTIONS="halt_on_error=1"
failed=0
for spec in tests/data/sweep_specs/*.json; do
  [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("schema", ""))' "$spec")" = \
    moelab.sweep_spec/1 ] || continue
  name=$(basename "$spec" .json)
  if ! "$tsan_dir/cli/moelab" sweep "$spec" --threads 4 --out "$work/$name.tsan.json" \
       2> "$work/$name.err"; then
    echo "$name: FAILED"; sed -n 1,30p "$work/$name.err"; failed=1; continue
  fi
  if ! "$release" sweep "$spec" --threads 1 --out "$work/$name.one.json"; then
    echo "$name: FAILED in the Release build"; failed=1; continue
  fi
  if python3 - "$work/$name.tsan.json" "$work/$name.one.json" <<'PY'
import sys
a, b = (open(p).read() for p in sys.argv[1:3])
marks = [s.find('"provenance": {') for s in (a, b)]
sys.exit(0 if min(marks) >= 0 and a[:marks[0]] == b[:marks[1]] else 1)
PY
  then echo "$name: no race on 4 threads, rows as one thread's"
  else echo "$name: rows differ from one thread's"; failed=1; fi
done
exit $failed
