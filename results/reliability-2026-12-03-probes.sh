#!/usr/bin/env bash
# Issue 40's probes (items 1, 3, 4), each under a 4 GB address-space cap and a 60 s limit:
#   bash results/reliability-2026-12-03-probes.sh build/cli/moelab
# prints, per probe, the exit status and the first 200 bytes of stderr (control bytes as \xNN).
# Inputs are made in a scratch folder from tests/data (Mixtral's HF config with 100000 layers or
# experts or 2 layers, the quick CPU profile with storage reads of 1e300 s).
set -uo pipefail
moelab=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 - "$root" "$scratch" <<'PY'
import json, sys
root, scratch = sys.argv[1], sys.argv[2]
config = json.load(open(f"{root}/tests/data/hf_configs/mixtral-8x7b.json"))
for name, field, value in [("layers", "num_hidden_layers", 100000),
                           ("experts", "num_local_experts", 100000), ("two", "num_hidden_layers", 2)]:
    json.dump(dict(config, **{field: value}), open(f"{scratch}/{name}.json", "w"))
profile = json.load(open(f"{root}/tests/data/profiles/quick-cpu.json"))
for s in profile["samples"]:
    if s["operator"] == "storage_read":
        s["median_s"] = s["max_s"] = 1e300
json.dump(profile, open(f"{scratch}/slow.json", "w"))
PY
echo x >"$scratch/plain"
mkdir -p "$scratch/full" && echo mine >"$scratch/full/mine.txt"
tiny="run --layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2 --head-dim 16 --vocab 101 --prompt 4 --tokens 2 --threads 1"
simbase="sim offload --hardware rtx-3090 --policy lru-prefetch --accelerator-memory 24GB"
sim="$simbase --model mixtral-8x7b"
probe() {
  local out rc
  out=$(cd "$scratch" && ulimit -v 4000000 && timeout 60 "$moelab" "$@" 2>&1 >/dev/null)
  rc=$?
  printf '%s\n  -> exit %s: %s\n' "moelab $*" "$rc" \
    "$(printf '%s' "$out" | head -c 200 | python3 -c 'import sys; print(ascii(sys.stdin.read())[1:-1])')"
}
probe $tiny --offload lru-prefetch --expert-memory 1GB --offload-dir store --offload-readers 1000000000
probe $tiny --offload lru-prefetch --expert-memory 1GB --offload-dir store --offload-readers 2000
probe $tiny --offload lru-prefetch --expert-memory 1GB --offload-dir store --offload-reader io_uring --offload-readers 5000
probe $simbase --model layers.json
probe $simbase --model experts.json
probe plan offload --hardware rtx-3090 --model layers.json
probe plan offload --hardware rtx-3090 --model experts.json
probe run --model layers.json
probe $sim --layer-overhead-s 1e308
probe $sim --layer-overhead-s 1e300
probe plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 1e300
probe hw from-profile slow.json --memory 8GB --out hw.json
probe validate --quick --threads 5000
probe $sim --cpu-threads 5000
probe $tiny --offload bogus --expert-memory 1GB --offload-dir store
probe $tiny --offload lru-prefetch --expert-memory 1GB --offload-dir store --offload-calibration gate
probe plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 0.001
probe validate --quick --out plain/sub
probe validate --quick --out full
probe validate --quick --quiet --profile plain --out refused --layers 2 --hidden 64 --intermediate 96 --heads 4 --kv-heads 2 --vocab 101
[ -e "$scratch/refused" ] && echo "  (left behind in --out: $(ls -A "$scratch/refused" | tr '\n' ' '))"
probe $sim --seed -1
probe $tiny --seed -1
probe validate --quick --repeat 0
probe $tiny --offload lru-prefetch --expert-memory 1GB --offload-dir ''
probe plan hardware --model mixtral-8x7b --tpot-max 1 --prompt 100000000
probe model show --model "$(printf 'a\033[31mred')"
probe model show --model "/nonexistent/$(printf 'p%.0s' $(seq 300)).json"
probe sim offload --hardware rtx-3090 --policy fmoe --model two.json --accelerator-memory 8GB --tokens 4
