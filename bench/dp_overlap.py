#!/usr/bin/env python3
"""How much of the data-parallel gradient all-reduce the overlap hides (issue 9).

For each configuration it runs `baton train --dp 2` twice on local ranks: with REDUCE_GRAD where
the lowering pass puts it (each stage's buckets right after its last backward on the rank,
overlapping whatever the rank computes after that) and with --overlap-grad-reduce off (every
REDUCE_GRAD at the end of the rank's actions). Each step's metrics line has reduce_wait_ms: how
long the step waited at its end for its all-reduces, the part no compute hid. Hidden = 1 - wait
with the overlap / wait without it (the all-reduce's whole time, as nothing runs beside it).

The model is an MLP of 8 Linears (in = hidden), SGD, 1 thread per rank; the gradient bytes per
rank are about 4 * hidden^2 * 8 / pp. Usage:
  python3 bench/dp_overlap.py [--baton build/baton] [--steps 30] [--hidden 1024]
"""
import argparse, json, os, statistics, subprocess, tempfile


def run(binary, a, pp, schedule, overlap):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [binary, "train", "--model", "mlp", "--layers", "8", "--hidden", str(a.hidden),
               "--in-features", str(a.hidden), "--classes", "10", "--batch", str(a.batch),
               "--microbatches", str(a.microbatches), "--dp", "2", "--pp", str(pp), "--nproc", str(2 * pp),
               "--threads", "1", "--schedule", schedule, "--optimizer", "sgd", "--lr", "0.001",
               "--steps", str(a.steps), "--log-every", "100000", "--metrics", metrics,
               "--overlap-grad-reduce", "on" if overlap else "off"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics) if '"reduce_wait_ms"' in line]
    rows = rows[len(rows) // 3:]  # past the warm-up
    return statistics.median(r["step_ms"] for r in rows), statistics.median(r["reduce_wait_ms"] for r in rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--microbatches", type=int, default=4)
    a = p.parse_args()
    print(f"mlp 8 x {a.hidden}, batch {a.batch} (2 replicas), m={a.microbatches}, {a.steps} steps, "
          f"medians past the first third; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'pp':>2} {'schedule':>11} | {'step on':>8} {'step off':>8} | {'wait on':>8} {'wait off':>8} | hidden")
    for pp, schedule in [(1, "1f1b"), (1, "interleaved"), (2, "1f1b"), (2, "interleaved")]:
        step_on, wait_on = run(a.baton, a, pp, schedule, True)
        step_off, wait_off = run(a.baton, a, pp, schedule, False)
        hidden = 1 - wait_on / wait_off if wait_off > 0 else float("nan")
        print(f"{pp:>2} {schedule:>11} | {step_on:8.2f} {step_off:8.2f} | {wait_on:8.2f} {wait_off:8.2f} | "
              f"{100 * hidden:5.1f}%", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
