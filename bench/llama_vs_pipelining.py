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

With --best, each round runs four schedules on each side at the same model and micro-batches
(baton: 1f1b, zb-h1, interleaved-zb and zb-v; pipelining: Schedule1F1B,
ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble and ScheduleZBVZeroBubble, the
multi-stage ones at 2 stages a rank on the same uniform split of the layers) and compares each
side's fastest: what a user of either gets at its best.

Usage: python3 bench/llama_vs_pipelining.py [--baton build/baton] [--steps 12] [--rounds 4] [--best]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = dict(layers=4, hidden=1024, heads=16, context=32, batch=8, microbatches=4)


# --best: each side's schedules for 2 ranks (baton's names; torch.distributed.pipelining's
# Schedule1F1B, ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble as
# the peer names them), the multi-stage ones at 2 stages a rank.
BATON_SCHEDULES = ["1f1b", "zb-h1", "interleaved-zb", "zb-v"]
PEER_SCHEDULES = ["1f1b", "interleaved-1f1b", "interleaved-zb", "zbv"]


def baton(binary, steps, warmup, schedule="1f1b"):
    extra = ["--virtual", "2"] if schedule == "interleaved-zb" else []
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run(
            [binary, "train", "--model", "llama", *[f"--{k}={v}" for k, v in SIZES.items()],
             "--pp", "2", "--nproc", "2", "--threads", "1", "--schedule", schedule, *extra,
             "--optimizer", "sgd", "--lr", "0.01", "--steps", str(steps), "--log-every", "100000",
             "--metrics", metrics],
            check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][warmup:])


def pipelining(steps, warmup, schedule="1f1b"):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "peers", "llama_pipelining.py"),
         *[f"--{k}={v}" for k, v in SIZES.items()], "--steps", str(steps), "--warmup", str(warmup),
         "--schedule", schedule],
        check=True, capture_output=True, text=True, timeout=1800).stdout
    return json.loads(out.strip().splitlines()[-1])["median_step_ms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--best", action="store_true",
                   help="each side's fastest schedule per round instead of 1F1B on both")
    a = p.parse_args()
    print("load average before:", open("/proc/loadavg").read().strip(), flush=True)
    if a.best:
        return best(a)
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


def best(a):
    """Each round runs every schedule of both sides, alternating the sides, and compares each
    side's fastest."""
    ratios = []
    for r in range(a.rounds):
        ours, theirs = {}, {}
        for mine, peer in zip(BATON_SCHEDULES, PEER_SCHEDULES):
            if r % 2 == 0:
                ours[mine] = baton(a.baton, a.steps, a.warmup, mine)
                theirs[peer] = pipelining(a.steps, a.warmup, peer)
            else:
                theirs[peer] = pipelining(a.steps, a.warmup, peer)
                ours[mine] = baton(a.baton, a.steps, a.warmup, mine)
        b, t = min(ours, key=ours.get), min(theirs, key=theirs.get)
        ratios.append(theirs[t] / ours[b])
        load = open("/proc/loadavg").read().split()[0]
        print(f"round {r + 1}: baton " + ", ".join(f"{k} {v:.1f}" for k, v in ours.items()) +
              "; pipelining " + ", ".join(f"{k} {v:.1f}" for k, v in theirs.items()) +
              f"; fastest {b} {ours[b]:.1f} vs {t} {theirs[t]:.1f} ms: {ratios[-1]:.2f}x  "
              f"(load {load})", flush=True)
    print(f"median ratio (fastest pipelining / fastest baton): {statistics.median(ratios):.2f}x")
    print("load average after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
