#!/usr/bin/env bash
# Decode with and without transparent huge pages on one build (kernels/weight_memory.h): the
# machine's THP mode is set to "never" (4 KiB pages everywhere, as before the weights asked for
# huge pages) and back to "madvise" round by round, alternating which goes first, and each mode
# runs `moelab run --workload decode` at batch 1 for each expert format. Prints per format the
# medians and the paired never/madvise ratios. Needs root (it writes
# /sys/kernel/mm/transparent_hugepage/enabled) and restores the mode it found.
# Usage: scripts/thp-ab.sh [rounds]   (default 5)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-5}
case "$rounds" in
  '' | *[!0-9]* | 0) echo "thp-ab.sh: rounds must be a positive integer, got '$rounds'" >&2; exit 1 ;;
esac
knob=/sys/kernel/mm/transparent_hugepage/enabled
[ -w "$knob" ] || { echo "thp-ab.sh: $knob is not writable (run as root on a kernel with THP)" >&2; exit 1; }
found=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$knob")
trap 'echo "$found" > "$knob"' EXIT
moelab=${MOELAB:-$root/build/cli/moelab}
out=$(mktemp -d)
trap 'echo "$found" > "$knob"; rm -rf "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  modes="never madvise"
  [ $((round % 2)) -eq 0 ] && modes="madvise never"
  for mode in $modes; do
    echo "$mode" > "$knob"
    for bits in 16 8 4; do
      "$moelab" run --workload decode --expert-bits "$bits" --batch 1 --prompt 32 --tokens 64 \
        --seed 1 --json --out "$out/$round-$mode-$bits.json" > /dev/null
    done
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| experts | never: ms per token (median) | madvise | never / madvise, per round | median |")
print("|---|---|---|---|---|")
for bits in (16, 8, 4):
    tpot = {m: [json.load(open(f"{out}/{r}-{m}-{bits}.json"))["tpot_s"] * 1e3
                for r in range(1, rounds + 1)] for m in ("never", "madvise")}
    ratios = [n / a for n, a in zip(tpot["never"], tpot["madvise"])]
    print(f"| {bits} bits | {statistics.median(tpot['never']):.2f} | "
          f"{statistics.median(tpot['madvise']):.2f} | "
          f"{' '.join(f'{x:.2f}' for x in ratios)} | {statistics.median(ratios):.2f} |")
PY
