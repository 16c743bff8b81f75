#!/usr/bin/env python3
"""Asynchronous pipelines (issue 10, part 3): 2bw (PipeDream-2BW) and pipedream (weight
stashing) against 1f1b, in one run.

Throughput: for each pp it runs `baton train` with 1f1b and with each asynchronous schedule on
local ranks (an MLP, in-features = hidden, SGD, 1 thread per rank) and prints each one's measured
steady step (rank 0's mean time from step to step over the second half of the run, the metrics'
elapsed_ms), its measured gain over 1f1b, and the gain the simulator predicts for uniform stages
(`baton simulate --json`'s steady_step; an asynchronous schedule's is its window run back to
back). Weight memory: the weight versions each rank held at most (measured by the runtime as
distinct parameter storages) times its parameter bytes, from the final metrics line. Why the measured gain falls short of the
simulated one: rank 0's idle share within its last step (from `--trace`) and its mean compute
action, for 1f1b and for the schedule (on this 2-vCPU machine two ranks computing at once each
run slower).

With --fashion it also trains the main job (examples/fashion_mnist.toml, 2 stages) with each
schedule and prints the test accuracy and the wall time.

Usage: python3 bench/async_schedules.py [--baton build/baton] [--steps 60] [--pp 2 4]
       [--schedules 2bw pipedream] [--fashion]
"""
import argparse, json, os, re, subprocess, tempfile, time


def train(binary, args, schedule):
    with tempfile.TemporaryDirectory() as tmp:
        metrics, trace = os.path.join(tmp, "m.jsonl"), os.path.join(tmp, "t.json")
        start = time.time()
        out = subprocess.run([binary, "train", *args, "--schedule", schedule, "--metrics", metrics,
                              "--trace", trace], check=True, capture_output=True, text=True).stdout
        wall = time.time() - start
        lines = [json.loads(line) for line in open(metrics)]
        final = next(r for r in lines if r.get("final"))
        final["idle"] = idle_per_rank(trace)
    rows = [r for r in lines if "elapsed_ms" in r]
    return rows, final, out, wall


def idle_per_rank(trace):
    """Per rank, the last step's idle share between its first action's start and its last's end,
    and its mean compute action (F or B) in ms, from the measured trace."""
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    out = []
    for rank in sorted({e["tid"] for e in events}):
        mine = [e for e in events if e["tid"] == rank]
        span = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
        busy = sum(e["dur"] for e in mine)
        out.append((1 - busy / span if span > 0 else 0, busy / len(mine) / 1000))
    return out


def steady(rows):
    half = len(rows) // 2
    return (rows[-1]["elapsed_ms"] - rows[half]["elapsed_ms"]) / (len(rows) - 1 - half)


def simulated_steady(binary, schedule, pp, m):
    out = subprocess.run([binary, "simulate", "--schedule", schedule, "--pp", str(pp),
                          "--microbatches", str(m), "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["steady_step"]


def weights(final):
    return [(m["weight_versions"], m["weight_versions"] * m["parameter_bytes"]) for m in final["memory"]]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--pp", type=int, nargs="+", default=[2, 4])
    p.add_argument("--schedules", nargs="+", default=["2bw", "pipedream"])
    p.add_argument("--fashion", action="store_true")
    a = p.parse_args()
    print(f"mlp {a.layers} layers, hidden {a.hidden}, batch {a.batch}, m={a.microbatches}, "
          f"{a.steps} steps, 1 thread/rank, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'schedule':>9} {'pp':>2} | {'1f1b ms':>8} {'ms':>8} {'gain':>6} | {'sim gain':>8} | "
          f"weight versions 1f1b -> it, per rank | weight bytes vs 1f1b | rank 0 idle, mean action ms 1f1b -> it")
    for pp in a.pp:
        args = ["--model", "mlp", "--layers", str(a.layers), "--hidden", str(a.hidden),
                "--in-features", str(a.hidden), "--classes", "10", "--batch", str(a.batch),
                "--microbatches", str(a.microbatches), "--pp", str(pp), "--nproc", str(pp),
                "--threads", "1", "--optimizer", "sgd", "--lr", "0.001", "--steps", str(a.steps),
                "--log-every", "100000"]
        flush_rows, flush_final, _, _ = train(a.baton, args, "1f1b")
        f = steady(flush_rows)
        sim_f = simulated_steady(a.baton, "1f1b", pp, a.microbatches)
        wf = weights(flush_final)
        for schedule in a.schedules:
            rows, final, _, _ = train(a.baton, args, schedule)
            s_ = steady(rows)
            sim_s = simulated_steady(a.baton, schedule, pp, a.microbatches)
            ws = weights(final)
            versions = " ".join(f"{x[0]}->{y[0]}" for x, y in zip(wf, ws))
            ratio = sum(y[1] for y in ws) / max(1.0, sum(x[1] for x in wf))
            (i0, a0), (i1, a1) = flush_final["idle"][0], final["idle"][0]
            print(f"{schedule:>9} {pp:>2} | {f:8.2f} {s_:8.2f} {100 * (1 - s_ / f):5.1f}% | "
                  f"{100 * (1 - sim_s / sim_f):7.1f}% | {versions:>36} | {ratio:19.2f}x | "
                  f"{100 * i0:.1f}% {a0:.2f} -> {100 * i1:.1f}% {a1:.2f}", flush=True)
    if a.fashion:
        print("main job (examples/fashion_mnist.toml, 2 stages, m = 4, 4 epochs):")
        for schedule in ["1f1b", *a.schedules]:
            rows, final, out, wall = train(a.baton, ["--config", "examples/fashion_mnist.toml", "--nproc", "2",
                                                     "--log-every", "100000"], schedule)
            print(f"  {schedule:>4}: test accuracy {final.get('test_accuracy', float('nan')):.4f}, "
                  f"{wall:.1f} s, steady step {steady(rows):.2f} ms, weight versions "
                  f"{[w[0] for w in weights(final)]}", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
