#!/usr/bin/env bash
# sim serve --offload against moelab serve --offload on this machine (docs/serving-sim.md,
# "Offloading"): the default model's routed experts on this machine's storage, a cache of
# EXPERT_MEMORY, served under moelab loadgen and predicted by sim serve with the quick profile's
# fit and this machine's storage tier (hw from-profile). The storage tier's read bandwidth drifts
# within minutes on a cloud disk (1.85 to 2.6 GB/s within 20 minutes here), so each served run is
# priced twice: at the bandwidth its own reads got (the server's /metrics:
# moelab_offload_copied_bytes_total / moelab_offload_storage_busy_seconds_total, given to hw
# from-profile --storage-read-bandwidth; this checks the serving and offload model with the disk's
# speed known), and at the profile's reader samples (what a user gets from a profile taken
# before). Rounds x policies, interleaved. Prints a table of predicted against measured (p50/p90
# TTFT and TPOT, p50 E2E, throughput) and the median absolute errors.
# Usage: scripts/serve-offload-check.sh [rounds]   (default 2)
#   scripts/record.sh results/serve-offload-check-ISA-DATE bash scripts/serve-offload-check.sh 2
#   POLICIES="on-demand lru-prefetch"  EXPERT_MEMORY=700MB  RATE=0.3  REQUESTS=30
#   MOELAB=path (default build/cli/moelab)   PROFILE=file: reuse a quick profile (not for records)
# Writes profile.json, fit.json, every run's measured/predicted JSON, the server's /metrics at the
# end of each run (metrics-RUN.txt: its hit rate is in the table) and summary.json into $RECORD
# when run through scripts/record.sh, else into a temporary folder that is removed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-2}
case "$rounds" in
  '' | *[!0-9]* | 0) echo "serve-offload-check.sh: rounds must be a positive integer, got '$rounds'" >&2; exit 1 ;;
esac
moelab=${MOELAB:-$root/build/cli/moelab}
policies=${POLICIES:-"on-demand lru-prefetch"}
expert_memory=${EXPERT_MEMORY:-700MB}
rate=${RATE:-0.3}
requests=${REQUESTS:-30}
temporary=
if [ -n "${RECORD:-}" ]; then
  out=$RECORD
else
  out=$(mktemp -d)
  temporary=$out
fi
server_pid=
stop_server() { if [ -n "$server_pid" ]; then kill -INT "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; server_pid=; fi; }
cleanup() { stop_server; if [ -n "$temporary" ]; then rm -rf "$temporary"; fi; }
trap cleanup EXIT
load=(--arrivals "poisson:$rate" --requests "$requests" --prompt-tokens 64 --output-tokens 32 --seed 5)
scheduler=(--max-running 16 --kv-blocks 1024)
if [ -n "${PROFILE:-}" ]; then  # a quick profile of this machine taken before (development runs)
  cp "$PROFILE" "$out/profile.json"
else
  "$moelab" profile --quick --out "$out/profile.json" --quiet >/dev/null
fi
"$moelab" fit latency --profile "$out/profile.json" --out "$out/fit.json" >/dev/null
"$moelab" hw from-profile "$out/profile.json" --memory 4GB --out "$out/hw-profile.json"

metric() {  # NAME PORT: the value of a /metrics line
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request
name, port = sys.argv[1], sys.argv[2]
for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode().splitlines():
    if line.startswith(name + " "):
        print(line.split()[1])
        break
else:
    sys.exit(f"serve-offload-check.sh: {name} not in /metrics")
PY
}

for round in $(seq 1 "$rounds"); do
  for policy in $policies; do
    tag="$policy-round$round"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$moelab" serve --port "$port" --offload "$policy" --expert-memory "$expert_memory" \
      "${scheduler[@]}" >"$out/serve-$tag.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 1200); do
      grep -q '^listening' "$out/serve-$tag.log" && break
      kill -0 "$server_pid" 2>/dev/null || { cat "$out/serve-$tag.log" >&2; exit 1; }
      sleep 0.25
    done
    grep -q '^listening' "$out/serve-$tag.log" || { echo "serve-offload-check.sh: the server never listened" >&2; exit 1; }
    "$moelab" loadgen --url "http://127.0.0.1:$port" "${load[@]}" --json --out "$out/measured-$tag.json"
    python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" >"$out/metrics-$tag.txt"
    copied=$(metric moelab_offload_copied_bytes_total "$port")
    busy=$(metric moelab_offload_storage_busy_seconds_total "$port")
    stop_server
    bandwidth=$(python3 -c "print($copied / $busy)")
    echo "$tag $bandwidth" >>"$out/run-bandwidth.txt"
    "$moelab" hw from-profile "$out/profile.json" --memory 4GB --storage-read-bandwidth "$bandwidth" \
      --out "$out/hw-$tag.json"
    for hw in "$tag" profile; do
      "$moelab" sim serve --model mixtral-8x7b --profile "$out/fit.json" --hardware "$out/hw-$hw.json" \
        --offload "$policy" --expert-memory "$expert_memory" "${scheduler[@]}" "${load[@]}" \
        --json --out "$out/predicted-$tag-at-$([ "$hw" = profile ] && echo profile || echo run).json"
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
metrics = [("ttft_s", "p50"), ("ttft_s", "p90"), ("tpot_s", "p50"), ("tpot_s", "p90"), ("e2e_s", "p50")]
bandwidth = {line.split()[0]: float(line.split()[1]) for line in open(f"{out}/run-bandwidth.txt")}
rows, errors = [], {"run": [], "profile": []}
for measured_file in sorted(glob.glob(f"{out}/measured-*.json")):
    tag = os.path.basename(measured_file)[len("measured-"):-len(".json")]
    m = json.load(open(measured_file))
    row = {"run": tag, "run_storage_bytes_per_s": bandwidth[tag], "measured": {}, "predicted": {}}
    for at in ("run", "profile"):
        p = json.load(open(f"{out}/predicted-{tag}-at-{at}.json"))
        row["predicted"][at] = {}
        for metric, q in metrics + [("throughput_tokens_per_s", None)]:
            measured = m[metric][q] if q else m[metric]
            predicted = p[metric][q] if q else p[metric]
            name = f"{metric}.{q}" if q else metric
            row["measured"][name] = measured
            row["predicted"][at][name] = predicted
            errors[at].append(abs(predicted / measured - 1))
        row["predicted"][at]["hit_rate"] = p["offload"]["hit_rate"]
        row["predicted"][at]["offload_s"] = p["offload"]["offload_s"]
    served = {line.split()[0]: float(line.split()[1]) for line in open(f"{out}/metrics-{tag}.txt")
              if line.startswith("moelab_offload_")}
    row["measured"]["hit_rate"] = (served["moelab_offload_expert_hits_total"] /
                                   served["moelab_offload_expert_activations_total"])
    rows.append(row)
summary = {"runs": rows,
           "median_abs_error": {at: statistics.median(e) for at, e in errors.items()},
           "p90_abs_error": {at: sorted(e)[int(0.9 * (len(e) - 1))] for at, e in errors.items()}}
tmp = f"{out}/summary.json.tmp"
json.dump(summary, open(tmp, "w"), indent=1)
os.replace(tmp, f"{out}/summary.json")
names = [f"{m}.{q}" for m, q in metrics] + ["throughput_tokens_per_s"]
print("| run | its reads, GB/s | " + " | ".join(names) + " |")
print("|---|---|" + "---|" * len(names))
for row in rows:
    cells = []
    for name in names:
        measured = row["measured"][name]
        cells.append(f"{measured:.4g}: {100 * (row['predicted']['run'][name] / measured - 1):+.1f} % "
                     f"({100 * (row['predicted']['profile'][name] / measured - 1):+.1f} %)")
    print(f"| {row['run']} | {row['run_storage_bytes_per_s'] / 1e9:.2f} | " + " | ".join(cells) + " |")
print()
print("cells: measured: predicted at the bandwidth the run's reads got (at the profile's reader samples)")
for row in rows:
    print(f"{row['run']}: hit rate measured {row['measured']['hit_rate']:.3f}, "
          f"predicted {row['predicted']['run']['hit_rate']:.3f}")
for at in ("run", "profile"):
    print(f"median abs error at the {at}'s bandwidth: {100 * summary['median_abs_error'][at]:.1f} %, "
          f"p90 {100 * summary['p90_abs_error'][at]:.1f} %")
PY
