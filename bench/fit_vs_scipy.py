#!/usr/bin/python3
"""Ceres (fit/) vs scipy.optimize.least_squares(method="trf") on the MoESD speedup fit.

The paper (formulas.md section 1, "Fit") fits its 10-parameter model with scipy's trust-region
reflective solver in about 0.114 s on 21 measurements chosen by stride 11 from 228 (6 K x 2 gamma
x 19 B). This script rebuilds that setting on synthetic data with planted parameters and times
both solvers on the same data, the same residuals, the same bounds and the same initial point:

 1. the 228-point grid (K in {1,2,4,6,8,16}, E = 64, gamma in {2,4}, 19 batch sizes 1..256,
    sigma from alpha = 0.8), stride 11 -> 21 points;
 2. bounds, ridge point and start 0 (the centre) from the C++ driver (`--bounds-only`), i.e. from
    the specs exactly as `moelab fit sd` computes them;
 3. planted parameters inside those bounds (as tests/fit/synthetic.h), speedups with 1 %
    multiplicative noise (numpy MT19937, seed 2024), written as CSV;
 4. Ceres: the driver times single-start solves (median of --repeat) from start 0;
 5. scipy: least_squares(method="trf") from the same start, bounds and residuals (a numpy copy of
    model/moesd_speedup.h, checked against Ceres by evaluating the cost at Ceres' optimum).

Only python3 + numpy + scipy from Debian (`apt-get install python3-scipy python3-numpy`; run
with /usr/bin/python3 so a pyenv python without them is not picked up).

usage: /usr/bin/python3 bench/fit_vs_scipy.py --driver build/bench/moelab_fit_bench
           [--repeat 50] [--out results/fit-vs-scipy.md] [--points-out results/fit-vs-scipy-points.csv]
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy
from scipy.optimize import least_squares

TOP_KS = [1, 2, 4, 6, 8, 16]
GAMMAS = [2, 4]
BATCHES = [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 192, 256]
EXPERTS = 64
STRIDE = 11
ALPHA = 0.8
NOISE = 0.01
SEED = 2024
MODEL, DRAFT, HARDWARE = "qwen2-57b-a14b", "qwen2-0.5b", "2xa100-80gb-sxm"


def sigma_for(gamma):
    return (1 - ALPHA ** (gamma + 1)) / (1 - ALPHA) / (gamma + 1)


def roofline_g(t, transition, growth):
    """G(t; P, s) of formulas.md section 1 (model/moesd_speedup.h RooflineG)."""
    ln_s = np.log(growth)
    with np.errstate(over="ignore"):
        below = np.exp(ln_s * t)
    above = np.exp(ln_s * transition) * (1.0 + ln_s * (t - transition))
    return np.where(t <= transition, below, above)


def moesd_speedup(p, batch, gamma, top_k, experts, sigma, ridge, algorithm1):
    """numpy copy of EvaluateMoesd (model/moesd_speedup.h), vectorised over points."""
    bias, k1, k2, k3, draft_bias, draft_k, reject_bias, reject_k, lam, growth = p
    transition = lam * ridge
    miss = (experts - top_k) / experts
    verify_tokens = batch * gamma
    n_ar = experts * (1.0 - miss ** batch)
    t_ar = batch * top_k / n_ar
    n_sd = experts * (1.0 - miss ** verify_tokens)
    t_sd = verify_tokens * top_k / n_sd
    g = lambda t: roofline_g(t, transition, growth)
    ar = bias + k1 * g(batch) + k2 * n_ar + k3 * g(t_ar)
    verify = bias + k1 * g(verify_tokens) + k2 * n_sd + k3 * g(t_sd)
    draft = draft_bias + draft_k * g(batch)
    reject = reject_bias + reject_k * batch
    denominator = draft + ar + verify + reject if algorithm1 else gamma * draft + verify + reject
    return sigma * (gamma + 1) * ar / denominator


def grid():
    rows = [(b, g, k, EXPERTS, sigma_for(g)) for k in TOP_KS for g in GAMMAS for b in BATCHES]
    assert len(rows) == 228
    return np.array(rows, dtype=float)


def write_csv(path, points, speedups):
    with open(path, "w") as f:
        f.write("batch,gamma,K,E,sigma,speedup\n")
        for (b, g, k, e, s), y in zip(points, speedups):
            f.write(f"{int(b)},{int(g)},{int(k)},{int(e)},{s!r},{y!r}\n")


def run_driver(driver, csv, repeat, bounds_only=False):
    command = [driver, "--measurements", csv, "--model", MODEL, "--draft", DRAFT,
               "--hardware", HARDWARE, "--denominator", "algorithm1", "--repeat", str(repeat)]
    if bounds_only:
        command.append("--bounds-only")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fit_vs_scipy: driver failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def planted(info):
    """Planted parameters inside the bounds, as tests/fit/synthetic.h PlantedSdParams."""
    s = info["scales"]
    lam = 0.6
    growth = np.exp(2.5 / (lam * info["ridge_point_tokens"]))
    return np.array([1.5 * s["t_dense_s"], 0.03 * s["t_dense_s"], 1.5 * s["t_expert_s"],
                     0.2 * s["t_dense_s"], 2.0 * s["t_draft_s"], 0.05 * s["t_draft_s"],
                     0.2 * s["t_reject_max_s"], 0.002 * s["t_reject_max_s"], lam, growth])


def time_scipy(residual, x0, lower, upper, repeat, **kwargs):
    seconds = []
    result = None
    for _ in range(repeat):
        begin = time.perf_counter()
        result = least_squares(residual, x0, bounds=(lower, upper), method="trf", **kwargs)
        seconds.append(time.perf_counter() - begin)
    return float(np.median(seconds)), float(np.min(seconds)), result


def lscpu_model():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def dpkg_version(package):
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", default="build/bench/moelab_fit_bench")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--out", default="")
    parser.add_argument("--points-out", default="")
    args = parser.parse_args()

    load_before = os.getloadavg()
    all_points = grid()
    chosen = all_points[::STRIDE]
    assert len(chosen) == 21
    with tempfile.TemporaryDirectory() as tmp:
        csv = args.points_out or os.path.join(tmp, "points.csv")
        write_csv(csv, chosen, np.ones(len(chosen)))  # speedups do not enter the bounds
        info = run_driver(args.driver, csv, 1, bounds_only=True)
        ridge = info["ridge_point_tokens"]
        truth = planted(info)
        lower = np.array([v if v is not None else -np.inf for v in info["lower"]])
        upper = np.array([v if v is not None else np.inf for v in info["upper"]])
        assert np.all(truth >= lower) and np.all(truth <= upper), "planted parameters outside the bounds"
        rng = np.random.RandomState(SEED)
        columns = [all_points[:, i] for i in range(5)]
        clean = moesd_speedup(truth, *columns, ridge, True)
        noisy = clean * (1.0 + NOISE * rng.standard_normal(len(clean)))
        y = noisy[::STRIDE]
        write_csv(csv, chosen, y)
        ceres = run_driver(args.driver, csv, args.repeat)

    x0 = np.array(ceres["initial_params"])
    scale = np.array(ceres["scale"])
    cols = [chosen[:, i] for i in range(5)]

    def residual(p):
        return moesd_speedup(p, *cols, ridge, True) - y

    def residual_scaled(x):
        return residual(x * scale)

    def cost(p):
        r = residual(np.asarray(p))
        return 0.5 * float(r @ r)

    # Same residuals: the numpy model at Ceres' optimum must reproduce Ceres' final cost.
    run = ceres["runs"][0]
    cost_check = abs(cost(run["params"]) / run["final_cost"] - 1)
    assert cost_check < 1e-9, f"numpy and C++ residuals disagree (relative cost difference {cost_check})"

    variants = [
        ("scipy defaults (the paper's call)", residual, x0, lower, upper, {}),
        ("scipy x_scale='jac'", residual, x0, lower, upper, {"x_scale": "jac"}),
        ("scipy on Ceres' scaled coordinates", residual_scaled, x0 / scale, lower / scale, upper / scale, {}),
    ]
    scipy_rows = []
    for label, fun, start, lo, hi, kwargs in variants:
        median_s, min_s, result = time_scipy(fun, start, lo, hi, args.repeat, **kwargs)
        params = result.x * (scale if fun is residual_scaled else 1.0)
        scipy_rows.append({"label": label, "median_s": median_s, "min_s": min_s, "cost": cost(params),
                           "nfev": int(result.nfev), "status": int(result.status),
                           "message": result.message, "params": params})

    load_after = os.getloadavg()
    command = " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv)
    lines = []
    lines.append("# Ceres vs scipy on the MoESD fit (21 points, stride 11 of 228)\n")
    lines.append(f"Command: `{command}` (from the repository root; the driver is "
                 "`bench/fit_vs_scipy_driver.cc`, target `moelab_fit_bench`, Release build)\n")
    lines.append(f"Machine: {lscpu_model()}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, "
                 f"numpy {np.__version__}, scipy {scipy.__version__}, Ceres {dpkg_version('libceres-dev')}\n")
    lines.append(f"Data: {MODEL} target, {DRAFT} draft on {HARDWARE} (bounds from the specs); "
                 f"K in {TOP_KS}, E = {EXPERTS}, gamma in {GAMMAS}, B in {BATCHES}; sigma from alpha = {ALPHA}; "
                 f"planted parameters as tests/fit/synthetic.h; {NOISE:.0%} multiplicative noise (numpy "
                 f"RandomState({SEED})); points 0, 11, ..., 220. Denominator: Algorithm 1. Every solve is single-start from "
                 f"the same point (fit/'s start 0), same bounds, same residuals (numpy copy of "
                 f"model/moesd_speedup.h; its cost at Ceres' optimum matches Ceres' to {cost_check:.1e}). "
                 f"Times: median and minimum of {args.repeat} runs each, wall clock around the whole solve. "
                 f"Load average (1 min) {load_before[0]:.2f} before and {load_after[0]:.2f} after on "
                 f"{os.cpu_count()} CPUs: the machine was shared, so medians carry contention and the "
                 f"minima are the cleaner estimate of each solver's own time.\n")
    lines.append("| solver | tolerances | median time | min time | final cost (1/2 sum r^2) | evaluations | status |")
    lines.append("|---|---|---|---|---|---|---|")
    for r in ceres["runs"]:
        t = r["tolerances"]
        lines.append(f"| Ceres `{r['label']}` (autodiff Jacobian) | f {t['function']:g}, x {t['parameter']:g}, "
                     f"g {t['gradient']:g} | {r['median_s']*1e3:.3f} ms | {r['min_s']*1e3:.3f} ms | "
                     f"{r['final_cost']:.6e} | {r['iterations']} iterations | {r['termination']} |")
    for r in scipy_rows:
        lines.append(f"| {r['label']} (2-point Jacobian) | ftol, xtol, gtol 1e-08 | {r['median_s']*1e3:.3f} ms | "
                     f"{r['min_s']*1e3:.3f} ms | {r['cost']:.6e} | {r['nfev']} function evaluations | "
                     f"status {r['status']}: {r['message']} |")
    lines.append("")
    lines.append("Ratios (time: scipy / Ceres; cost: Ceres / scipy, <= 1 means Ceres equal or lower):\n")
    lines.append("| scipy variant | vs Ceres | time ratio (medians) | time ratio (minima) | cost ratio |")
    lines.append("|---|---|---|---|---|")
    for s in scipy_rows:
        for r in ceres["runs"]:
            lines.append(f"| {s['label']} | `{r['label']}` | {s['median_s'] / r['median_s']:.1f}x | "
                         f"{s['min_s'] / r['min_s']:.1f}x | {r['final_cost'] / s['cost']:.6f} |")
    full = ceres["full_fit"]
    lines.append("")
    lines.append(f"For context, the whole `moelab fit sd` computation on these 21 points ({full['starts']} starts, "
                 f"{full['starts_converged']} converged; covariance; 21 leave-one-out refits) takes "
                 f"{full['median_s']*1e3:.2f} ms (median), final cost {full['final_cost']:.6e}. The paper reports "
                 f"about 0.114 s for its scipy fit on its machine.\n")
    names = ceres["names"]
    lines.append("Parameters (planted, Ceres library run, scipy defaults):\n")
    lines.append("| parameter | planted | Ceres | scipy defaults | lower | upper |")
    lines.append("|---|---|---|---|---|---|")
    for i, name in enumerate(names):
        up = "inf" if not np.isfinite(upper[i]) else f"{upper[i]:.4g}"
        lines.append(f"| {name} | {truth[i]:.4g} | {ceres['runs'][0]['params'][i]:.4g} | "
                     f"{scipy_rows[0]['params'][i]:.4g} | {lower[i]:.4g} | {up} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
