#!/usr/bin/env bash
# Issue 37's sweep target: a 10,000-point `plan sd` sweep in one process and on `mpirun -n 2`,
# interleaved round by round (one-process, then two ranks, ...) so that a machine whose load drifts
# hits both alike; prints each time, the medians, their min-max and the speedup (target >= 1.8x),
# the load average before and after, and checks the two outputs are the same bytes. Each round also
# runs SWEEP_RANKS one-process sweeps at once, with no MPI and nothing shared: what this machine's
# cores give independent processes is the ceiling a distributed run is read against; and one
# process on SWEEP_RANKS threads (--threads), the same work without MPI.
# Usage: scripts/bench-sweep.sh [rounds]   (default 5; a quiet machine with >= 2 free cores)
#   BUILD_DIR=dir   the build with the moelab binary (default build/; MPI built in)
#   SWEEP_RANKS=K   ranks of the distributed run (default 2)
#   SWEEP_BATCHES=B batch sizes 1..B in the grid (default 250: 10,000 points; fewer for a quick look)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-5}
ranks=${SWEEP_RANKS:-2}
batches=${SWEEP_BATCHES:-250}
moelab=${BUILD_DIR:-$root/build}/cli/moelab
[ -x "$moelab" ] || { echo "bench-sweep: no $moelab (build the moelab target)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench-sweep: no mpirun (scripts/install-deps.sh)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 5 acceptance rates x 8 gammas x 250 batches = 10,000 points, one row each.
python3 - "$work/spec.json" "$batches" <<'PY'
import json, sys
spec = {"schema": "moelab.sweep_spec/1", "command": "plan sd",
        "options": {"model": "mixtral-8x7b", "draft": "qwen2-0.5b", "hardware": "2xh100-sxm"},
        "grid": {"alpha": [0.5, 0.6, 0.7, 0.8, 0.9], "gamma": list(range(1, 9)),
                 "batch": list(range(1, int(sys.argv[2]) + 1))}}
json.dump(spec, open(sys.argv[1], "w"))
PY

seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N);
            python3 -c "print(f'{$end - $start:.3f}')"; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
copies() { local pids=() i; for i in $(seq 1 "$ranks"); do
             "$moelab" sweep "$work/spec.json" --threads 1 --out "$work/copy$i.json" & pids+=($!); done
           for i in "${pids[@]}"; do wait "$i"; done; }
one=() many=() together=() threaded=()
for round in $(seq 1 "$rounds"); do
  one+=("$(seconds "$moelab" sweep "$work/spec.json" --threads 1 --out "$work/one.json")")
  many+=("$(seconds mpirun -n "$ranks" "$moelab" sweep "$work/spec.json" --out "$work/many.json")")
  together+=("$(seconds copies)")
  threaded+=("$(seconds "$moelab" sweep "$work/spec.json" --threads "$ranks" --out "$work/threads.json")")
  echo "round $round: one process ${one[-1]} s, $ranks ranks ${many[-1]} s," \
       "$ranks one-process copies at once ${together[-1]} s, one process on $ranks threads ${threaded[-1]} s"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cmp -s "$work/one.json" "$work/many.json" || { echo "bench-sweep: outputs differ" >&2; exit 1; }
cmp -s "$work/one.json" "$work/threads.json" || { echo "bench-sweep: threaded output differs" >&2; exit 1; }
python3 - "$ranks" "${one[*]}" "${many[*]}" "$load_before" "$load_after" "$(nproc)" "$((batches * 40))" "${together[*]}" "${threaded[*]}" <<'PY'
import statistics, sys
ranks, one, many = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
together = [float(x) for x in sys.argv[8].split()]
threaded = [float(x) for x in sys.argv[9].split()]
m1, m2 = statistics.median(one), statistics.median(many)
print(f"{int(sys.argv[7]):,}-point plan sd sweep, {len(one)} interleaved rounds, {sys.argv[6]} cores, "
      f"load average {sys.argv[4]} before, {sys.argv[5]} after")
print(f"one process: median {m1:.3f} s (min {min(one):.3f}, max {max(one):.3f})")
print(f"{ranks} ranks:     median {m2:.3f} s (min {min(many):.3f}, max {max(many):.3f})")
print(f"{ranks} copies:    median {statistics.median(together):.3f} s (min {min(together):.3f}, max {max(together):.3f})")
print(f"{ranks} threads:   median {statistics.median(threaded):.3f} s (min {min(threaded):.3f}, max {max(threaded):.3f})")
print(f"speedup {m1 / m2:.2f}x (target >= 1.8x on 2 ranks); outputs byte-identical")
print(f"speedup of one process on {ranks} threads {m1 / statistics.median(threaded):.2f}x")
# Per round: the copies did `ranks` sweeps in the time one process did one (round by round, so a
# slow stretch hits both terms of a ratio alike).
ceilings = [int(ranks) * a / b for a, b in zip(one, together)]
ceiling = statistics.median(ceilings)
print(f"this machine's ceiling for {ranks} independent processes: median {ceiling:.2f}x "
      f"(min {min(ceilings):.2f}, max {max(ceilings):.2f}); the sweep's speedup is "
      f"{100 * (m1 / m2) / ceiling:.0f} % of it")
PY
