#!/usr/bin/env bash
# moelab sim ep on EPS-MoE's settings (seed 001): DeepSeek-V2 on 8 x H800 (attention DP + MoE EP,
# device-limited routing M = 3), Mixtral-8x7B on 4 x H800 and DBRX on 8 x H800 (attention TP +
# MoE EP), bf16 prefill. Run through scripts/record.sh, which sets RECORD:
#   scripts/record.sh results/sim-ep-paper-2026-12-03 bash results/sim-ep-paper-2026-12-03.sh
# For each case: the pipeline (auto N, kernels by load) with its own N = 1 (gain_vs_no_pipeline),
# N = 1 with GroupGemm only (a fused-MoE baseline: the pipeline's gain plus the GEMM switch), and
# for the TP+EP models vLLM's TP+TP (--ep 1 --tp D, GroupGemm, N = 1), EPS-MoE's baseline.
set -euo pipefail
moelab=${MOELAB:-build/cli/moelab}
out=${RECORD:?run through scripts/record.sh}
run() {  # name, then sim ep arguments
  local name=$1
  shift
  "$moelab" sim ep "$@" --workload prefill --json --out "$out/$name.json"
}
for tokens in 1024 2048 4096; do
  common=(--model deepseek-v2 --hardware 8xh800 --batch 8 --tokens "$tokens" --device-limit 3)
  run "deepseek-v2-s$tokens-pipeline" "${common[@]}" --ep 8 --ep-chunks auto
  run "deepseek-v2-s$tokens-group-n1" "${common[@]}" --ep 8 --ep-chunks 1 --gemm group
  common=(--model mixtral-8x7b --hardware 4xh800 --batch 4 --tokens "$tokens")
  run "mixtral-8x7b-s$tokens-pipeline" "${common[@]}" --ep 4 --attention tensor-parallel --ep-chunks auto
  run "mixtral-8x7b-s$tokens-group-n1" "${common[@]}" --ep 4 --attention tensor-parallel --ep-chunks 1 --gemm group
  run "mixtral-8x7b-s$tokens-tp-tp" "${common[@]}" --ep 1 --tp 4 --ep-chunks 1 --gemm group
  common=(--model dbrx --hardware 8xh800 --batch 4 --tokens "$tokens")
  run "dbrx-s$tokens-pipeline" "${common[@]}" --ep 8 --attention tensor-parallel --ep-chunks auto
  run "dbrx-s$tokens-group-n1" "${common[@]}" --ep 8 --attention tensor-parallel --ep-chunks 1 --gemm group
  run "dbrx-s$tokens-tp-tp" "${common[@]}" --ep 1 --tp 8 --ep-chunks 1 --gemm group
done
# The table (stdout.txt): per case the pipeline's N, tokens/s, its gain over its own N = 1, over
# GroupGemm N = 1, and over TP+TP where there is one.
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None
print("| model | node | B x S | N | tokens/s (pipeline) | tokens/s (own N=1) | gain vs own N=1 | gain vs GroupGemm N=1 | gain vs TP+TP | layout switch alone (GroupGemm N=1 vs TP+TP) | GEMM crossover (tokens/expert) | closed-form N |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for model, node in (("deepseek-v2", "8xh800"), ("mixtral-8x7b", "4xh800"), ("dbrx", "8xh800")):
    for tokens in (1024, 2048, 4096):
        p = load(f"{model}-s{tokens}-pipeline")
        g = load(f"{model}-s{tokens}-group-n1")
        t = load(f"{model}-s{tokens}-tp-tp")
        vs_tp = f"{p['tokens_per_s'] / t['tokens_per_s']:.3f}" if t else "-"
        layout = f"{g['tokens_per_s'] / t['tokens_per_s']:.3f}" if t else "-"
        print(f"| {model} | {node} | {p['workload']['batch']} x {tokens} | {p['chunks']} | "
              f"{p['tokens_per_s']:.0f} | {p['no_pipeline']['tokens_per_s']:.0f} | "
              f"{p['gain_vs_no_pipeline']:.3f} | "
              f"{p['tokens_per_s'] / g['tokens_per_s']:.3f} | {vs_tp} | {layout} | "
              f"{p['gemm']['crossover_tokens_per_expert']} | {p['closed_form']['optimal_chunks']} |")
PY
