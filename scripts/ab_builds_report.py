#!/usr/bin/env python3
"""Medians and spreads of scripts/ab-builds.sh's folder: per case, A and B's median over rounds,
the (min-max) range, and B / A as a speed ratio (A's time over B's). Markdown on stdout.
  scripts/ab_builds_report.py OUT"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/ab_builds_report.py OUT")
    out = sys.argv[1]
    times = {}  # (case, tag) -> [seconds per round]
    for path in sorted(glob.glob(os.path.join(out, "*-bench.json"))):
        match = re.match(r"(\d+)-([ab])-bench\.json", os.path.basename(path))
        if not match:
            continue
        tag = match.group(2)
        for bench in json.load(open(path))["benchmarks"]:
            if bench.get("run_type") == "aggregate":
                continue
            name = bench["name"].split("/min_time")[0].split("/real_time")[0]
            unit = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[bench["time_unit"]]
            times.setdefault((name, tag), []).append(bench["real_time"] * unit)
    for path in sorted(glob.glob(os.path.join(out, "*-run-*.json"))):
        match = re.match(r"(\d+)-([ab])-run-(.*)\.json", os.path.basename(path))
        if not match:
            continue
        report = json.load(open(path))
        case = "run " + match.group(3)
        seconds = report["ttft_s"] if "prefill" in case else report["tpot_s"]
        times.setdefault((case, match.group(2)), []).append(seconds)
    cases = sorted({case for case, _ in times}, key=lambda c: (c.startswith("run"), Key(c)))
    print("| case | A median (range) | B median (range) | A / B |")
    print("|---|---|---|---|")
    for case in cases:
        a, b = times.get((case, "a"), []), times.get((case, "b"), [])
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {case} | {Ms(ma)} ({Ms(min(a))}-{Ms(max(a))}) | {Ms(mb)} ({Ms(min(b))}-{Ms(max(b))}) "
              f"| {ma / mb:.2f} |")


def Key(case):
    numbers = [int(n) for n in re.findall(r"\d+", case)]
    return (re.sub(r"\d+", "", case), numbers[::-1])


def Ms(seconds):
    return f"{seconds * 1e3:.3f} ms"


if __name__ == "__main__":
    main()
