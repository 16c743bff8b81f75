#!/usr/bin/env python3
"""Compute parity with plain PyTorch (issue 6): each zoo model trained by baton in one process at
1 thread (pp = 1, m = 1, no --nproc) against the same model written in PyTorch (bench/peers/zoo.py)
on the same LibTorch 1.13 (Debian's python3-torch, run as /usr/bin/python3), also at 1 thread.

Both sides use Adam, lr 0.001 (baton's default optimizer) and time the same window: forward,
loss, backward and optimizer step (baton's `step_ms`; zero_grad and making the batch fall outside
it on both sides). Each side runs 5 warm-up steps and then --steps timed ones; `ms` is the median
wall time of a timed step. ratio = PyTorch ms / baton ms: >= 1 means baton is at least as fast.

Other work on a small machine moves wall times by tens of percent, so the table also shows CPU time per
step, which it moves much less: the process's CPU time over the timed steps (whole steps: batch,
zero_grad and the timed window; baton's read off /proc as its metrics lines appear, the peer's
with time.process_time) divided by --steps.
With --rounds R the two sides alternate R times per model and each column is the median of R.

Configs: mlp 8 Linears, hidden 1024, in 1024, 10 classes, batch 256 (synthetic data);
cnn the Fashion-MNIST CNN, batch 64; gpt 4 blocks, hidden 256, 4 heads, context 64, vocab 256,
batch 64.

Usage: python3 bench/compute_parity.py [--baton build/baton] [--steps 30] [--rounds 1]
       [--models mlp,cnn,gpt]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import pipeline_vs_peers  # blas_env(): the peer on baton's OpenBLAS kernels

WARMUP = 5
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "zoo.py")
PEER_PYTHON = "/usr/bin/python3"  # Debian's python3-torch: the LibTorch baton links
CONFIGS = {
    "mlp": ["--layers", "8", "--hidden", "1024", "--in-features", "1024", "--classes", "10",
            "--batch", "256"],
    "cnn": ["--batch", "64"],
    "gpt": ["--layers", "4", "--hidden", "256", "--heads", "4", "--context", "64",
            "--batch", "64"],
}
OPTIMIZER = ["--optimizer", "adam", "--lr", "0.001"]


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def baton(binary, model, steps):
    """(median step ms, CPU ms per step). The CPU time is read off /proc when the metrics file
    gains the last warm-up step's line and the last step's line."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        child = subprocess.Popen([binary, "train", "--model", model, *CONFIGS[model], *OPTIMIZER,
                                  "--pp", "1", "--microbatches", "1", "--threads", "1",
                                  "--steps", str(WARMUP + steps), "--metrics", metrics,
                                  "--log-every", "100000"], stdout=subprocess.DEVNULL)
        marks, size, exited = {}, -1, False
        while len(marks) < 2 and not exited:
            # Checked before the file, without reaping: a child that ends right after its last
            # line still has its /proc entry and CPU time.
            exited = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            if os.path.exists(metrics) and os.path.getsize(metrics) != size:
                size = os.path.getsize(metrics)
                with open(metrics) as f:
                    done = sum(1 for line in f if line.endswith("\n") and '"step_ms"' in line)
                for mark in (WARMUP, WARMUP + steps):
                    if done >= mark and mark not in marks:
                        marks[mark] = cpu_seconds(child.pid)
            time.sleep(0.002)
        if child.wait() != 0:
            raise SystemExit(f"compute_parity.py: {binary} train --model {model} exited with "
                             f"{child.returncode}")
        with open(metrics) as f:
            rows = [json.loads(line) for line in f]
    step_ms = statistics.median([r["step_ms"] for r in rows if "step_ms" in r][WARMUP:])
    return step_ms, (marks[WARMUP + steps] - marks[WARMUP]) * 1000 / steps


ENV = None  # pipeline_vs_peers.blas_env(), set by main()


def pytorch(model, steps):
    """(median step ms, CPU ms per step)."""
    out = subprocess.run([PEER_PYTHON, PEER, "--model", model, *CONFIGS[model], *OPTIMIZER,
                          "--threads", "1", "--warmup", str(WARMUP), "--steps", str(steps)],
                         check=True, capture_output=True, text=True, env=ENV).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["median_step_ms"], result["cpu_ms_per_step"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", default="build/baton")
    ap.add_argument("--steps", type=int, default=30, help="timed steps, after 5 warm-up steps")
    ap.add_argument("--rounds", type=int, default=1, help="baton/PyTorch runs per model, alternated")
    ap.add_argument("--models", default="mlp,cnn,gpt")
    args = ap.parse_args()
    global ENV
    ENV = pipeline_vs_peers.blas_env(args.baton)
    for model in args.models.split(","):
        if model not in CONFIGS:
            raise SystemExit(f"compute_parity.py: unknown model '{model}': known are "
                             f"{', '.join(CONFIGS)}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{'model':6} {'baton ms':>9} {'PyTorch ms':>11} {'ratio':>6}   "
          f"{'baton CPU ms':>12} {'PyTorch CPU ms':>14} {'CPU ratio':>9}")
    for model in args.models.split(","):
        runs = [(baton(args.baton, model, args.steps), pytorch(model, args.steps))
                for _ in range(args.rounds)]
        ours, theirs, ours_cpu, theirs_cpu = (
            statistics.median(values) for values in
            zip(*[(b[0], p[0], b[1], p[1]) for b, p in runs]))
        print(f"{model:6} {ours:9.1f} {theirs:11.1f} {theirs / ours:5.2f}x   "
              f"{ours_cpu:12.1f} {theirs_cpu:14.1f} {theirs_cpu / ours_cpu:8.2f}x", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
