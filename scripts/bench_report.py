#!/usr/bin/env python3
"""Turns moelab_kernels_bench JSON (with repetitions) into results/kernels-cpu.md: medians and
ratios against the DRAM bandwidth and BF16 peak measured in the same run."""
import json
import subprocess
import sys

data = json.load(open(sys.argv[1]))
repetitions = sys.argv[2]
median = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "median"}


def find(prefix):
    for name, bench in median.items():
        if name.startswith(prefix):
            return bench
    raise SystemExit(f"benchmark {prefix} missing from the run")


dram = find("DramRead")["bytes_per_second"]
peak = find("Bf16Peak")["flops"]
commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
ctx = data["context"]
print("# CPU kernels and executor against this machine's limits\n")
print(f"Command: `scripts/bench.sh {repetitions}` (build/bench/moelab_kernels_bench, {repetitions} repetitions of every benchmark interleaved in random order, medians), commit {commit}.")
print(f"Machine: {ctx.get('host_name')}, {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
      f"date {ctx.get('date')}, caches: " + ", ".join(f"L{c['level']} {c['size'] // 1024} KiB" for c in ctx.get("caches", [])) + ".")
print("Limits measured in the same run (all threads): DRAM read "
      f"{dram / 1e9:.1f} GB/s (1 GiB streamed), AVX512-BF16 peak {peak / 1e9:.0f} GFLOP/s (independent vdpbf16ps).\n")
print("| benchmark | tokens | median time | weight bytes/s | FLOP/s | ratio | target |")
print("|---|---|---|---|---|---|---|")
for tokens in (1, 2, 4, 8):
    b = find(f"ExpertFfn/{tokens}/")
    ratio = b["weight_bytes_per_s"] / dram
    print(f"| expert FFN (decode) | {tokens} | {b['real_time']:.3f} ms | {b['weight_bytes_per_s'] / 1e9:.1f} G | "
          f"{b['flops'] / 1e9:.0f} G | {100 * ratio:.0f} % of DRAM | >= 85 % |")
for tokens in (256, 512, 1024):
    b = find(f"ExpertFfn/{tokens}/")
    ratio = b["flops"] / peak
    print(f"| expert FFN (prefill) | {tokens} | {b['real_time']:.2f} ms | {b['weight_bytes_per_s'] / 1e9:.2f} G | "
          f"{b['flops'] / 1e9:.0f} G | {100 * ratio:.0f} % of BF16 peak | >= 60 % |")
b = find("DecodeStep")
print(f"| end-to-end decode step, default model, batch 1 | 1 | {b['real_time']:.2f} ms | {b['weight_bytes_per_s'] / 1e9:.1f} G | - | "
      f"{100 * b['weight_bytes_per_s'] / dram:.0f} % of the bound (weight bytes per token {b['weight_bytes_per_token'] / 1e6:.0f} MB / DRAM bandwidth) | >= 80 % |")
print("\nExpert shape: hidden 1024, width 3584 (the default executor model's experts: 22 MB of bf16 weights), "
      "32 distinct experts cycled so decode-shaped calls stream from DRAM. The decode step includes attention, "
      "router, 2 of 8 experts per layer, 8 layers and the 32000 x 1024 LM head; its KV cache is kept between "
      "32 and 256 positions.")
