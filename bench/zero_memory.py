#!/usr/bin/env python3
"""ZeRO 0/1/2/3 per rank, in one run (issue 33).

Memory: the gpt on dp 4 x pp 2 (8 ranks) trains under each --zero in turn; from the final
`memory` line of --metrics the script prints, per rank, what it holds at rest (parameter_bytes,
gradient_bytes, optimizer_bytes) with the ratios against --zero 0, the counting allocator's peak
and the peak RSS.

The planner: the same gpt profiled on one rank (`baton train --profile-out`), then `baton plan
--profile` of the same layout (dp 4 x pp 2, 1f1b, the same micro-batch) under each --zero; its
memory per GPU (the busiest rank's) against the allocator's peak over the ranks, and the saving
against --zero 0 each predicts against the one measured.

Time (--time): the gpt at hidden 512 on dp 2 x pp 2 under --zero 1, --zero 3 and --zero 3
--prefetch-unshard off, in turn, the median step time (steps 3 on) of each and its ratio to
--zero 1, and the median time a step's computes waited for their UNSHARD all-gathers (the
metrics' unshard_wait_ms, rank 0), with the load average.

Usage: python3 bench/zero_memory.py [--baton build/baton] [--steps 4] [--time] [--rounds 3]
"""
import argparse, json, os, statistics, subprocess, tempfile


def run(a, zero, args, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([a.baton, "train", "--model", "gpt", "--threads", "1", "--log-every",
                        "1000", "--optimizer", "adam", "--zero", str(zero), "--metrics", metrics]
                       + args + list(extra), check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    steps = [r for r in rows if "step_ms" in r]
    final = [r for r in rows if "memory" in r][-1]
    waits = [r.get("unshard_wait_ms", 0.0) for r in steps][2:]
    return [r["step_ms"] for r in steps][2:], [r["loss"] for r in steps], final["memory"], waits


GPT = ["--layers", "4", "--hidden", "128", "--heads", "4", "--context", "64"]


def memory(a):
    args = GPT + ["--batch", "32", "--microbatches", "4", "--dp", "4", "--pp", "2", "--nproc", "8",
                  "--steps", str(a.steps)]
    runs = {z: run(a, z, args) for z in (0, 1, 2, 3)}
    print(f"gpt layers=4 h=128 s=64 batch=32 m=4, dp 4 x pp 2, adam, {a.steps} steps; "
          f"load average {os.getloadavg()[0]:.2f}")
    base = {m["rank"]: m for m in runs[0][2]}
    for z, (_, losses, mem, _) in runs.items():
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, runs[0][1]))
        same = ("bitwise equal to --zero 0" if losses == runs[0][1] else
                f"differ from --zero 0 by {worst:.1e} relative at most")
        print(f"--zero {z}: losses {same}")
        for m in sorted(mem, key=lambda m: m["rank"]):
            b = base[m["rank"]]
            ratio = lambda k: m[k] / b[k] if b[k] else float("nan")
            print(f"  rank {m['rank']}: parameters {m['parameter_bytes'] / 2**20:6.3f} MiB "
                  f"({ratio('parameter_bytes'):.3f}), gradients {m['gradient_bytes'] / 2**20:6.3f} "
                  f"MiB ({ratio('gradient_bytes'):.3f}), optimizer "
                  f"{m['optimizer_bytes'] / 2**20:6.3f} MiB ({ratio('optimizer_bytes'):.3f}); "
                  f"allocator peak {m['measured_peak_bytes'] / 2**20:6.1f} MiB, peak RSS "
                  f"{m['peak_rss_bytes'] / 2**20:6.1f} MiB")
    return runs


def planned(a, runs):
    """baton plan --profile's memory per GPU under each --zero against the allocator's peak."""
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "profile.json")
        # One rank, the runs' micro-batch (32 / 4 replicas / 4 micro-batches = 2).
        subprocess.run([a.baton, "train", "--model", "gpt", *GPT, "--batch", "8", "--microbatches",
                        "4", "--threads", "1", "--optimizer", "adam", "--profile-out", profile],
                       check=True, capture_output=True, text=True)
        plans = {}
        for z in runs:
            out = subprocess.run(
                [a.baton, "plan", "--profile", profile, "--gpus", "8", "--gpus-per-node", "8",
                 "--gpu-memory-gb", "64", "--batch", "32", "--microbatch", "2", "--dp", "4", "--pp",
                 "2", "--tp", "1", "--schedules", "1f1b", "--zero", str(z), "--json"],
                check=True, capture_output=True, text=True).stdout
            plans[z] = json.loads(out)["plans"][0]["memory_gb"] * 1e9
    print("baton plan --profile (1f1b, dp 4 x pp 2, b 2) against the allocator's peak, the "
          "busiest rank:")
    peak = {z: max(m["measured_peak_bytes"] for m in runs[z][2]) for z in runs}
    for z in runs:
        saved_p, saved_m = plans[0] - plans[z], peak[0] - peak[z]
        saving = (f"; saves {saved_p / 2**20:5.2f} MiB against --zero 0, measured "
                  f"{saved_m / 2**20:5.2f} ({saved_p / saved_m:.3f})" if z else "")
        print(f"  --zero {z}: planned {plans[z] / 2**20:6.2f} MiB, measured {peak[z] / 2**20:6.2f} "
              f"MiB ({plans[z] / peak[z]:.3f}){saving}")


def timing(a):
    args = ["--layers", "4", "--hidden", "512", "--heads", "8", "--context", "64", "--batch", "16",
            "--microbatches", "4", "--dp", "2", "--pp", "2", "--nproc", "4", "--steps",
            str(a.steps + 4)]
    kinds = {"--zero 1": (1, ()), "--zero 3": (3, ()),
             "--zero 3 --prefetch-unshard off": (3, ("--prefetch-unshard", "off"))}
    times = {k: [] for k in kinds}
    waits = {k: [] for k in kinds}
    for _ in range(a.rounds):
        for k, (z, extra) in kinds.items():
            t, _, _, w = run(a, z, args, extra)
            times[k] += t
            waits[k] += w
    one = statistics.median(times["--zero 1"])
    print(f"gpt layers=4 h=512 s=64 batch=16 m=4, dp 2 x pp 2, {a.rounds} rounds; load average "
          f"{os.getloadavg()[0]:.2f}")
    for k in kinds:
        med = statistics.median(times[k])
        print(f"  {k:34s} step {med:8.1f} ms ({med / one:.3f} of --zero 1); computes waited for "
              f"UNSHARD {statistics.median(waits[k]):6.2f} ms a step (rank 0, median)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--time", action="store_true")
    a = p.parse_args()
    planned(a, memory(a))
    if a.time:
        timing(a)


if __name__ == "__main__":
    main()
