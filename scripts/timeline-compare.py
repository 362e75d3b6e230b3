#!/usr/bin/env python3
"""Where two timelines of one setting differ, operator by operator.

  scripts/timeline-compare.py A.json B.json

A and B are Chrome trace-event timelines with the same op names: `moelab run --timeline-out`
(the executor) or `moelab sim offload --trace-out` (the simulator), e.g. the executor's run and the
simulator's prediction of it, or two executor runs (all experts in RAM against an offloaded one).
For each op category (dense, expert, lm_head, copy, storage, wait) it prints the count and the
median and total seconds in each, over the passes both have (pass 0, the prompt's, left out unless
--with-prefill), and for an executor timeline the compute thread's operators split by where they
ran in their pass: before the pass's first wait for a read, or after one (the computation that
follows a stall). Python 3 standard library only.
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict

COMPUTE = ("embedding", "dense", "expert", "lm_head")


def load(path):
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{path}: not a trace-event timeline ({e})")
    ops = []
    for e in events:
        if e.get("ph") != "X":
            continue
        try:
            ops.append({"name": e["name"], "cat": e["cat"], "ts": float(e["ts"]) * 1e-6,
                        "dur": float(e["dur"]) * 1e-6, "pass": int(e["args"]["pass"])})
        except (KeyError, TypeError, ValueError) as err:
            sys.exit(f"{path}: event {e!r} lacks name, cat, ts, dur or args.pass ({err})")
    return ops


def by_position(ops):
    """Compute ops of each pass: 'before' the pass's first wait, 'after' it (executor only)."""
    first_wait = {}
    for op in ops:
        if op["cat"] == "wait":
            first_wait[op["pass"]] = min(first_wait.get(op["pass"], op["ts"]), op["ts"])
    split = defaultdict(lambda: defaultdict(list))
    for op in ops:
        if op["cat"] not in COMPUTE:
            continue
        at = first_wait.get(op["pass"])
        where = "no wait in pass" if at is None else ("after a wait" if op["ts"] >= at else
                                                      "before the first wait")
        split[where]["all"].append(op["dur"])
        split[where][op["cat"]].append(op["dur"])
    return split


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--with-prefill", action="store_true",
                        help="count pass 0 (the prompt's) too")
    args = parser.parse_args()
    a, b = load(args.a), load(args.b)
    first = 0 if args.with_prefill else 1
    passes = {op["pass"] for op in a if op["pass"] >= first} & \
             {op["pass"] for op in b if op["pass"] >= first}
    if not passes:
        sys.exit("the timelines share no pass")
    a = [op for op in a if op["pass"] in passes]
    b = [op for op in b if op["pass"] in passes]
    print(f"{len(passes)} passes ({min(passes)}..{max(passes)})")
    print(f"{'category':<10} {'count A':>8} {'count B':>8} {'median A ms':>12} {'median B ms':>12}"
          f" {'total A ms':>11} {'total B ms':>11}")
    for cat in ("embedding", "dense", "expert", "lm_head", "storage", "copy", "wait"):
        da = [op["dur"] for op in a if op["cat"] == cat]
        db = [op["dur"] for op in b if op["cat"] == cat]
        if not da and not db:
            continue
        med = lambda d: f"{statistics.median(d) * 1e3:12.3f}" if d else f"{'-':>12}"
        print(f"{cat:<10} {len(da):>8} {len(db):>8} {med(da)} {med(db)} {sum(da) * 1e3:11.2f}"
              f" {sum(db) * 1e3:11.2f}")
    for label, ops in (("A", a), ("B", b)):
        split = by_position(ops)
        if len(split) > 1 or "no wait in pass" not in split:
            print(f"{label}: compute ops by where they ran in their pass (median ms, count):")
            cats = ("all", "dense", "expert", "lm_head")
            print(f"  {'':<22}" + "".join(f"{c:>16}" for c in cats))
            for where in ("no wait in pass", "before the first wait", "after a wait"):
                if where not in split:
                    continue
                row = ""
                for c in cats:
                    d = split[where].get(c, [])
                    row += f"{statistics.median(d) * 1e3:>10.3f} ({len(d):>3})" if d else f"{'-':>16}"
                print(f"  {where:<22}{row}")


if __name__ == "__main__":
    main()
