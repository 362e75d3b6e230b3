#!/usr/bin/env python3
"""Turns scripts/decode-vs-dram.sh's runs into a Markdown table: per layer count and expert format,
the decode's stored weight bytes per second against the DRAM read bandwidth measured in the same
process, interleaved. ratio = median(decode) / median(DRAM); its spread puts each repetition's
decode over the median probe; the bar is issue 42's 0.85.
Usage: decode_vs_dram_report.py RUN.json [RUN.json ...]"""
import json
import statistics
import sys

BAR = 0.85


def runs_of(path):
    data = json.load(open(path))
    samples = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            raise SystemExit(f"{path}: {b['run_name']}: {b.get('error_message', 'failed')}")
        samples.setdefault(b["run_name"], []).append(b)
    return data["context"], samples


print("| layers | experts | label | ms per token | weight MB per token | decode GB/s | DRAM GB/s (same process) | ratio (median) | ratio spread | bar |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    context, samples = runs_of(path)
    dram_runs = [s for name, s in samples.items() if name.startswith("DramRead")]
    if not dram_runs:
        raise SystemExit(f"{path}: DramRead missing: no bound to judge decode against")
    dram = [b["bytes_per_second"] for b in dram_runs[0]]
    dram_median = statistics.median(dram)
    decodes = [(name.split("/"), runs) for name, runs in samples.items()
               if name.startswith("DecodeByFormat/")]
    for (_, bits, layers, *_), runs in sorted(decodes, key=lambda d: (int(d[0][2]), -int(d[0][1]))):
        per_s = [b["weight_bytes_per_s"] for b in runs]
        ratio = statistics.median(per_s) / dram_median
        low, high = min(per_s) / dram_median, max(per_s) / dram_median
        ms = statistics.median(b["real_time"] for b in runs)
        verdict = "met" if ratio >= BAR else "not met"
        print(f"| {layers} | {bits} bits | {runs[0].get('label', '')} | {ms:.2f} | "
              f"{runs[0]['weight_bytes_per_token'] / 1e6:.0f} | {statistics.median(per_s) / 1e9:.1f} | "
              f"{dram_median / 1e9:.1f} [{min(dram) / 1e9:.1f}-{max(dram) / 1e9:.1f}] | {ratio:.2f} | "
              f"{low:.2f}-{high:.2f} | >= {BAR} ({verdict}) |")
    print(f"\n{path}: {len(dram)} repetitions; load average at start {context.get('load_avg', '?')}",
          file=sys.stderr)
