#!/usr/bin/env python3
"""Pipeline vs single process on the issue's MLP: 8 layers, hidden 1024, batch 256.

Runs, in one go: a single process with 1 thread and with 2 threads (pp=1, m=1), then 2 ranks x 1
thread for GPipe and 1F1B at m in {4, 8, 16}. Prints samples/s, the speedups over both single
process runs, the efficiency (simulated step time from the measured stage costs / measured step
time, from --compare-sim) and measured vs simulated peak activation bytes.

Usage: python3 bench/pipeline_speedup.py [--baton build/baton] [--steps 30]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

MODEL = ["--model", "mlp", "--layers", "8", "--hidden", "1024", "--in-features", "1024",
         "--classes", "10", "--batch", "256", "--optimizer", "sgd", "--lr", "0.01"]


def run(baton, steps, extra):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = subprocess.run([baton, "train", *MODEL, "--steps", str(steps), "--metrics", metrics,
                              "--log-every", "1000", *extra],
                             check=True, capture_output=True, text=True).stdout
        rows = [json.loads(line) for line in open(metrics)]
    steps_ms = [r["step_ms"] for r in rows if "step_ms" in r][3:]  # skip warm-up
    step_ms = statistics.median(steps_ms)
    result = {"step_ms": step_ms, "samples_per_s": 256 * 1000.0 / step_ms}
    m = re.search(r"simulated ([0-9.]+) ms \(efficiency ([0-9.]+)%\)", out)
    if m:
        result["simulated_ms"] = float(m.group(1))
        result["efficiency_last_step"] = float(m.group(2)) / 100
    m = re.search(r"peak activation bytes on rank 0: measured ([0-9]+), simulated ([0-9]+)", out)
    if m:
        result["peak_measured"] = int(m.group(1))
        result["peak_simulated"] = int(m.group(2))
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", default="build/baton")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    single1 = run(args.baton, args.steps, ["--pp", "1", "--nproc", "1", "--schedule", "gpipe",
                                           "--microbatches", "1", "--threads", "1"])
    single2 = run(args.baton, args.steps, ["--pp", "1", "--nproc", "1", "--schedule", "gpipe",
                                           "--microbatches", "1", "--threads", "2"])
    print(f"single process, 1 thread : {single1['samples_per_s']:8.1f} samples/s "
          f"({single1['step_ms']:.1f} ms/step)")
    print(f"single process, 2 threads: {single2['samples_per_s']:8.1f} samples/s "
          f"({single2['step_ms']:.1f} ms/step)")
    print(f"{'schedule':9} {'m':>3} {'samples/s':>10} {'vs 1 thr':>9} {'vs 2 thr':>9} "
          f"{'sim ms':>8} {'meas ms':>8} {'efficiency':>10} {'peak act meas/sim':>20}")
    for schedule in ["gpipe", "1f1b"]:
        for m in [4, 8, 16]:
            r = run(args.baton, args.steps, ["--pp", "2", "--nproc", "2", "--schedule", schedule,
                                             "--microbatches", str(m), "--threads", "1",
                                             "--compare-sim"])
            eff = r["simulated_ms"] / r["step_ms"]
            print(f"{schedule:9} {m:>3} {r['samples_per_s']:10.1f} "
                  f"{r['samples_per_s'] / single1['samples_per_s']:8.2f}x "
                  f"{r['samples_per_s'] / single2['samples_per_s']:8.2f}x "
                  f"{r['simulated_ms']:8.1f} {r['step_ms']:8.1f} {eff:9.1%} "
                  f"{r['peak_measured']:>10}/{r['peak_simulated']:<10}")


if __name__ == "__main__":
    main()
