#!/usr/bin/env python3
"""What global-norm clipping costs a step (issue 19): the CLIP_NORM action.

For each grid it runs `baton train` on local ranks twice, without clipping and with
--clip-grad-norm 1, and prints the median step time of each (past the first third) and the
CLIP_NORM action's own span in the last step's measured timeline (--trace: cat "CLIP_NORM"),
the longest over the ranks: the squares, the all-reduce of one number over the world, the scaling.
The model is gpt (4 blocks, hidden 128, 4 heads, context 32, vocab 256), SGD, 1 thread per rank.
Usage: python3 bench/clip_cost.py [--baton build/baton] [--steps 30]
"""
import argparse, json, os, statistics, subprocess, tempfile


def run(binary, a, dp, pp, clip):
    with tempfile.TemporaryDirectory() as tmp:
        metrics, trace = os.path.join(tmp, "m.jsonl"), os.path.join(tmp, "t.json")
        cmd = [binary, "train", "--model", "gpt", "--layers", "4", "--hidden", "128", "--heads", "4",
               "--context", "32", "--batch", str(a.batch), "--microbatches", "4", "--dp", str(dp),
               "--pp", str(pp), "--nproc", str(dp * pp), "--threads", "1", "--optimizer", "sgd",
               "--lr", "0.01", "--steps", str(a.steps), "--log-every", "100000",
               "--metrics", metrics, "--trace", trace]
        if clip:
            cmd += ["--clip-grad-norm", "1"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in open(metrics) if '"step"' in line]
        events = json.load(open(trace))["traceEvents"]
    rows = rows[len(rows) // 3:]
    spans = [e["dur"] / 1000 for e in events if e.get("cat") == "CLIP_NORM"]
    return statistics.median(r["step_ms"] for r in rows), max(spans) if spans else 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args()
    print(f"gpt 4 x 128, batch {a.batch}, m=4, {a.steps} steps, medians past the first third; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'dp':>2} {'pp':>2} | {'step off':>8} {'step on':>8} {'on/off':>6} | CLIP_NORM span ms")
    for dp, pp in [(1, 2), (2, 2)]:
        off, _ = run(a.baton, a, dp, pp, False)
        on, span = run(a.baton, a, dp, pp, True)
        print(f"{dp:>2} {pp:>2} | {off:8.2f} {on:8.2f} {on / off:6.3f} | {span:.3f}", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
