#!/usr/bin/env bash
# Device call 2: the GPU tests again (the quantized matmul changed), the quantized runs, then
# moelab validate --device gpu --quick; outputs packed into $OUT.
set -uo pipefail
mkdir -p /tmp/b /tmp/check && tar -xJf .gpu/bundle.tar.xz -C /tmp/b
export LD_LIBRARY_PATH=/tmp/b/lib MOELAB_PRESETS=$PWD/presets
bin=/tmp/b/bin out=/tmp/check
$bin/moelab --version | tee $out/version.txt
for t in executor_gpu_ops_test executor_gpu_test; do
  echo "== $t"; $bin/$t > $out/$t.log 2>&1; grep -E "^\[  PASSED|^\[  FAILED|Failure" -A3 $out/$t.log | head -20
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $bin/executor_gpu_ops_test > $out/memcheck.log 2>&1; grep -E "ERROR SUMMARY|PASSED|FAILED" $out/memcheck.log
run() { local name=$1; shift; timeout 120 $bin/moelab run "$@" --json --out $out/$name.json 2> $out/$name.err || echo "run $name failed: $(tail -1 $out/$name.err)"; }
echo "$(date +%T) quantized runs"
for bits in 16 8 4; do
  run "q$bits-decode-b1" --device gpu --expert-bits $bits --batch 1 --prompt 32 --tokens 64
  run "q$bits-decode-b16" --device gpu --expert-bits $bits --batch 16 --prompt 32 --tokens 64
  run "q$bits-prefill-256" --device gpu --expert-bits $bits --workload prefill --prompt 256 --tokens 1
done
run "wide-q4-decode-b1" --device gpu --expert-bits 4 --layers 8 --hidden 4096 --intermediate 14336 --heads 32 --kv-heads 8 --head-dim 128 --batch 1 --prompt 32 --tokens 64
echo "$(date +%T) validate"
timeout ${VALIDATE_TIMEOUT_S:-280} $bin/moelab validate --device gpu --quick --out $out/validate-gpu > $out/validate-gpu.txt 2> $out/validate-gpu.err; echo "validate exit $?"
tail -40 $out/validate-gpu.txt; tail -3 $out/validate-gpu.err
python3 - $out <<'PY'
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = json.load(open(p)); t = r.get("operator_times_s", {})
    print(os.path.basename(p), "ttft", r.get("ttft_s"), "tpot", r.get("tpot_s"), "bw", r.get("decode_weight_bandwidth_bytes_per_s"), "experts", t.get("experts"))
PY
echo "$(date +%T) done"
