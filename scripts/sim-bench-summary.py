#!/usr/bin/env python3
"""Summarises scripts/sim-bench-compare.sh's runs: per case, the baseline's and the new build's
median CPU time per run over every repetition of every round, their min-max, the speed-up of the
medians, the median (and min-max) of the rounds' paired speed-ups (a round's baseline median over
its new median of the same case, run back to back), and expert events per second at the new
median. Standard library only."""
import glob
import json
import os
import statistics
import sys


def load(folder, side):
    times, events, labels, commits = {}, {}, {}, set()
    by_round = {}  # (name, round) -> CPU seconds of that round's repetitions
    def order(path):  # rounds and cases in their numeric order, so rows follow the bench's
        parts = os.path.basename(path)[len(side) + 1:-len(".json")].split("-")
        return [int(p) if p.isdigit() else 0 for p in parts]

    for path in sorted(glob.glob(os.path.join(folder, side + "-*.json")), key=order):
        # side-ROUND.json (all cases a round) or side-ROUND-CASE.json (one case)
        round_id = os.path.basename(path)[len(side) + 1:-len(".json")].split("-")[0]
        with open(path) as f:
            run = json.load(f)
        commits.add(run["context"].get("provenance.git_commit", "?"))
        for b in run["benchmarks"]:
            if b.get("run_type") != "iteration":
                continue
            name = b["run_name"]
            scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[b["time_unit"]]
            cpu_s = b["cpu_time"] * scale
            times.setdefault(name, []).append(cpu_s)
            by_round.setdefault((name, round_id), []).append(cpu_s)
            # expert events per second x CPU seconds per run = expert events per run
            if "expert_events_per_s" in b:
                events[name] = b["expert_events_per_s"] * cpu_s
            labels[name] = b.get("label", "")
    return times, events, labels, commits, by_round


def main():
    folder = sys.argv[1]
    base, _, _, base_commits, base_rounds = load(folder, "baseline")
    new, events, labels, new_commits, new_rounds = load(folder, "new")
    print(f"baseline {', '.join(sorted(base_commits))}; new {', '.join(sorted(new_commits))}")
    print()
    print("| case | baseline ms (min-max) | new ms (min-max) | speed-up | paired speed-up (min-max) "
          "| expert events/s (new) |")
    print("|---|---|---|---|---|---|")
    for name in new:
        b, n = base.get(name, []), new[name]
        nm = statistics.median(n)
        row = [labels[name] or name]
        if b:
            bm = statistics.median(b)
            row.append(f"{bm * 1e3:.1f} ({min(b) * 1e3:.1f}-{max(b) * 1e3:.1f})")
        else:
            bm = None
            row.append("-")
        row.append(f"{nm * 1e3:.1f} ({min(n) * 1e3:.1f}-{max(n) * 1e3:.1f})")
        row.append(f"{bm / nm:.2f}x" if bm else "-")
        paired = [statistics.median(base_rounds[key]) / statistics.median(times)
                  for key, times in new_rounds.items()
                  if key[0] == name and key in base_rounds]
        row.append(f"{statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})"
                   if paired else "-")
        row.append(f"{events[name] / nm / 1e6:.2f} M" if name in events else "-")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
