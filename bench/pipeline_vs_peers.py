#!/usr/bin/env python3
"""baton against the Python peers on the same pipeline, in one run.

The model is an 8-layer MLP (in-features = hidden, 10 classes), batch 256, SGD, 2 ranks x 1
thread, cut 4 + 4. For each workload (hidden, micro-batches) it runs:
  - baton train, GPipe and 1F1B (local launcher, --transport auto: shared memory);
  - bench/peers/gpipe_send_recv.py: a plain PyTorch GPipe with gloo dist.send/recv, under
    Debian's torch 1.13 (/usr/bin/python3, package python3-torch) when it is installed, and
    under the PyPI torch 2.x (python3);
  - bench/peers/pipelining_1f1b.py: torch.distributed.pipelining's Schedule1F1B (torch 2.x).
and prints the median step times, baton 1F1B's speedup over each peer, and baton's
--compare-sim efficiency (simulated / measured step, communication charged from a probe; the
median over the last 5 steps, each after a barrier).
With --device cuda every run is on two GPUs (rank r on cuda:r, NCCL between them; the
torch 1.13 peer is left out): baton needs a CUDA build, the peers a CUDA torch 2.x.

Usage: python3 bench/pipeline_vs_peers.py [--baton build/baton] [--steps 60] [--device cuda]
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = [(16, 32), (16, 8), (1024, 8)]


def baton(binary, hidden, m, schedule, steps, device):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = subprocess.run(
            [binary, "train", "--model", "mlp", "--layers", "8", "--hidden", str(hidden),
             "--in-features", str(hidden), "--classes", "10", "--batch", "256",
             "--microbatches", str(m), "--pp", "2", "--nproc", "2", "--threads", "1",
             "--schedule", schedule, "--optimizer", "sgd", "--lr", "0.01", "--steps", str(steps),
             "--log-every", "100000", "--metrics", metrics, "--compare-sim", "--device", device],
            check=True, capture_output=True, text=True).stdout
        rows = [json.loads(line) for line in open(metrics)]
    step = statistics.median([r["step_ms"] for r in rows if "step_ms" in r][5:])
    # The median over the steps --compare-sim measures (each after a barrier).
    eff = re.search(r"efficiency median ([0-9.]+)%", out)
    bubbles = re.search(r"bubble median measured ([0-9.]+)%, simulated ([0-9.]+)%", out)
    return step, float(eff.group(1)) if eff else float("nan"), bubbles.groups() if bubbles else None


def blas_env(binary):
    """The environment with the OpenBLAS kernels `baton train` runs with (baton/core/blas_kernels.h:
    Debian's OpenBLAS falls back to generic kernels on the newest Xeons), so that Debian's torch
    runs the peers on the same kernels as baton; the user's OPENBLAS_CORETYPE stands."""
    env = dict(os.environ)
    if "OPENBLAS_CORETYPE" not in env:
        out = subprocess.run([binary, "train", "--model", "mlp", "--layers", "2", "--hidden", "8",
                              "--batch", "8", "--microbatches", "1", "--pp", "1", "--steps", "1"],
                             capture_output=True, text=True).stdout
        found = re.search(r"OpenBLAS (\w+) kernels", out)
        if found:
            env["OPENBLAS_CORETYPE"] = found.group(1)
    return env


ENV = None  # blas_env(), set by main() before any peer runs


def peer(python, script, hidden, m, steps, extra=()):
    try:
        out = subprocess.run([python, os.path.join(HERE, "peers", script), "--hidden", str(hidden),
                              "--in-features", str(hidden), "--microbatches", str(m),
                              "--steps", str(steps), *extra],
                             check=True, capture_output=True, text=True, timeout=600,
                             env=ENV).stdout
    except (subprocess.SubprocessError, FileNotFoundError) as e:
        return float("nan")
    return json.loads(out.strip().splitlines()[-1])["median_step_ms"]


def has_torch(python):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    global ENV
    ENV = blas_env(a.baton)
    on = ("--device", a.device)
    debian = "/usr/bin/python3" if a.device == "cpu" and has_torch("/usr/bin/python3") else None
    print(f"{'hidden':>6} {'m':>3} {'baton gpipe':>11} {'baton 1f1b':>10} {'script 1.13':>11} "
          f"{'script 2.x':>10} {'pipelining':>10} {'vs script':>9} {'vs pipel.':>9} "
          f"{'eff':>6} {'bubble meas/sim':>15}  (ms per step, medians)")
    for hidden, m in WORKLOADS:
        gpipe, _, _ = baton(a.baton, hidden, m, "gpipe", a.steps, a.device)
        one, eff, bubbles = baton(a.baton, hidden, m, "1f1b", a.steps, a.device)
        script_old = peer(debian, "gpipe_send_recv.py", hidden, m, a.steps) if debian else float("nan")
        script_new = peer(sys.executable, "gpipe_send_recv.py", hidden, m, a.steps, on)
        pipelining = peer(sys.executable, "pipelining_1f1b.py", hidden, m, a.steps, on)
        best_script = min(x for x in (script_old, script_new) if x == x) if (script_old == script_old or script_new == script_new) else float("nan")
        print(f"{hidden:>6} {m:>3} {gpipe:>11.2f} {one:>10.2f} {script_old:>11.2f} {script_new:>10.2f} "
              f"{pipelining:>10.2f} {best_script / one:>8.2f}x {pipelining / one:>8.2f}x "
              f"{eff:>5.1f}% {'/'.join(bubbles) if bubbles else '-':>15}", flush=True)


if __name__ == "__main__":
    main()
