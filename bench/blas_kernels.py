#!/usr/bin/env python3
"""What OpenBLAS's kernel choice costs, in one run (baton/core/blas_kernels.h).

Debian 12's OpenBLAS 0.3.21 picks its kernels from the CPU's model number; on a CPU it does not
know (Sapphire and Emerald Rapids) it falls back to its generic Prescott kernels. This bench
measures, alternating the two each round:
  - a single-thread sgemm of 64 x 1024 x 2816 (a llama micro-batch's SwiGLU projection) in
    Debian's torch (/usr/bin/python3), OPENBLAS_CORETYPE unset (OpenBLAS's own choice) against
    the core `baton train` names;
  - baton's llama step (bench/llama_vs_pipelining.py's workload, 2 ranks, 1F1B) with
    OPENBLAS_CORETYPE=Prescott (the fallback, forced: a user's value stands) against baton's
    own choice.
It prints OpenBLAS's own choice, each round's figures and the ratios.

Usage: python3 bench/blas_kernels.py [--baton build/baton] [--rounds 2] [--steps 8]
"""
import argparse, json, os, statistics, subprocess, tempfile

from llama_vs_pipelining import SIZES  # the llama workload, shared

SGEMM = r"""
import torch, time
torch.set_num_threads(1)
a, b = torch.randn(64, 1024), torch.randn(1024, 2816)
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    for _ in range(40): a @ b
    best = min(best, (time.perf_counter() - t) / 40)
print(2 * 64 * 1024 * 2816 / best / 1e9)
"""
LLAMA = ["--model", "llama", *[f"--{k}={v}" for k, v in SIZES.items()], "--pp", "2", "--nproc",
         "2", "--threads", "1", "--schedule", "1f1b", "--optimizer", "sgd", "--lr", "0.01",
         "--log-every", "100000"]


def env_with(core):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if core is not None:
        env["OPENBLAS_CORETYPE"] = core
    return env


def sgemm(core):
    out = subprocess.run(["/usr/bin/python3", "-c", SGEMM], env=env_with(core), check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def llama(binary, core, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = subprocess.run([binary, "train", *LLAMA, "--steps", str(steps), "--metrics", metrics],
                             env=env_with(core), check=True, capture_output=True, text=True).stdout
        rows = [json.loads(line) for line in open(metrics)]
    kernels = out.split("OpenBLAS ")[1].split(" kernels")[0] if "OpenBLAS " in out else "?"
    return statistics.median([r["step_ms"] for r in rows if "step_ms" in r][2:]), kernels


def own_choice():
    err = subprocess.run(["/usr/bin/python3", "-c", "import torch; torch.ones(2) @ torch.ones(2)"],
                         env=dict(env_with(None), OPENBLAS_VERBOSE="2"), capture_output=True,
                         text=True).stderr
    return next((l.split()[1] for l in err.splitlines() if l.startswith("Core:")), "?")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    print("load average before:", open("/proc/loadavg").read().strip(), flush=True)
    print("OpenBLAS's own choice here:", own_choice(), flush=True)
    gemm, step = [], []
    for r in range(a.rounds):
        fallback_ms, _ = llama(a.baton, "Prescott", a.steps)
        chosen_ms, kernels = llama(a.baton, None, a.steps)
        own, fixed = sgemm(None), sgemm(kernels)
        gemm.append(fixed / own)
        step.append(fallback_ms / chosen_ms)
        load = open("/proc/loadavg").read().split()[0]
        print(f"round {r + 1}: sgemm {own:.1f} GFLOP/s (own choice) vs {fixed:.1f} ({kernels}): "
              f"{gemm[-1]:.2f}x; llama step {fallback_ms:.0f} ms (Prescott) vs {chosen_ms:.0f} ms "
              f"(baton's choice, {kernels}): {step[-1]:.2f}x  (load {load})", flush=True)
    print(f"median: sgemm {statistics.median(gemm):.2f}x, llama step {statistics.median(step):.2f}x")
    print("load average after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
