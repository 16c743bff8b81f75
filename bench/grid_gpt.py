#!/usr/bin/env python3
"""The gpt model on data x pipeline grids of 2 and 4 ranks, measured against predicted (issue 9).

Profiles the model once (`baton train --profile-out`, one rank, the run's micro-batch), asks
`baton plan --profile --json` for its prediction of each grid (1f1b, t = 1, no ZeRO, with the
micro-batch size and count the plan chose for that grid: the planner simulates one replica's pipeline with the profiled costs, the dp
all-reduce and the optimizer step), then trains each grid with `baton train --dp D --pp P`
(1 thread per rank) and prints, per grid: the median measured step time against the predicted
one, and the most loaded rank's measured memory (parameters + gradients + optimizer state + peak
activations, from the run's memory report) against the plan's memory per GPU (its most loaded
rank's).

The machine has 2 cores: 4 ranks run two to a core, so the 4-rank grids measure about twice the
time a 4-device machine would (the plan assumes one device per rank); the 2-rank grids are the
like-for-like comparison.

Usage: python3 bench/grid_gpt.py [--baton build/baton] [--steps 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MODEL = ["--model", "gpt", "--layers", "4", "--hidden", "128", "--heads", "4", "--context", "64"]
BATCH = 16
MICROBATCHES = 4


def sh(cmd):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def measure(baton, tmp, p, d, m, steps):
    metrics = os.path.join(tmp, f"m{p}{d}.jsonl")
    sh([baton, "train", *MODEL, "--batch", str(BATCH), "--microbatches", str(m),
        "--pp", str(p), "--dp", str(d), "--nproc", str(p * d), "--threads", "1", "--steps",
        str(steps), "--log-every", "1000", "--metrics", metrics])
    rows = [json.loads(line) for line in open(metrics)]
    step_ms = statistics.median([r["step_ms"] for r in rows if "step_ms" in r][3:])
    final = [r for r in rows if r.get("final")][0]
    # The plan's memory per GPU is its most loaded rank's: compare with the largest measured.
    memory = max(m["parameter_bytes"] + m["gradient_bytes"] + m["optimizer_bytes"] + m["peak_activation_bytes"]
                 for m in final["memory"])
    return step_ms, memory


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", default="build/baton")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    baton = os.path.abspath(args.baton)
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile.json")
        sh([baton, "train", *MODEL, "--batch", str(BATCH), "--microbatches", str(MICROBATCHES),
            "--pp", "1", "--threads", "1", "--profile-out", profile])
        print(f"{'ranks':>5} {'p':>2} {'d':>2} {'b':>3} {'m':>3} {'predicted_ms':>12} {'measured_ms':>12} "
              f"{'meas/pred':>9} {'pred_mem_kB':>11} {'meas_mem_kB':>11} {'meas/pred':>9}")
        for ranks, grids in ((2, [(2, 1), (1, 2)]), (4, [(4, 1), (2, 2), (1, 4)])):
            # This machine's Gloo link (bench/plan_calibration.py says where the figures come from).
            plans = json.loads(sh([baton, "plan", "--profile", profile, "--gpus", str(ranks),
                                   "--gpus-per-node", str(ranks), "--gpu-memory-gb", "64",
                                   "--intra-node-gbps", "19", "--intra-node-latency-us", "50",
                                   "--batch", str(BATCH), "--json"]))["plans"]
            for p, d in grids:
                match = [e for e in plans if e["t"] == 1 and e["p"] == p and e["d"] == d and
                         e["schedule"] == "1f1b" and e.get("zero", 0) == 0 and
                         not e.get("recompute", False)]
                if not match:
                    print(f"{ranks:>5} {p:>2} {d:>2}   (no plan entry)")
                    continue
                e = match[0]
                step_ms, memory = measure(baton, tmp, p, d, e["microbatches"], args.steps)
                pred_ms, pred_mem = e["step_s"] * 1e3, e["memory_gb"] * 1e9
                print(f"{ranks:>5} {p:>2} {d:>2} {e['microbatch']:>3} {e['microbatches']:>3} {pred_ms:>12.2f} {step_ms:>12.2f} "
                      f"{step_ms / pred_ms:>9.2f} {pred_mem / 1e3:>11.1f} {memory / 1e3:>11.1f} "
                      f"{memory / pred_mem:>9.2f}", flush=True)
    print("load average after:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
