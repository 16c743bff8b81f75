#!/usr/bin/env python3
"""--recompute selective against never (and always), in one run (issue 33).

The gpt at s = 256, h = 256, 8 heads on pp 2: each mode trains in turn (never, selective,
always, never, ...) so that all see the same load; the script prints each mode's median step
time (steps 3 on) and, from the counting allocator's final `memory` line, each rank's activation
bytes at its peak, with the ratios against never, each rank's whole allocator peak and peak RSS,
the load average, and whether every step's loss equals never's bit for bit.

With --previous OTHER_BATON, a fourth mode "selective@previous" runs OTHER_BATON's selective in
the same rotation: a change to the recomputation measured against the binary before it.

Usage: python3 bench/selective_recompute.py [--baton build/baton] [--rounds 3] [--steps 12]
       [--layers 4] [--batch 16] [--microbatches 4] [--previous OLD_BATON]
"""
import argparse, json, os, statistics, subprocess, tempfile


def run(a, mode):
    baton = a.baton
    if mode.endswith("@previous"):
        baton, mode = a.previous, mode.split("@")[0]
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run(
            [baton, "train", "--model", "gpt", "--layers", str(a.layers), "--hidden", "256",
             "--heads", "8", "--context", "256", "--batch", str(a.batch), "--microbatches",
             str(a.microbatches), "--pp", "2", "--nproc", "2", "--threads", "1", "--steps",
             str(a.steps), "--log-every", "1000", "--recompute", mode, "--metrics", metrics],
            check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics)]
    steps = [r for r in rows if "step_ms" in r]
    final = [r for r in rows if "final" in r][-1]
    return ([r["step_ms"] for r in steps][2:], [r["loss"] for r in steps],
            [m["measured"]["activations"] for m in final["memory"]],
            [(m["measured_peak_bytes"], m["peak_rss_bytes"]) for m in final["memory"]])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--previous", help="another baton whose selective runs in the same rotation")
    a = p.parse_args()
    modes = ["never", "selective", "always"] + (["selective@previous"] if a.previous else [])
    times = {m: [] for m in modes}
    losses, activations, peaks = {}, {}, {}
    for _ in range(a.rounds):
        for m in modes:
            t, losses[m], activations[m], peaks[m] = run(a, m)
            times[m] += t
    base = statistics.median(times["never"])
    print(f"gpt s=256 h=256 heads=8 layers={a.layers} batch={a.batch} m={a.microbatches} pp=2, "
          f"{a.rounds} rounds of {a.steps} steps; load average {os.getloadavg()[0]:.2f}")
    for m in modes:
        med = statistics.median(times[m])
        acts = ", ".join(f"rank {r}: {b / 2**20:.1f} MiB ({b / activations['never'][r]:.2f})"
                         for r, b in enumerate(activations[m]))
        print(f"  {m:18s} step {med:7.1f} ms ({med / base:.3f} of never); activations at the peak "
              f"{acts}; losses {'bitwise equal to never' if losses[m] == losses['never'] else 'differ'}")
        print("            allocator peak / peak RSS: " + ", ".join(
            f"rank {r}: {p / 2**20:.1f} / {rss / 2**20:.1f} MiB" for r, (p, rss) in enumerate(peaks[m])))


if __name__ == "__main__":
    main()
