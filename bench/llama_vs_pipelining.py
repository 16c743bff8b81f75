#!/usr/bin/env python3
"""baton against torch.distributed.pipelining on the llama model, in one run.

The model is baton's llama (nn/llama.h) at hidden 1024, 16 heads, 4 blocks (SwiGLU of 2816
units), vocabulary 256, context 32; batch 8 in 4 micro-batches of 2 sequences, SGD, 2 ranks x
1 thread, stages embedding + 2 blocks | 2 blocks + head, 1F1B on both sides:
  - baton train --model llama (local launcher, --transport auto: shared memory), on its
    default text; its boundaries carry the hidden states and the int64 positions;
  - bench/peers/llama_pipelining.py: the same model written in PyTorch, Schedule1F1B over
    gloo on the CPU (PyPI torch 2.x), on random tokens of the same shape (the data does not
    change the work), the same two tensors crossing.
Each round runs both, one after the other (baton first in odd rounds, pipelining first in even
ones); the script prints each round's median step times
(the first `--warmup` steps left out) and the ratio pipelining / baton, then the median ratio.

Usage: python3 bench/llama_vs_pipelining.py [--baton build/baton] [--steps 12] [--rounds 4]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = dict(layers=4, hidden=1024, heads=16, context=32, batch=8, microbatches=4)


def baton(binary, steps, warmup):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run(
            [binary, "train", "--model", "llama", *[f"--{k}={v}" for k, v in SIZES.items()],
             "--pp", "2", "--nproc", "2", "--threads", "1", "--schedule", "1f1b",
             "--optimizer", "sgd", "--lr", "0.01", "--steps", str(steps), "--log-every", "100000",
             "--metrics", metrics],
            check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][warmup:])


def pipelining(steps, warmup):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "peers", "llama_pipelining.py"),
         *[f"--{k}={v}" for k, v in SIZES.items()], "--steps", str(steps), "--warmup", str(warmup)],
        check=True, capture_output=True, text=True, timeout=1800).stdout
    return json.loads(out.strip().splitlines()[-1])["median_step_ms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args()
    print("load average before:", open("/proc/loadavg").read().strip(), flush=True)
    print(f"{'round':>5} {'baton ms':>9} {'pipelining ms':>13} {'ratio':>6}  (median ms per step)",
          flush=True)
    ratios = []
    for r in range(a.rounds):
        # Odd rounds run pipelining first, so a load that drifts favours neither.
        if r % 2 == 0:
            ours = baton(a.baton, a.steps, a.warmup)
            theirs = pipelining(a.steps, a.warmup)
        else:
            theirs = pipelining(a.steps, a.warmup)
            ours = baton(a.baton, a.steps, a.warmup)
        ratios.append(theirs / ours)
        load = open("/proc/loadavg").read().split()[0]
        print(f"{r + 1:>5} {ours:>9.1f} {theirs:>13.1f} {ratios[-1]:>5.2f}x  (load {load})",
              flush=True)
    print(f"median ratio (pipelining / baton): {statistics.median(ratios):.2f}x")
    print("load average after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
