#!/usr/bin/env bash
# Configures and builds moelab into BUILD_DIR (default build/). Extra arguments go to cmake.
# MOELAB_WERROR=ON (CI sets it: .ci/run) makes every warning an error (-DMOELAB_WERROR=ON); unset,
# the build dir keeps whatever it was configured with (OFF by default).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
# ccache (CMakeLists.txt uses it when installed): paths under the checkout hashed relative to it
# and no working directory in the hash, so another clone of the tree (CI's) reuses the objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
werror=()
if [ -n "${MOELAB_WERROR:-}" ]; then werror=(-DMOELAB_WERROR="$MOELAB_WERROR"); fi
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${werror[@]}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
