#!/usr/bin/env python3
"""PipeMare (issue 20, part 4): the main job (examples/fashion_mnist.toml: the CNN, m = 4, Adam
2e-3 cosine, 4 epochs) trained with pipemare, async, pipedream and 2bw, and pipemare's ablations
(warm-up off, correction off, both off), one run after the other. For each: the test accuracy,
the wall time, the steady step (rank 0's mean time from step to step over the second half of the
run, the metrics' elapsed_ms), the weight versions each rank held at most, and the first
epoch's mean loss (where the warm-up acts). Prints a Markdown table.

Usage: python3 bench/pipemare.py [--baton build/baton] [--pp 2] [--balance time]
       [--runs pipemare async ...] [-- extra train flags]
--pp 4 runs 4 ranks (--nproc 4) and, unless --balance says otherwise, the config's balance.
"""
import argparse, json, os, subprocess, sys, tempfile, time

# name: (schedule, extra flags)
RUNS = {
    "pipemare": ("pipemare", []),
    "async": ("async", []),
    "pipedream": ("pipedream", []),
    "2bw": ("2bw", []),
    "pipemare, warm-up off": ("pipemare", ["--pipemare-warmup", "0"]),
    "pipemare, correction off": ("pipemare", ["--pipemare-correction", "off"]),
    "pipemare, both off": ("pipemare", ["--pipemare-warmup", "0", "--pipemare-correction", "off"]),
    "1f1b": ("1f1b", []),
}


def train(binary, args):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        start = time.time()
        out = subprocess.run([binary, "train", *args, "--metrics", metrics], capture_output=True,
                             text=True)
        wall = time.time() - start
        if out.returncode != 0:
            errors = [l for l in (out.stdout + out.stderr).splitlines() if "error:" in l]
            return None, (errors or out.stderr.strip().splitlines()[-1:] or ["failed"])[:1], wall
        lines = [json.loads(line) for line in open(metrics)]
    return lines, out.stdout, wall


def steady(rows):
    half = len(rows) // 2
    return (rows[-1]["elapsed_ms"] - rows[half]["elapsed_ms"]) / (len(rows) - 1 - half)


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--balance", default=None)
    p.add_argument("--runs", nargs="+", default=list(RUNS)[:7])
    a = p.parse_args(argv)
    base = ["--config", "examples/fashion_mnist.toml", "--pp", str(a.pp), "--nproc", str(a.pp),
            "--log-every", "100000", *extra]
    if a.balance:
        base += ["--balance", a.balance]
    print(f"baton train {' '.join(base)} --schedule S ...; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    print("| run | test accuracy | wall | steady step | weight versions | epoch 1 mean loss |")
    print("|---|---|---|---|---|---|", flush=True)
    for name in a.runs:
        schedule, flags = RUNS[name]
        lines, out, wall = train(a.baton, [*base, "--schedule", schedule, *flags])
        if lines is None:
            print(f"| {name} | failed: {out[0]} | {wall:.1f} s | | | |", flush=True)
            continue
        rows = [r for r in lines if "elapsed_ms" in r]
        final = next(r for r in lines if r.get("final"))
        per_epoch = len(rows) // 4 if len(rows) >= 4 else len(rows)
        first = sum(r["loss"] for r in rows[:per_epoch]) / max(1, per_epoch)
        versions = [m["weight_versions"] for m in final["memory"]]
        print(f"| {name} | {final.get('test_accuracy', float('nan')):.4f} | {wall:.1f} s | "
              f"{steady(rows):.2f} ms | {versions} | {first:.4f} |", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
