#!/usr/bin/env python3
"""What keeping freed memory in the process gains a training step, in one run
(baton/core/allocator.h).

`baton` raises glibc's mmap and trim thresholds first in main(), so the blocks a step frees are
there for the next step instead of being mapped and faulted in again. A GLIBC_TUNABLES that names
any glibc.malloc tunable leaves glibc's defaults in place; this bench sets
`glibc.malloc.check=0` (a no-op) for that. Alternating the two each round, it runs:
  - an MLP of 8 x 512 on one rank, Adam, batch 256 in 8 micro-batches (the planner
    calibration's reference, bench/plan_calibration.py);
  - baton's llama step (bench/llama_vs_pipelining.py's workload, 2 ranks, 1F1B, SGD);
  - `baton train --profile-out` of that MLP, whose optimizer figure is Adam's step over the
    model's parameter bytes, timed in the process (the median of 5);
and prints each median step, each optimizer step, the ratios and the minor page faults of each
run.

Usage: python3 bench/malloc_thresholds.py [--baton build/baton] [--rounds 3]
"""
import argparse, json, os, resource, statistics, subprocess, tempfile

from llama_vs_pipelining import SIZES  # the llama workload, shared

MLP = ["--model", "mlp", "--layers", "8", "--hidden", "512", "--batch", "256", "--microbatches",
       "8", "--pp", "1", "--threads", "1", "--steps", "30"]
LLAMA = ["--model", "llama", *[f"--{k}={v}" for k, v in SIZES.items()], "--pp", "2", "--nproc",
         "2", "--threads", "1", "--schedule", "1f1b", "--optimizer", "sgd", "--lr", "0.01",
         "--steps", "10"]
DEFAULTS = "glibc.malloc.check=0"  # a malloc tunable that changes nothing: baton keeps glibc's


def env_with(defaults):
    """The environment with glibc's defaults forced, or baton's thresholds (no GLIBC_TUNABLES)."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if defaults:
        env["GLIBC_TUNABLES"] = DEFAULTS
    return env


def run(binary, args, defaults):
    """The median step (after the first 3) and the run's minor faults (the children's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([binary, "train", *args, "--log-every", "100000", "--metrics", metrics],
                       env=env_with(defaults), check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][3:]), faults


def optimizer_ms(binary, defaults):
    """Adam's step over the MLP's parameters, as `baton train --profile-out` times it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "profile.json")
        subprocess.run([binary, "train", *MLP[:-2], "--profile-out", out], env=env_with(defaults), check=True,
                       capture_output=True, text=True)
        prof = json.load(open(out))
    return 1e3 * prof["optimizer_s_per_parameter_byte"] * sum(
        l["parameter_bytes"] for l in prof["layers"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    print("load average before:", open("/proc/loadavg").read().strip(), flush=True)
    ratios = {"mlp": [], "llama": [], "optimizer": []}
    for r in range(a.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        opt = {d: optimizer_ms(a.baton, d) for d in order}
        ratios["optimizer"].append(opt[True] / opt[False])
        print(f"round {r + 1} optimizer (Adam over the MLP's 6.5 MB): glibc's defaults "
              f"{opt[True]:.2f} ms, baton's thresholds {opt[False]:.2f} ms: "
              f"{ratios['optimizer'][-1]:.3f}x", flush=True)
        for name, args in (("mlp", MLP), ("llama", LLAMA)):
            # Alternate which side runs first: this host's speed drifts within minutes.
            got = {d: run(a.baton, args, d) for d in order}
            (glibc_ms, glibc_faults), (kept_ms, kept_faults) = got[True], got[False]
            ratios[name].append(glibc_ms / kept_ms)
            load = open("/proc/loadavg").read().split()[0]
            print(f"round {r + 1} {name}: glibc's defaults {glibc_ms:.2f} ms ({glibc_faults} minor "
                  f"faults), baton's thresholds {kept_ms:.2f} ms ({kept_faults}): "
                  f"{ratios[name][-1]:.3f}x  (load {load})", flush=True)
    print("median: " + ", ".join(f"{k} {statistics.median(v):.3f}x" for k, v in ratios.items()))
    print("load average after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
