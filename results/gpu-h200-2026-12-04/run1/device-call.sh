#!/usr/bin/env bash
# Device call: unpack the bundle, run scripts/gpu_check.sh, pack its outputs into $OUT.
set -uo pipefail
mkdir -p /tmp/b /tmp/check && tar -xJf .gpu/bundle.tar.xz -C /tmp/b
export LD_LIBRARY_PATH=/tmp/b/lib MOELAB_BIN_DIR=/tmp/b/bin OUT_DIR=/tmp/check
/tmp/b/bin/moelab --version
ldconfig -p | grep -m3 cublas
timeout "${CHECK_TIMEOUT_S:-470}" bash scripts/gpu_check.sh 2>&1 | tee /tmp/check/log.txt
echo "gpu_check exit ${PIPESTATUS[0]}"
tar -czf "$OUT/check.tgz" -C /tmp check
