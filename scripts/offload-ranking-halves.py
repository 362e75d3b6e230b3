#!/usr/bin/env python3
"""The executor against itself, for validation.json files written before `offload_ranking.halves`.

  scripts/offload-ranking-halves.py VALIDATION.json...

The definition is validate/offload_ranking.cc's: per (workload, expert budget), each offload
policy's even-numbered runs and its odd-numbered runs (`measured_runs`, in the order they ran)
ranked by their medians, ties broken by policy name; how often the two halves rank a budget's
policies alike and order a pair alike, and how often the prediction ranks like each half. A file
whose offload cases lack `measured_runs`, or where a policy ran once, is skipped with a message.
Python 3 standard library only.
"""
import itertools
import json
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                cases = json.load(f)["cases"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"{path}: not a moelab.validation/1 file ({e})")
        budgets = {}
        for c in cases:
            if c.get("kind") not in ("offload", "offload-prefill"):
                continue
            workload = ("prefill %d" % c["prompt"] if c["kind"] == "offload-prefill"
                        else "decode B=%d" % c["batch"])
            budgets.setdefault((workload, c["expert_slots"]), {})[c["policy"]] = c
        runs = [c.get("measured_runs", []) for b in budgets.values() for c in b.values()]
        if not budgets or any(len(r) < 2 for r in runs):
            print(f"{path}: skipped (no offload cases, or a policy without two runs)")
            continue
        alike = as_even = as_odd = pairs_alike = pairs_as_even = pairs_as_odd = pairs = 0
        for policies in budgets.values():
            def order(time_of):
                return sorted(policies, key=lambda p: (time_of(policies[p]), p))
            even = order(lambda c: statistics.median(c["measured_runs"][0::2]))
            odd = order(lambda c: statistics.median(c["measured_runs"][1::2]))
            predicted = order(lambda c: c["predicted"])
            alike += even == odd
            as_even += predicted == even
            as_odd += predicted == odd
            for p, q in itertools.combinations(sorted(policies), 2):
                def first(o):
                    return o.index(p) < o.index(q)
                pairs += 1
                pairs_alike += first(even) == first(odd)
                pairs_as_even += first(predicted) == first(even)
                pairs_as_odd += first(predicted) == first(odd)
        n = len(budgets)
        print(f"{path}: halves alike at {alike} of {n} budgets, {pairs_alike} of {pairs} pairs; "
              f"the prediction like the even / odd half at {as_even} / {as_odd} budgets, "
              f"{pairs_as_even} / {pairs_as_odd} pairs")


if __name__ == "__main__":
    main()
