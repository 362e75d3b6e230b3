#!/usr/bin/env bash
# The GPU checks in one call, for a machine with an NVIDIA GPU: the gpu-labelled tests, then
# `moelab run --device gpu` on the default shape (decode at batch 1/4/16, prefill 256, SD, beam;
# three interleaved rounds) and on Mixtral-8x7B's full width with 8 layers (23 GB of bf16 weights),
# with the device's copy bandwidth probed in the same run (PyTorch, when python3 has it).
#   MOELAB_BIN_DIR  folder holding moelab and the test binaries (default build/, flat or as built)
#   OUT_DIR         where the logs and JSON go (default results/gpu-check)
#   PARTS           any of tests, validate, timing, offload, sweep, wide, quantized (default
#                   "tests timing offload sweep wide quantized"); validate runs `moelab validate
#                   --device gpu --quick` (its files in OUT_DIR/validate-gpu); timing: the default
#                   shape in memory; offload: host -> GPU offloading; sweep: SD at batch x gamma;
#                   wide: Mixtral-8x7B's width; quantized: --expert-bits 8 and 4 (both shapes)
#   ROUNDS          interleaved rounds of the timing and offload runs (default 3)
#   MEMCHECK        0 skips the compute-sanitizer pass over executor_gpu_test (default 1)
set -uo pipefail
parts=${PARTS:-tests timing offload sweep wide quantized}
rounds=${ROUNDS:-3}
bin=${MOELAB_BIN_DIR:-build}
out=${OUT_DIR:-results/gpu-check}
mkdir -p "$out"
find_binary() {
  if [[ -x "$bin/$1" ]]; then echo "$bin/$1"; else find "$bin" -name "$1" -type f -perm -u+x | head -1; fi
}
moelab=$(find_binary moelab)
export MOELAB_PRESETS=${MOELAB_PRESETS:-$PWD/presets}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.csv"
"$moelab" devices --json > "$out/devices.json" || echo "moelab devices failed"

status=0
if [[ $parts == *tests* ]]; then
for t in device_gpu_test profiler_gpu_test executor_gpu_ops_test executor_gpu_test executor_offload_same_decisions_test; do
  echo "== $t"
  "$(find_binary $t)" > "$out/$t.log" 2>&1 || status=1
  grep -E "^\[  PASSED  \]|^\[  FAILED  \]|^\[==========\]|SKIPPED \] [0-9]" "$out/$t.log"
  grep -B2 -A8 "Failure" "$out/$t.log" | head -60
done
# The backend's kernels under compute-sanitizer (out-of-bounds and misaligned accesses), where the
# toolkit has it.
if [[ ${MEMCHECK:-1} != 0 ]] && command -v compute-sanitizer > /dev/null; then
  echo "== compute-sanitizer memcheck: executor_gpu_test"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$(find_binary executor_gpu_test)" --gtest_filter='Tiny/*:GpuTransformer.LongPrompt*:GpuTransformer.Beam*:GpuOffload.Copied*:GpuOffload.Fiddler*' \
    > "$out/memcheck.log" 2>&1 || { status=1; echo "memcheck failed (exit $?)"; }
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$(find_binary executor_gpu_ops_test)" >> "$out/memcheck.log" 2>&1 ||
    { status=1; echo "memcheck of the ops failed (exit $?)"; }
  grep -E "ERROR SUMMARY|^\[  PASSED  \]|^\[  FAILED  \]" "$out/memcheck.log"
  grep -m5 -A12 "Invalid\|Misaligned" "$out/memcheck.log"
fi

fi
echo "$(date +%T) tests done"
if [[ $parts == *validate* ]]; then
  echo "$(date +%T) moelab validate --device gpu --quick"
  timeout "${VALIDATE_TIMEOUT_S:-600}" "$moelab" validate --device gpu --quick --out "$out/validate-gpu" \
    > "$out/validate-gpu.txt" 2> "$out/validate-gpu.err" || { status=1; echo "validate failed: $(tail -3 "$out/validate-gpu.err")"; }
  cat "$out/validate-gpu.txt"
  echo "$(date +%T) validate done"
fi
# Device memory bandwidth: a large device-to-device copy, bytes read + written, median of 20.
python3 - > "$out/copy_bandwidth.txt" 2>&1 <<'EOF' || true
import torch
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
y = torch.empty_like(x)
times = []
for _ in range(23):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); y.copy_(x); e.record(); torch.cuda.synchronize()
    times.append(s.elapsed_time(e) / 1e3)
times = sorted(times[3:])
print(f"d2d_copy_bytes_per_s {2 * x.numel() / times[len(times) // 2]:.4e} "
      f"min {2 * x.numel() / times[-1]:.4e} max {2 * x.numel() / times[0]:.4e}")
EOF
cat "$out/copy_bandwidth.txt"

run() {  # name, then moelab run flags
  local name=$1
  shift
  timeout 240 "$moelab" run "$@" --json --out "$out/$name.json" 2> "$out/$name.err" ||
    { echo "run $name failed: $(tail -1 "$out/$name.err")"; status=1; }
}
expert_bytes=$((3 * 1024 * 3584 * 2))  # 8 layers x 8 experts of 22 MB: 16 of 64 fit in 16 slots
wide=(--layers 8 --hidden 4096 --intermediate 14336 --heads 32 --kv-heads 8 --head-dim 128)
for round in $(seq 1 "$rounds"); do
  echo "$(date +%T) round $round of $rounds"
  if [[ $parts == *timing* ]]; then
    run "decode-b1-r$round" --device gpu --batch 1 --prompt 32 --tokens 64
    run "decode-b4-r$round" --device gpu --batch 4 --prompt 32 --tokens 64
    run "decode-b16-r$round" --device gpu --batch 16 --prompt 32 --tokens 64
    run "decode-b1-long-r$round" --device gpu --batch 1 --prompt 2048 --tokens 32
    run "prefill-256-r$round" --device gpu --workload prefill --batch 1 --prompt 256 --tokens 1
    run "sd-g4-r$round" --device gpu --workload sd --batch 1 --prompt 32 --tokens 64 --gamma 4 --alpha 0.8
    run "beam-4-r$round" --device gpu --workload beam --beam 4 --prompt 32 --tokens 32
  fi
  if [[ $parts == *quantized* ]]; then
    for bits in 8 4; do
      run "q$bits-decode-b1-r$round" --device gpu --expert-bits $bits --batch 1 --prompt 32 --tokens 64
      run "q$bits-decode-b16-r$round" --device gpu --expert-bits $bits --batch 16 --prompt 32 --tokens 64
      run "q$bits-prefill-256-r$round" --device gpu --expert-bits $bits --workload prefill --prompt 256 --tokens 1
    done
  fi
  if [[ $parts == *offload* ]]; then
    for experts in 16 32; do
      for policy in on-demand lru-prefetch fiddler stream-all; do
        [[ $policy == stream-all && $experts == 32 ]] && continue
        run "offload-$policy-$experts-r$round" --device gpu --offload $policy \
          --expert-memory $((experts * expert_bytes)) --batch 1 --prompt 32 --tokens 32
      done
    done
  fi
done
if [[ $parts == *sweep* ]]; then
  echo "$(date +%T) SD sweep"
  for batch in 1 4 16; do
    for gamma in 1 2 4; do
      run "sd-sweep-b$batch-g$gamma" --device gpu --workload sd --batch $batch --prompt 32 --tokens 48 --gamma $gamma --alpha 0.8
    done
  done
  run "cpu-decode-b1" --device cpu --batch 1 --prompt 32 --tokens 32
fi
if [[ $parts == *wide* ]]; then
  echo "$(date +%T) wide shape"
  run "wide-decode-b1" --device gpu "${wide[@]}" --batch 1 --prompt 32 --tokens 64
  run "wide-prefill-512" --device gpu "${wide[@]}" --workload prefill --prompt 512 --tokens 1
  if [[ $parts == *quantized* ]]; then
    run "wide-q4-decode-b1" --device gpu --expert-bits 4 "${wide[@]}" --batch 1 --prompt 32 --tokens 64
    run "wide-q8-decode-b1" --device gpu --expert-bits 8 "${wide[@]}" --batch 1 --prompt 32 --tokens 64
  fi
fi

echo "$(date +%T) runs done"
python3 - "$out" <<'EOF' | tee "$out/summary.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    if name == "devices":
        continue
    r = json.load(open(path))
    case = name.rsplit("-r", 1)[0] if name[-3:-1] == "-r" else name
    rows.setdefault(case, []).append(r)
print("| case | device | runs | TTFT ms (min-max) | TPOT ms (min-max) | tokens/s | decode weight GB/s | SD speedup | ms per pass: attention, router, experts, LM head, other | offload hit rate, copies, CPU runs, stall s |")
print("|---|---|---|---|---|---|---|---|---|---|")
def span(values, scale=1e3):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values) * scale:.3f} ({min(values) * scale:.3f}-{max(values) * scale:.3f})"
def ops(r):
    # Operator seconds over the run's passes (prompt + output tokens, or one prefill pass).
    times = r.get("operator_times_s", {})
    passes = 1 + max(0, r.get("output_tokens", 1) - 1) if r.get("workload") == "decode" else 0
    if not times or passes == 0:
        return "-"
    return ", ".join(f"{times.get(k, 0) / passes * 1e3:.3f}" for k in ("attention", "router", "experts", "lm_head", "other"))
for case, rs in rows.items():
    bw = [r.get("decode_weight_bandwidth_bytes_per_s") for r in rs]
    bw = [b for b in bw if b]
    sd = [r["sd"]["speedup"] for r in rs if "sd" in r]
    tps = [r["tokens_per_s"] for r in rs if r.get("tokens_per_s")]
    print(f"| {case} | {rs[0].get('device', 'cpu')} | {len(rs)} | {span([r['ttft_s'] for r in rs])} | "
          f"{span([r['tpot_s'] for r in rs])} | {statistics.median(tps):.1f} | "
          f"{(statistics.median(bw) / 1e9 if bw else 0):.1f} | {(statistics.median(sd) if sd else 0):.2f} | "
          f"{ops(rs[0])} | "
          + (f"{rs[0]['offload']['hit_rate']:.3f}, {rs[0]['offload']['reads']}, "
             f"{rs[0]['offload']['storage_runs']}, {statistics.median(r['offload']['stall_s'] for r in rs):.4f}"
             if "offload" in rs[0] else "-") + " |")
EOF
exit $status
