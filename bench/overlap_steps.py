#!/usr/bin/env python3
"""Overlapping steps (issue 10): steady-state step time with and without a barrier between steps.

For each schedule (1f1b as the control, zb-h2, zb-v) and pp (2, 4) it runs `baton train` twice on
local ranks, once as it runs by default (steps overlap: no barrier, the loss reaches every rank by
point-to-point) and once with --step-barrier (every step ends with a blocking all-reduce of the
loss, baton before issue 10). The measured steady step is rank 0's mean time from step to step
over the second half of the run (the metrics' elapsed_ms). --compare-sim feeds the simulator the
per-stage F, B, I, W times measured in the last step and a probed link; the table shows its
steady_step (steps back to back, no barrier) and makespan (one step alone, what a barrier costs).

The model is an MLP (in-features = hidden), SGD, 1 thread per rank. Usage:
  python3 bench/overlap_steps.py [--baton build/baton] [--steps 60] [--hidden 512] [--pp 2 4]
"""
import argparse, json, os, re, statistics, subprocess, tempfile


def run(binary, schedule, pp, barrier, a):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [binary, "train", "--model", "mlp", "--layers", str(a.layers), "--hidden", str(a.hidden),
               "--in-features", str(a.hidden), "--classes", "10", "--batch", str(a.batch),
               "--microbatches", str(a.microbatches), "--pp", str(pp), "--nproc", str(pp),
               "--threads", "1", "--schedule", schedule, "--optimizer", "sgd", "--lr", "0.001",
               "--steps", str(a.steps), "--log-every", "100000", "--metrics", metrics, "--compare-sim"]
        if barrier:
            cmd.append("--step-barrier")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows = [json.loads(line) for line in open(metrics) if '"elapsed_ms"' in line]
    half = len(rows) // 2
    steady = (rows[-1]["elapsed_ms"] - rows[half]["elapsed_ms"]) / (len(rows) - 1 - half)
    median = statistics.median(r["step_ms"] for r in rows[half:])
    sim = re.search(r"simulated steady step ([0-9.]+) ms .*makespan ([0-9.]+) ms", out)
    return steady, median, (float(sim.group(1)), float(sim.group(2))) if sim else (float("nan"),) * 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--pp", type=int, nargs="+", default=[2, 4])
    p.add_argument("--schedules", nargs="+", default=["1f1b", "zb-h2", "zb-v"])
    a = p.parse_args()
    print(f"mlp {a.layers} layers, hidden {a.hidden}, batch {a.batch}, m={a.microbatches}, "
          f"{a.steps} steps, 1 thread/rank, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'schedule':>8} {'pp':>2} | {'overlap ms':>10} {'barrier ms':>10} {'gain':>6} | "
          f"{'sim steady':>10} {'sim makespan':>12} {'sim gain':>8}")
    for pp in a.pp:
        for schedule in a.schedules:
            ov, _, (steady, makespan) = run(a.baton, schedule, pp, False, a)
            ba, _, _ = run(a.baton, schedule, pp, True, a)
            print(f"{schedule:>8} {pp:>2} | {ov:10.2f} {ba:10.2f} {100 * (1 - ov / ba):5.1f}% | "
                  f"{steady:10.2f} {makespan:12.2f} {100 * (1 - steady / makespan):7.1f}%", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
