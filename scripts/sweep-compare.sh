#!/usr/bin/env bash
# Two moelab builds' sweeps interleaved round by round (old then new, one process then 2 ranks),
# so that a machine whose speed drifts hits both alike; checks the four outputs are the same
# apart from their provenance (which names each build's commit).
# Usage: scripts/sweep-compare.sh OLD_MOELAB NEW_MOELAB SPEC.json [rounds]   (default 5)
set -euo pipefail
old=$1 new=$2 spec=$3 rounds=${4:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One thread per process, as builds before --threads ran (a newer one-process sweep defaults to
# all cores).
export MOELAB_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N);
            python3 -c "print(f'{$end - $start:.3f}')"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
  a=$(seconds "$old" sweep "$spec" --out "$work/old1.json")
  b=$(seconds "$new" sweep "$spec" --out "$work/new1.json")
  c=$(seconds mpirun -n 2 "$old" sweep "$spec" --out "$work/old2.json")
  d=$(seconds mpirun -n 2 "$new" sweep "$spec" --out "$work/new2.json")
  echo "round $round: one process old $a new $b; 2 ranks old $c new $d"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
body() { python3 -c "import sys; s = open(sys.argv[1]).read(); print(s[:s.index('\"provenance\"')])" "$1" | md5sum | cut -d' ' -f1; }
sums=$(for f in old1 new1 old2 new2; do body "$work/$f.json"; done | sort -u | wc -l)
[ "$sums" = 1 ] && echo "outputs identical apart from provenance" || { echo "outputs differ"; exit 1; }
