#!/usr/bin/env python3
"""Threads vs io_uring expert reader (issue 12): moelab run --offload, interleaved rounds.

Usage: bench/offload_reader.py MOELAB_BINARY OFFLOAD_DIR OUT.md [rounds]

Each round runs, in an order shuffled per round (seeded), every (reader, reads in flight, policy):
readers threads and io_uring, 1, 2 and 4 reads in flight, on-demand with 16 of the 64 experts in
RAM (latency-bound: one layer's misses at a time) and stream-all (read-bound: every expert of every
layer per token). Writes a Markdown table of TPOT and stall medians with min-max, and the raw runs
as JSON next to it. Deterministic counts (reads, bytes, hit rate) are checked identical across
readers.
"""
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile

SHAPE = ("--model mixtral-8x7b --layers 8 --hidden 1024 --intermediate 1792 --experts 8 "
         "--prompt 16 --tokens 16 --threads 2 --seed 1").split()
EXPERT_BYTES = 11010176  # one bf16 expert of this shape (offload.expert_bytes)


def run(binary, offload_dir, reader, in_flight, policy):
    command = [binary, "run", *SHAPE, "--offload", policy,
               "--expert-memory", str(16 * EXPERT_BYTES), "--offload-dir", offload_dir,
               "--offload-reader", reader, "--offload-readers", str(in_flight), "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    o = report["offload"]
    return {"reader": reader, "in_flight": in_flight, "policy": policy,
            "tpot_s": report["tpot_s"], "stall_s": o["stall_s"], "reads": o["reads"],
            "bytes_read_storage": o["bytes_read_storage"], "hit_rate": o["hit_rate"],
            "direct_io": o["store"]["direct_io"], "isa": report["machine"]["isa"]}


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def spread(values):
    return "%.1f (%.1f-%.1f)" % (statistics.median(values), min(values), max(values))


def main():
    binary, offload_dir, out_md = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    configs = [(r, n, p) for p in ("on-demand", "stream-all") for r in ("threads", "io_uring")
               for n in (1, 2, 4)]
    run(binary, offload_dir, "threads", 2, "on-demand")  # builds (or reuses) the store, untimed
    rng = random.Random(1)
    runs = []
    for round_index in range(rounds):
        order = configs[:]
        rng.shuffle(order)
        for reader, in_flight, policy in order:
            result = run(binary, offload_dir, reader, in_flight, policy)
            result["round"] = round_index + 1
            runs.append(result)
            print("round %d %-8s %d %-10s TPOT %.1f ms" %
                  (round_index + 1, reader, in_flight, policy, result["tpot_s"] * 1e3), flush=True)
    for policy in ("on-demand", "stream-all"):
        counts = {(r["reads"], r["bytes_read_storage"], r["hit_rate"])
                  for r in runs if r["policy"] == policy}
        if len(counts) != 1:
            sys.exit("reads, bytes or hit rate differ between runs of %s: %s" % (policy, counts))
    lines = [
        "# Expert reader: threads vs io_uring (issue 12)",
        "",
        "Command: `bench/offload_reader.py build/cli/moelab OFFLOAD_DIR %s %d` (%d interleaved "
        "rounds, order shuffled per round with seed 1)." % (out_md, rounds, rounds),
        "Machine: %s, %d CPUs, ISA `%s` (`moelab run`'s `machine.isa`); expert store read with "
        "O_DIRECT: %s." % (cpu_model(), os.cpu_count(),
                           runs[0]["isa"], all(r["direct_io"] for r in runs)),
        "",
        "`moelab run %s --offload POLICY --expert-memory %d (16 of 64 experts) "
        "--offload-reader READER --offload-readers N`. TPOT and stall (compute waiting for reads, "
        "whole run) in ms / s: median (min-max) over the rounds. Reads, bytes and hit rate were "
        "identical in every run of a policy (checked)." % (" ".join(SHAPE), 16 * EXPERT_BYTES),
        "",
        "| policy | reads in flight | threads TPOT ms | io_uring TPOT ms | threads stall s | "
        "io_uring stall s | io_uring / threads (TPOT medians) |",
        "|---|---|---|---|---|---|---|",
    ]
    for policy in ("on-demand", "stream-all"):
        for n in (1, 2, 4):
            def pick(reader, key):
                return [r[key] * (1e3 if key == "tpot_s" else 1) for r in runs
                        if r["policy"] == policy and r["in_flight"] == n and r["reader"] == reader]
            t, u = pick("threads", "tpot_s"), pick("io_uring", "tpot_s")
            lines.append("| %s | %d | %s | %s | %s | %s | %.2f |" % (
                policy, n, spread(t), spread(u), spread(pick("threads", "stall_s")),
                spread(pick("io_uring", "stall_s")), statistics.median(u) / statistics.median(t)))
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(out_md)),
                                     delete=False) as tmp:
        tmp.write("\n".join(lines) + "\n")
    os.replace(tmp.name, out_md)
    json_path = os.path.splitext(out_md)[0] + ".json"
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(json_path)),
                                     delete=False) as tmp:
        json.dump({"runs": runs}, tmp, indent=1)
    os.replace(tmp.name, json_path)


if __name__ == "__main__":
    main()
