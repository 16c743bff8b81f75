#!/usr/bin/env python3
"""Calibration of `baton plan --profile` against `baton train` on this machine (issue 11).

Profiles an MLP (8 layers, hidden 512, batch 256 in 8 micro-batches of 32, 1 thread) with
`baton train --profile-out`, plans it for 2 GPUs in one node with `baton plan --profile --json`,
then runs the plan's 3 best configurations that `baton train` can run (t = 1; p x d = 2 ranks,
with `--dp` for d > 1) as local ranks of 1 thread each, and prints the predicted step time
against the measured median (steps after the first 3) and their ratio, and whether the plan's
first choice measured fastest or within 5% of the fastest.

The d = 2 plans price the all-reduce at baton's own measured collective: a `baton train --dp 2
--compare-sim` run probes it (a ring step's latency and the bus bandwidth, at the model's gradient
bytes) and the plan gets it as `--allreduce-gbps` and `--allreduce-latency-us`.

It does this twice: with b free (the planner's own choice; linear scaling takes it to b = 1) and
with b fixed at the profiled micro-batch (`--microbatch 32`: no extrapolation in b). The profile
carries a fixed per-micro-batch part of each layer's time, each layer's times at the whole
mini-batch (which the plan follows above b = 32), the optimizer's (Adam's) time per
parameter byte, and what whole steps cost beyond both (action_overhead_s per F and per B of a
stage, step_overhead_s per step), which the plan adds. A first row runs the profiled
configuration on one rank (p = 1, no pipeline), predicted as the plan predicts it: m (F + I + W +
2 action overheads) + the optimizer step + the step overhead.

This machine's virtual CPUs run the same work up to 1.7x slower for seconds at a time, so the
bench profiles twice (seconds apart) and keeps the profile whose one-process step is faster, and
runs every configuration in ROUNDS = 2 rounds over the table, each taking its faster median;
and before and after the tables it measures the two-core factor: two one-rank runs at once, with
no communication, against one alone (1.0 where the two cores are independent).

Usage: python3 bench/plan_calibration.py [--baton build/baton] [--steps 30]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

MODEL = ["--model", "mlp", "--layers", "8", "--hidden", "512"]
BATCH = 256
PROFILED_MICROBATCHES = 8
# This machine's virtual CPUs run the same work up to 1.7x slower for seconds at a time
# (bench/RESULTS.md, "Planner calibration on a machine whose CPUs change speed"). Both sides
# therefore take the machine at its speed: the faster of two profiles, and each run's median
# step the faster of ROUNDS runs, the runs of one plan minutes apart.
ROUNDS = 2
# This machine's link, as bench/p2p_latency measured Gloo between two local ranks (64 MiB one
# way in 27.6 ms: 19 Gbit/s; small messages about 50 us): the dp all-reduce runs over Gloo. The
# pipeline's shared-memory path is faster (35 Gbit/s, 3 us); the plan has one intra-node link.
CLUSTER = ["--gpus", "2", "--gpus-per-node", "2", "--gpu-memory-gb", "8",
           "--intra-node-gbps", "19", "--intra-node-latency-us", "50"]


def sh(cmd):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def train_command(baton, c, steps, metrics):
    """`baton train` of plan `c` (p, d, schedule, microbatches, virtual, zero) into `metrics`."""
    d = c.get("d", 1)
    cmd = [baton, "train", *MODEL, "--batch", str(BATCH), "--nproc", str(c["p"] * d), "--pp",
           str(c["p"]), "--dp", str(d), "--schedule", c["schedule"], "--microbatches", str(c["microbatches"]),
           "--threads", "1", "--steps", str(steps), "--log-every", "1000", "--metrics", metrics]
    if c["schedule"] in ("interleaved", "looped-bfs", "interleaved-zb"):
        cmd += ["--virtual", str(c["virtual"])]
    if c.get("zero", 0):
        cmd += ["--zero", str(c["zero"])]
    return cmd


def median_step_ms(metrics):
    """The median step of a metrics file, after the first 3."""
    rows = [json.loads(line) for line in open(metrics)]
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][3:])


def train_step_ms(baton, tmp, plan, steps):
    metrics = os.path.join(tmp, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    sh(train_command(baton, plan, steps, metrics))
    return median_step_ms(metrics)


def measured_allreduce(baton):
    """baton's dp all-reduce on 2 local ranks, as `--compare-sim` probes it: plan flags."""
    out = sh([baton, "train", *MODEL, "--batch", str(BATCH), "--nproc", "2", "--pp", "1", "--dp",
              "2", "--microbatches", "1", "--threads", "1", "--steps", "3", "--log-every", "1000",
              "--compare-sim"])
    m = re.search(r"dp all-reduce probed at ([0-9.]+) us a ring step \+ ([0-9.]+) GB/s \((\d+) replicas\)", out)
    if not m:
        raise SystemExit("no all-reduce probe in baton train --compare-sim's output:\n" + out)
    step_us, gb_per_s, d = float(m.group(1)), float(m.group(2)), int(m.group(3))
    print(f"baton's all-reduce on {d} ranks: {step_us:.1f} us a ring step, {gb_per_s:.2f} GB/s")
    # The plan's ring: 2 (d - 1) steps of latency, the bus rate in Gbit/s.
    return ["--allreduce-gbps", f"{gb_per_s * 8:.4f}",
            "--allreduce-latency-us", f"{max(step_us, 0.1) * 2 * (d - 1):.2f}"]


# The profiled configuration on one rank (no pipeline).
ONE_RANK = {"p": 1, "schedule": "1f1b", "microbatches": PROFILED_MICROBATCHES, "virtual": 1}


def pair_factor(baton, tmp, steps):
    """The machine's speed with both cores busy: two one-rank runs of the profiled configuration
    at once (no communication between them), their slower median step over one run's alone.
    1.0 on a machine whose two cores are independent; a plan on 2 ranks cannot be predicted
    closer than this from a profile taken on one."""
    one = train_step_ms(baton, tmp, ONE_RANK, steps)
    pair = [os.path.join(tmp, f"pair{k}.jsonl") for k in range(2)]
    for m in pair:
        if os.path.exists(m):
            os.remove(m)
    procs = [subprocess.Popen(train_command(baton, ONE_RANK, steps, m),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for m in pair]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a pair run failed")
    two = max(median_step_ms(m) for m in pair)
    print(f"two cores busy: one-rank step {one:.2f} ms alone, {two:.2f} ms with a twin "
          f"beside it: factor {two / one:.2f}")
    return two / one


def profile_parts(prof):
    """A profile's parts of a one-process step, in ms: F + I + W of every layer per micro-batch,
    the optimizer step, the overhead per F and per B, the overhead per step."""
    layers = sum(l["forward_s"] + l["input_backward_s"] + l["weight_backward_s"]
                 for l in prof["layers"])
    optimizer = prof.get("optimizer_s_per_parameter_byte", 0) * sum(
        l["parameter_bytes"] for l in prof["layers"])
    return (1e3 * layers, 1e3 * optimizer, 1e3 * prof.get("action_overhead_s", 0),
            1e3 * prof.get("step_overhead_s", 0))


def profile_step_ms(prof):
    """What a profile says one process's step at m micro-batches costs."""
    per_mb, optimizer, action, per_step = profile_parts(prof)
    return prof["microbatches"] * (per_mb + 2 * action) + optimizer + per_step


def calibrate(baton, tmp, profile, steps, extra, title):
    out = json.loads(sh([baton, "plan", "--profile", profile, *CLUSTER, "--batch", str(BATCH),
                         "--json", "--top", "1000", *extra]))
    runnable = [p for p in out["plans"] if p["t"] == 1][:3]
    # The best d = 2 plan as well, wherever it ranks: its all-reduce is the measured collective's.
    data_parallel = [p for p in out["plans"] if p["t"] == 1 and p["d"] == 2]
    if data_parallel and data_parallel[0] not in runnable:
        runnable.append(data_parallel[0])
    print(f"\n{title}: plan's first choice overall: " +
          "p={p} d={d} b={microbatch} m={microbatches} {schedule}".format(**out["plans"][0]))
    # ROUNDS rounds over the plans; each plan's faster median counts (the machine's spells).
    measured = [min(ms) for ms in zip(*[[train_step_ms(baton, tmp, p, steps) for p in runnable]
                                        for _ in range(ROUNDS)])]
    rows = [(p, p["step_s"] * 1e3, meas) for p, meas in zip(runnable, measured)]
    print(f"{'p':>2} {'d':>2} {'b':>4} {'m':>4} {'v':>2} {'schedule':<14} {'predicted_ms':>12} "
          f"{'measured_ms':>12} {'measured/pred':>13}")
    for p, pred, meas in rows:
        print(f"{p['p']:>2} {p['d']:>2} {p['microbatch']:>4} {p['microbatches']:>4} {p['virtual']:>2} "
              f"{p['schedule']:<14} {pred:>12.2f} {meas:>12.2f} {meas / pred:>13.2f}")
    rows = rows[:3]  # the verdict is about the plan's own first three
    fastest = min(meas for _, _, meas in rows)
    first = rows[0][2]
    verdict = ("fastest" if first == fastest else
               f"within {100 * (first / fastest - 1):.1f}% of the fastest" if first <= 1.05 * fastest
               else f"{100 * (first / fastest - 1):.1f}% slower than the fastest (missed)")
    print(f"first runnable choice measured {verdict}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", default="build/baton")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    baton = os.path.abspath(args.baton)
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    with tempfile.TemporaryDirectory() as tmp:
        profiles = []
        allreduce = None
        for k in range(2):
            if k == 1:  # the probe between the two profiles: they are seconds apart
                allreduce = measured_allreduce(baton)
            profile = os.path.join(tmp, f"profile{k}.json")
            sh([baton, "train", *MODEL, "--batch", str(BATCH), "--microbatches",
                str(PROFILED_MICROBATCHES), "--pp", "1", "--threads", "1", "--profile-out", profile])
            profiles.append((profile_step_ms(json.load(open(profile))), profile))
        print("the two profiles' one-process step: " +
              ", ".join(f"{ms:.2f} ms" for ms, _ in profiles))
        profile = min(profiles)[1]
        prof = json.load(open(profile))
        b = prof["microbatch"]
        per_mb, optimizer_ms, action_ms, step_overhead_ms = profile_parts(prof)
        print(f"profiled micro-batch {b}: F+I+W of all layers {per_mb:.2f} ms, optimizer step "
              f"{optimizer_ms:.2f} ms, overheads {action_ms:.3f} ms per F and per B, "
              f"{step_overhead_ms:.2f} ms per step (one process measured "
              f"{prof.get('one_process_step_s', 0) * 1e3:.2f} ms a step)")
        # Reference with no pipeline: the profiled configuration on one rank, predicted m (F+I+W).
        single = min(train_step_ms(baton, tmp, ONE_RANK, args.steps) for _ in range(ROUNDS))
        predicted = profile_step_ms(prof)
        print(f"reference, one rank, b={b} m={PROFILED_MICROBATCHES}: predicted "
              f"{predicted:.2f} ms, measured {single:.2f} ms, ratio {single / predicted:.2f}")
        before = pair_factor(baton, tmp, args.steps)
        calibrate(baton, tmp, profile, args.steps, allreduce, "b free")
        calibrate(baton, tmp, profile, args.steps, [*allreduce, "--microbatch", str(b)], f"b = {b}")
        after = pair_factor(baton, tmp, args.steps)
        print(f"two-core factor before and after the tables: {before:.2f}, {after:.2f} (above "
              "1.10 the machine, not the plan, sets how far 2-rank rows miss)")
    print("load average after:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
