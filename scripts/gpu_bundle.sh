#!/usr/bin/env bash
# Packs the GPU checks' binaries (scripts/gpu_check.sh runs them) and the shared libraries they load
# beyond a CUDA machine's base system into one tar.xz, for a lent GPU machine whose image is not
# this Debian 12 (it has no Ceres, Boost, OpenMPI...): built here, run there with
#   tar -xJf BUNDLE -C DIR && LD_LIBRARY_PATH=DIR/lib MOELAB_BIN_DIR=DIR/bin bash scripts/gpu_check.sh
# The C runtime, libstdc++/libgcc (the target's are newer) and the driver's libcuda stay out;
# cuBLAS is opened at run time from the target's CUDA (device/cublas_on_demand.cc).
#   scripts/gpu_bundle.sh OUT.tar.xz [BUILD_DIR]   (default build/)
set -euo pipefail
out=$1
bin=${2:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for name in moelab device_gpu_test profiler_gpu_test executor_gpu_ops_test executor_gpu_test \
  executor_offload_same_decisions_test; do
  binary=$(find "$bin" -name "$name" -type f -perm -u+x | head -1)
  [[ -n $binary ]] || { echo "gpu_bundle: no $name under $bin" >&2; exit 1; }
  cp "$binary" "$stage/bin/"
done
for binary in "$stage"/bin/*; do ldd "$binary"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libcuda)\.so|/ld-linux' |
  while read -r library; do cp -L "$library" "$stage/lib/"; done
tar -C "$stage" -cJf "$out.tmp" bin lib
mv "$out.tmp" "$out"
echo "gpu_bundle: $(du -h "$out" | cut -f1) in $out ($(ls "$stage/lib" | wc -l) libraries)"
