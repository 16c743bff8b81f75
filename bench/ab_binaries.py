#!/usr/bin/env python3
"""Two baton binaries on the same training run, alternated, in one run.

For a change to the runtime's hot path: runs `baton train` from binary A and binary B in turn
(A, B, A, B, ...) on the same model and schedule, reads each run's median step time from its
--metrics file (the first 5 steps dropped), and prints both medians over the rounds and B/A.
Alternating puts both under the same load; the load average is printed with the figures.

Usage: python3 bench/ab_binaries.py OLD_BATON NEW_BATON [--rounds 5] [--hidden 16]
       [--microbatches 32] [--steps 60] [--schedule 1f1b]
"""
import argparse, json, os, statistics, subprocess, tempfile


def step_ms(binary, a):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run(
            [binary, "train", "--model", "mlp", "--layers", "8", "--hidden", str(a.hidden),
             "--in-features", str(a.hidden), "--classes", "10", "--batch", "256",
             "--microbatches", str(a.microbatches), "--pp", "2", "--nproc", "2", "--threads", "1",
             "--schedule", a.schedule, "--optimizer", "sgd", "--lr", "0.01", "--steps",
             str(a.steps), "--log-every", "100000", "--metrics", metrics],
            check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][5:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--microbatches", type=int, default=32)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--schedule", default="1f1b")
    a = p.parse_args()
    old, new = [], []
    for _ in range(a.rounds):
        old.append(step_ms(a.old, a))
        new.append(step_ms(a.new, a))
    mo, mn = statistics.median(old), statistics.median(new)
    print(f"hidden {a.hidden}, m = {a.microbatches}, {a.schedule}, {a.rounds} rounds: "
          f"A {mo:.2f} ms, B {mn:.2f} ms, B/A {mn / mo:.3f} "
          f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
