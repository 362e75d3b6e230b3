#!/usr/bin/env python3
"""Turns scripts/bench.sh's runs into results/kernels-cpu-<isa>.md: medians [min-max] over the
repetitions, ratios against the DRAM read bandwidth and the compute peak of the active path measured
in the same run.
Usage: bench_report.py KERNELS.json END_TO_END.jsonl REPETITIONS LOAD_BEFORE LOAD_AFTER"""
import json
import os
import statistics
import subprocess
import sys

kernels_path, end_to_end_path, repetitions, load_before, load_after = sys.argv[1:6]
data = json.load(open(kernels_path))
runs = [json.loads(line) for line in open(end_to_end_path)]

# Per benchmark, the repetitions (Google Benchmark's own aggregates are not used: min-max too).
samples = {}
errors = {}
for b in data["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    if b.get("error_occurred"):
        errors[b["run_name"]] = b.get("error_message", "skipped")
        continue
    samples.setdefault(b["run_name"], []).append(b)


def find(prefix):
    for name, bench in samples.items():
        if name.startswith(prefix):
            return bench
    return None


def stats(values):
    return statistics.median(values), min(values), max(values)


def spread(values, scale, digits):
    median, low, high = stats([v / scale for v in values])
    return f"{median:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def field(bench, key):
    return [b[key] for b in bench]


dram_runs = find("DramRead")
if dram_runs is None:
    raise SystemExit("DramRead missing from the run: no bandwidth to judge decode against")
dram = stats(field(dram_runs, "bytes_per_second"))[0]
peak_runs, peak_name = find("Bf16Peak"), "AVX512-BF16 dot peak (independent vdpbf16ps)"
if peak_runs is None:
    peak_runs, peak_name = find("Fp32Peak"), "fp32 FMA peak (12 independent 256-bit FMA chains per thread)"
if peak_runs is None:
    raise SystemExit("neither Bf16Peak nor Fp32Peak ran: no compute limit to judge prefill against")
peak = stats(field(peak_runs, "flops"))[0]
int8_runs = find("Int8Peak")
int8_peak = stats(field(int8_runs, "flops"))[0] if int8_runs else None

isa = runs[0]["machine"]["isa"]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
ctx = data["context"]
print(f"# CPU kernels and the executor against this machine's limits (ISA `{isa}`)\n")
forced = f"MOELAB_ISA={os.environ['MOELAB_ISA']} " if os.environ.get("MOELAB_ISA") else ""
print(f"Command: `{forced}scripts/bench.sh {repetitions}`: `moelab_kernels_bench` ({repetitions} repetitions of every benchmark, "
      "interleaved in random order) and `moelab run` on the shape below for every expert format "
      f"({repetitions} rounds over formats and workloads). Medians [min-max] over the repetitions. Commit {commit}"
      f"{' (working tree had uncommitted changes)' if dirty else ''}, {ctx.get('date')}.")
print(f"Machine: {runs[0]['machine'].get('cpu')}, {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
      "caches " + ", ".join(f"L{c['level']} {c['type'].lower()} {c['size'] // 1024} KiB" for c in ctx.get("caches", [])) +
      f"; load average (1, 5, 15 min) {load_before} before, {load_after} after.")
quantized_kernel = runs[0]["machine"].get("quantized_kernel", "avx2" if isa != "scalar" else "scalar")
if os.environ.get("MOELAB_ISA"):
    print(f"The path was forced with `MOELAB_ISA={os.environ['MOELAB_ISA']}` (this CPU's own default may be another).")
print(f"Kernel path: `{isa}` (what `moelab run` reports as `machine.isa`); quantized formats on the `{quantized_kernel}` "
      "integer dot product (`machine.quantized_kernel`).")
print(f"Limits measured in the same run (all threads): DRAM read {spread(field(dram_runs, 'bytes_per_second'), 1e9, 1)} GB/s "
      f"(1 GiB streamed); {peak_name} {spread(field(peak_runs, 'flops'), 1e9, 0)} GFLOP/s" +
      (f"; int8 dot peak of the quantized kernel ({int8_runs[0].get('label', '')}) "
       f"{spread(field(int8_runs, 'flops'), 1e9, 0)} G ops/s (2 per byte multiply-add)" if int8_runs else "") + ".")
for name, message in sorted(errors.items()):
    print(f"Skipped: `{name}` ({message}).")

print("\n## Expert FFN kernels\n")
cycled = []
for bits in (16, 8, 4):
    bench = find(f"ExpertFfn/1/{bits}/")
    cycled.append(str(int(bench[0]["experts_cycled"])) if bench and "experts_cycled" in bench[0] else "?")
print(f"Expert shape: hidden 1024, width 3584 (gate|up and down), {'/'.join(cycled)} experts cycled for bf16/q8_0/q4_0 "
      "(at least twice the effective last-level cache in every format) so decode-shaped calls read DRAM; "
      "stored bytes count quants and scales (bf16 16, q8_0 8.5, q4_0 4.5 bits per weight). Decode is judged against "
      "the DRAM bound, prefill against the compute peak and, for the quantized formats, against bf16's time.\n")
print("The roofline column judges every row against both limits at once: the bound is max(stored bytes / DRAM "
      "read, operations / the path's peak) -- the bf16 path's peak for bf16, the int8 dot peak for q8_0 and q4_0 "
      "-- and the column is bound / time (1.00 = at the roofline). Where a decode row's bound is the compute "
      "term, the DRAM bar cannot be met on this machine whatever the kernel; the column says how close it is.\n")
print("| format | tokens | time ms | stored bytes/s (G) | FLOP/s (G) | ratio (median) | bar | roofline (bound term) |")
print("|---|---|---|---|---|---|---|---|")
formats = (("bf16", 16), ("q8_0", 8), ("q4_0", 4))
bf16_prefill = None
for name, bits in formats:
    for tokens in (1, 2, 4, 8, 16, 256):
        bench = find(f"ExpertFfn/{tokens}/{bits}/")
        if bench is None:
            print(f"| {name} | {tokens} | missing | | | | | |")
            continue
        times = field(bench, "real_time")
        row = f"| {name} | {tokens} | {spread(times, 1, 3)} | {spread(field(bench, 'weight_bytes_per_s'), 1e9, 2)} | " \
              f"{spread(field(bench, 'flops'), 1e9, 0)} | "
        time = stats(times)[0]
        path_peak = peak if bits == 16 else int8_peak
        roofline = "-"
        if path_peak:
            seconds_per_call = time / 1e3
            memory_s = stats(field(bench, "weight_bytes_per_s"))[0] * seconds_per_call / dram
            compute_s = stats(field(bench, "flops"))[0] * seconds_per_call / path_peak
            bound = max(memory_s, compute_s)
            roofline = f"{bound / seconds_per_call:.2f} ({'DRAM' if memory_s >= compute_s else 'compute'})"
        if tokens <= 8:
            ratio = stats(field(bench, "weight_bytes_per_s"))[0] / dram
            print(row + f"{100 * ratio:.0f} % of DRAM | >= 85 % | {roofline} |")
        elif tokens < 256:  # SD verify and batched decode: judged by the roofline column only
            print(row + f"- | - | {roofline} |")
        elif bits == 16:
            bf16_prefill = time
            print(row + f"{100 * stats(field(bench, 'flops'))[0] / peak:.0f} % of peak | >= 60 % | {roofline} |")
        else:
            versus = f"{time / bf16_prefill:.2f} x bf16's time" if bf16_prefill else "-"
            print(row + f"{versus} | <= 1.00 x bf16 | {roofline} |")

step = find("DecodeStep")
if step is not None:
    per_s = field(step, "weight_bytes_per_s")
    print(f"\nDecodeStep (the default executor model, batch 1, bf16): {spread(field(step, 'real_time'), 1, 2)} ms per token, "
          f"{100 * stats(per_s)[0] / dram:.0f} % of the DRAM bound "
          f"({step[0]['weight_bytes_per_token'] / 1e6:.0f} MB of weights per token).")

print("\n## End to end: `moelab run`\n")
print("`moelab run --layers 16 --hidden 1024 --intermediate 3584 --experts 8 --top-k 2 --heads 16 --kv-heads 4 "
      "--vocab 32000 --expert-bits B --workload decode --tokens 64 --json` (and `--workload prefill --prompt 256`). "
      "DRAM-bound ratio: `weight_bytes_per_token x tokens_per_s / DRAM read`. The bar (issue 11): decode >= 0.85 of "
      "the bound and >= 18.2-20.5 tok/s, prefill ahead of 51-55 tok/s (llama.cpp bf16 on this machine kind).\n")
print("| expert format | workload | tokens/s | weight bytes per token (MB) | ratio to the DRAM bound | bar |")
print("|---|---|---|---|---|---|")
for name, bits in formats:
    for workload in ("decode", "prefill"):
        chosen = [r for r in runs if r["model"]["expert_format"] == name and r["workload"] == workload]
        if not chosen:
            print(f"| {name} | {workload} | missing | | | |")
            continue
        rates = [r["tokens_per_s"] for r in chosen]
        bytes_per_token = chosen[0]["weight_bytes_per_token"]
        if workload == "decode":
            ratio = f"{bytes_per_token * stats(rates)[0] / dram:.2f}"
            bar = ">= 0.85 and >= 20.5 tok/s"
        else:
            ratio, bar = "-", "> 55 tok/s"
        print(f"| {name} | {workload} | {spread(rates, 1, 1)} | {bytes_per_token / 1e6:.0f} | {ratio} | {bar} |")
