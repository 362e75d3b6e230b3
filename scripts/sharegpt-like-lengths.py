#!/usr/bin/env python3
"""Writes presets/workloads/sharegpt-like-lengths.csv: prompt and output token counts shaped like
the ShareGPT conversations serving benchmarks replay (python3 standard library only).

Shape: independent lognormals whose means are the ShareGPT means the vLLM paper reports (Kwon et
al., "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP'23,
Figure 11: input mean 161.31, output mean 337.99 tokens); the spreads (SIGMA 1.2 for prompts,
1.0 for outputs, of the underlying normal) are this script's choice, giving ShareGPT's long right
tails. A draw outside 4..1024 prompt tokens or with prompt + output over 2048 is drawn again, the
filter vLLM's benchmark_serving.py applies to ShareGPT (so the file's means are a little lower
than the targets: the header says what they came out at).

Usage: python3 scripts/sharegpt-like-lengths.py [--seed 38] [--rows 1000] [--out FILE]
"""
import argparse
import math
import os
import random
import sys

PROMPT_MEAN, PROMPT_SIGMA = 161.31, 1.2
OUTPUT_MEAN, OUTPUT_SIGMA = 337.99, 1.0


def lognormal(rng, mean, sigma):
    # MEAN is the distribution's mean: mu = ln(MEAN) - SIGMA^2 / 2 (serving/'s lognormal:MEAN,SIGMA).
    return max(1, round(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)))


def rows(seed, count):
    rng = random.Random(seed)
    result = []
    while len(result) < count:
        prompt = lognormal(rng, PROMPT_MEAN, PROMPT_SIGMA)
        output = lognormal(rng, OUTPUT_MEAN, OUTPUT_SIGMA)
        if 4 <= prompt <= 1024 and output >= 4 and prompt + output <= 2048:
            result.append((prompt, output))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--rows", type=int, default=1000)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "presets", "workloads",
                                                      "sharegpt-like-lengths.csv"))
    args = parser.parse_args()
    if args.rows < 1:
        sys.exit("--rows must be at least 1")
    table = rows(args.seed, args.rows)
    prompt_mean = sum(p for p, _ in table) / len(table)
    output_mean = sum(o for _, o in table) / len(table)
    header = [
        "# ShareGPT-like prompt and output token counts, made by scripts/sharegpt-like-lengths.py",
        f"# --seed {args.seed} --rows {args.rows}; independent lognormals, targets: prompt mean "
        f"{PROMPT_MEAN} SIGMA {PROMPT_SIGMA}, output mean {OUTPUT_MEAN} SIGMA {OUTPUT_SIGMA}",
        "# means from the vLLM paper (Kwon et al., SOSP'23, Figure 11, ShareGPT); SIGMAs chosen;",
        "# rows outside prompt 4..1024 or prompt + output > 2048 redrawn (vLLM's benchmark filter)",
        f"# this file: prompt mean {prompt_mean:.2f}, output mean {output_mean:.2f} tokens",
        "prompt_tokens,output_tokens",
    ]
    tmp = args.out + ".tmp"
    with open(tmp, "w") as out:
        out.write("\n".join(header) + "\n")
        for prompt, output in table:
            out.write(f"{prompt},{output}\n")
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
