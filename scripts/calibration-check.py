#!/usr/bin/env python3
"""Checks the calibrated-roofline cost source against the executor on this machine and writes
results/calibration-check.md: a quick profile of the default executor model (with the machine's
measured limits), the roofline's efficiencies fitted to it (moelab fit calibrate), then decode
step times predicted for shapes the profile never ran - batch sizes and a differently shaped
model - next to what `moelab run` measures for them.

Usage: scripts/calibration-check.py [moelab binary] (default build/cli/moelab); run on a quiet
machine. Every number in the output comes from the commands it lists."""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
moelab = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build/cli/moelab")
results = os.path.join(root, "results")
profile_name = "results/calibration-check-profile.json"
profile = os.path.join(root, profile_name)
work = tempfile.mkdtemp(prefix="moelab-calibration-")
os.chdir(root)  # the commands name results/ files relative to the repository
commands = []


def run(args, capture=True):
    commands.append("moelab " + " ".join(args))
    out = subprocess.run([moelab] + args, check=True, capture_output=capture, text=True)
    return out.stdout


# A quick profile of the default executor model, with the machine's measured limits.
run(["profile", "--quick", "--quiet", "--out", profile_name])
calibration = json.loads(run(["fit", "calibrate", "--profile", profile_name, "--json"]))
limits = json.load(open(profile))["machine"]["limits"]

# Models: the executor's default shape (what the profile measured) and one it did not measure.
shapes = {
    "default (profiled)": [],
    "16 experts top-4, width 2048, 6 layers": ["--layers", "6", "--experts", "16", "--top-k", "4", "--intermediate", "2048"],
}
base_shape = ["--layers", "8", "--hidden", "1024", "--intermediate", "3584", "--heads", "16", "--kv-heads", "4", "--head-dim", "64"]
prompt, tokens = 32, 64
context = prompt + tokens // 2  # the mean KV length over the decode steps
rows = []
for label, overrides in shapes.items():
    shape = list(base_shape)
    for i in range(0, len(overrides), 2):  # later options win in the executor; keep one of each
        if overrides[i] in shape:
            shape[shape.index(overrides[i]) + 1] = overrides[i + 1]
        else:
            shape += overrides[i:i + 2]
    spec = os.path.join(work, "model.json")
    run(["model", "show", "--model", "mixtral-8x7b"] + shape + ["--spec-out", spec])
    for batch in (1, 4, 16):
        plan = json.loads(run(["plan", "hardware", "--model", spec, "--batch", str(batch), "--prompt", str(prompt),
                               "--context", str(context), "--tpot-max", "1000", "--devices", "1", "--calibrate",
                               profile_name, "--json"]))
        machine = [r for r in plan["rows"] if r["hardware"].startswith("profile:")][0]
        measured = json.loads(run(["run", "--model", "mixtral-8x7b"] + shape +
                                  ["--workload", "decode", "--batch", str(batch), "--prompt", str(prompt),
                                   "--tokens", str(tokens), "--seed", "1", "--json"]))
        rows.append((label, batch, machine["tpot_s"], measured["tpot_s"]))

p = calibration["parameters"]
out = []
out.append("# The calibrated-roofline cost source against the executor (this machine)\n")
out.append("Command: `scripts/calibration-check.py` (writes `results/calibration-check-profile.json` and this "
           "file; the commands it ran are listed at the end). A measurement on this machine.\n")
out.append(f"Limits the profile measured: DRAM read {limits['dram_read_bytes_per_s'] / 1e9:.1f} GB/s, bf16 peak "
           f"{limits['peak_flops'].get('bf16', 0) / 1e9:.0f} GFLOP/s ({limits['threads']} threads).\n")
out.append("## Calibration (`moelab fit calibrate`)\n")
out.append("| parameter | fitted | std error |\n|---|---|---|")
for name in ("compute_efficiency", "memory_efficiency", "kernel_launch_s"):
    se = p[name]["std_error"]
    out.append(f"| {name} | {p[name]['value']:.4g} | {'-' if se is None else f'{se:.2g}'} |")
out.append("\n| operator | points | MAPE with assumed parameters (0.7, 0.8, 4 us) | MAPE calibrated |\n|---|---|---|---|")
for op in calibration["operators"]:
    out.append(f"| {op['operator']} | {op['points']} | {op['mape_assumed_percent']:.1f} % | {op['mape_calibrated_percent']:.1f} % |")
out.append(f"| all | {calibration['points']} | {calibration['mape_assumed_percent']:.1f} % | {calibration['mape_calibrated_percent']:.1f} % |")
for note in calibration["notes"]:
    out.append(f"\nNote: {note}")
out.append(f"\n## Decode step: predicted (calibrated roofline of the profiled machine) vs measured (`moelab run`)\n")
out.append(f"Prompt {prompt}, {tokens} output tokens (the prediction at the mean context {context}), the executor "
           "routing with its own gate (synthetic weights), the prediction assuming uniform routing (N(t)), seed 1. The second model was never profiled: its prediction rests on the "
           "calibration alone.\n")
out.append("| model | batch | predicted TPOT | measured TPOT | error |\n|---|---|---|---|---|")
for label, batch, predicted, measured in rows:
    out.append(f"| {label} | {batch} | {predicted * 1e3:.2f} ms | {measured * 1e3:.2f} ms | "
               f"{100 * (predicted - measured) / measured:+.1f} % |")
out.append("\n## Commands\n\n```sh")
out += commands
out.append("```\n")
text = "\n".join(out) + "\n"
with open(os.path.join(results, "calibration-check.md.tmp"), "w") as f:
    f.write(text)
os.replace(os.path.join(results, "calibration-check.md.tmp"), os.path.join(results, "calibration-check.md"))
print(text)
