#!/usr/bin/env python3
"""Asynchronous pipelines (issue 10, part 3): 2bw (PipeDream-2BW) against 1f1b, in one run.

Throughput: for each pp it runs `baton train` with 1f1b and with 2bw on local ranks (an MLP,
in-features = hidden, SGD, 1 thread per rank) and prints each one's measured steady step (rank
0's mean time from step to step over the second half of the run, the metrics' elapsed_ms), the
measured gain of 2bw, and the gain the simulator predicts for uniform stages (`baton simulate
--json`'s steady_step for both; 2bw's is its window run back to back). Weight memory: the weight
versions each rank held at most (measured by the runtime as distinct parameter storages) times
its parameter bytes, from the final metrics line.

With --fashion it also trains the main job (examples/fashion_mnist.toml, 2 stages) with each
schedule and prints the test accuracy and the wall time.

Usage: python3 bench/async_schedules.py [--baton build/baton] [--steps 60] [--pp 2 4] [--fashion]
"""
import argparse, json, os, re, subprocess, tempfile, time


def train(binary, args, schedule):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        start = time.time()
        out = subprocess.run([binary, "train", *args, "--schedule", schedule, "--metrics", metrics],
                             check=True, capture_output=True, text=True).stdout
        wall = time.time() - start
        lines = [json.loads(line) for line in open(metrics)]
    rows = [r for r in lines if "elapsed_ms" in r]
    final = next(r for r in lines if r.get("final"))
    return rows, final, out, wall


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
    p.add_argument("--fashion", action="store_true")
    a = p.parse_args()
    print(f"mlp {a.layers} layers, hidden {a.hidden}, batch {a.batch}, m={a.microbatches}, "
          f"{a.steps} steps, 1 thread/rank, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'pp':>2} | {'1f1b ms':>8} {'2bw ms':>8} {'gain':>6} | {'sim gain':>8} | "
          f"weight versions 1f1b -> 2bw per rank | weight bytes 2bw / 1f1b")
    for pp in a.pp:
        args = ["--model", "mlp", "--layers", str(a.layers), "--hidden", str(a.hidden),
                "--in-features", str(a.hidden), "--classes", "10", "--batch", str(a.batch),
                "--microbatches", str(a.microbatches), "--pp", str(pp), "--nproc", str(pp),
                "--threads", "1", "--optimizer", "sgd", "--lr", "0.001", "--steps", str(a.steps),
                "--log-every", "100000"]
        flush_rows, flush_final, _, _ = train(a.baton, args, "1f1b")
        async_rows, async_final, _, _ = train(a.baton, args, "2bw")
        f, s = steady(flush_rows), steady(async_rows)
        sim_f = simulated_steady(a.baton, "1f1b", pp, a.microbatches)
        sim_s = simulated_steady(a.baton, "2bw", pp, a.microbatches)
        wf, ws = weights(flush_final), weights(async_final)
        versions = " ".join(f"{x[0]}->{y[0]}" for x, y in zip(wf, ws))
        ratio = sum(y[1] for y in ws) / max(1.0, sum(x[1] for x in wf))
        print(f"{pp:>2} | {f:8.2f} {s:8.2f} {100 * (1 - s / f):5.1f}% | {100 * (1 - sim_s / sim_f):7.1f}% | "
              f"{versions:>36} | {ratio:.2f}x", flush=True)
    if a.fashion:
        print("main job (examples/fashion_mnist.toml, 2 stages, m = 4, 4 epochs):")
        for schedule in ("1f1b", "2bw"):
            rows, final, out, wall = train(a.baton, ["--config", "examples/fashion_mnist.toml", "--nproc", "2",
                                                     "--log-every", "100000"], schedule)
            print(f"  {schedule:>4}: test accuracy {final.get('test_accuracy', float('nan')):.4f}, "
                  f"{wall:.1f} s, steady step {steady(rows):.2f} ms, weight versions "
                  f"{[w[0] for w in weights(final)]}", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
