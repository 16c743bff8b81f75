#!/usr/bin/env python3
"""Issue 32's memory fidelity sweep: for each configuration, every rank's
predicted peak bytes (the activation model, sim/memory_model.h, from layers
measured by the counting allocator) against the counting allocator's measured
peak over steps 3 onwards, from the final `memory` line of --metrics.

    python3 bench/memory_fidelity.py [--baton build/baton] [--quick] [--layers N] [--batch B]

Prints one row per configuration and rank: predicted, measured, ratio; and
the worst |ratio - 1| at the end (target: within 5%), and for each model and
layout the schedules ordered by their busiest rank's peak, predicted and
measured (the orders must match)."""
import argparse, collections, json, os, subprocess, sys, tempfile

MODELS = {
    "mlp": ["--model", "mlp", "--hidden", "256", "--layers", "8", "--batch", "64"],
    "cnn": ["--model", "cnn", "--batch", "64"],
    "gpt": ["--model", "gpt", "--layers", "4", "--hidden", "128", "--heads", "4",
            "--context", "128", "--batch", "32"],
    "llama": ["--model", "llama", "--layers", "4", "--hidden", "128", "--heads", "4",
              "--context", "128", "--batch", "32"],
    "resnet": ["--model", "resnet", "--batch", "32"],
}
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "v-min", "dualpipev", "2bw"]


def run(baton, args, metrics, timeout=600):
    # The peak is taken over the steps, before any test-set pass: leave it out
    # (the resnet's 10,000 test images take minutes on one thread).
    cmd = [baton, "train"] + args + ["--steps", "4", "--threads", "1", "--metrics", metrics,
                                     "--log-every", "100", "--test-set", "off"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return None, (p.stdout + p.stderr).strip().splitlines()[-1:]
    with open(metrics) as f:
        final = [json.loads(l) for l in f if '"final"' in l][-1]
    return final["memory"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", default="build/baton")
    ap.add_argument("--quick", action="store_true", help="gpt and mlp, four schedules, p = 2")
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--schedules", nargs="*", default=None)
    ap.add_argument("--pp", nargs="*", type=int, default=None)
    ap.add_argument("--recompute", nargs="*", default=None)
    ap.add_argument("--precision", nargs="*", default=None)
    ap.add_argument("--no-dp", action="store_true", help="leave out the dp 2 ZeRO-1 row")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds a run may take")
    ap.add_argument("--layers", type=int, default=None,
                    help="override the model's layers (the V schedules at p = 4 need 8)")
    ap.add_argument("--batch", type=int, default=None,
                    help="override the model's batch (at least 8: m = 8; a bf16 resnet row "
                         "at its batch of 32 takes about 15 minutes here)")
    a = ap.parse_args()
    models = a.models or (["mlp", "gpt"] if a.quick else list(MODELS))
    schedules = a.schedules or (["gpipe", "1f1b", "interleaved", "zb-h1"] if a.quick
                                else SCHEDULES)
    grid = []
    for model in models:
        for sched in schedules:
            for pp in a.pp or ([2] if a.quick else [2, 4]):
                for recompute in a.recompute or (["never"] if a.quick else ["never", "always"]):
                    for precision in a.precision or (["fp32"] if a.quick else ["fp32", "bf16"]):
                        grid.append((model, sched, pp, recompute, precision, 1))
    if not a.quick and not a.no_dp:
        grid.append(("gpt", "1f1b", 2, "never", "fp32", 2))  # dp 2, ZeRO-1
    worst = 0
    ratios = []
    busiest = collections.defaultdict(dict)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| model | schedule | pp | recompute | precision | dp | rank | predicted MB | "
          "measured MB | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model, sched, pp, recompute, precision, dp in grid:
            base = list(MODELS[model])
            if a.layers and "--layers" in base:
                base[base.index("--layers") + 1] = str(a.layers)
            if a.batch:
                base[base.index("--batch") + 1] = str(a.batch)
            args = base + ["--schedule", sched, "--pp", str(pp), "--microbatches",
                                    "8", "--recompute", recompute, "--precision", precision,
                                    "--nproc", str(pp * dp)]
            if dp > 1:
                args += ["--dp", str(dp), "--zero", "1"]
            memory, error = run(a.baton, args, os.path.join(tmp, "m.jsonl"), a.timeout)
            if memory is None:
                print(f"| {model} | {sched} | {pp} | {recompute} | {precision} | {dp} | - | "
                      f"refused: {error[0][:80] if error else '?'} | | |")
                continue
            key = (model, pp, recompute, precision, dp)
            busiest[key][sched] = (max(m["predicted_peak_bytes"] for m in memory),
                                   max(m["measured_peak_bytes"] for m in memory))
            for m in memory:
                p, q = m["predicted_peak_bytes"], m["measured_peak_bytes"]
                ratio = p / q if q > 0 else float("nan")
                worst = max(worst, abs(ratio - 1))
                ratios.append(ratio)
                print(f"| {model} | {sched} | {pp} | {recompute} | {precision} | {dp} | "
                      f"{m['rank']} | {p / 1e6:.2f} | {q / 1e6:.2f} | {ratio:.3f} |",
                      flush=True)
    # The schedules ordered by their busiest rank's peak, predicted and
    # measured (issue 32: the orders must match, e.g. v-min < v-half < 1f1b < gpipe).
    for key, peaks in busiest.items():
        if len(peaks) < 2:
            continue
        by = lambda i: " < ".join(s for s, _ in sorted(peaks.items(), key=lambda kv: kv[1][i]))
        predicted, measured = by(0), by(1)
        # Two schedules whose measured peaks are within 1% of each other are
        # a tie (mlp's peak is the optimizer's step under every flushing
        # schedule, a few kB apart): a pair the prediction orders the other
        # way is a difference only where the measured peaks are further apart.
        crossed = [(a, b) for a in peaks for b in peaks
                   if peaks[a][1] < peaks[b][1] * 0.99 and peaks[a][0] > peaks[b][0]]
        verdict = ("same order" if predicted == measured else
                   "same order up to ties within 1%" if not crossed else
                   "ORDER DIFFERS: " + ", ".join(f"{a} < {b} measured" for a, b in crossed))
        print(f"{' '.join(map(str, key))}: predicted {predicted}; measured {measured}: {verdict}")
    within = lambda t: sum(abs(r - 1) <= t for r in ratios)
    print(f"{len(ratios)} rank figures: {within(0.05)} within 5%, {within(0.10)} within 10%")
    print(f"worst |predicted / measured - 1|: {worst:.3f} (target 0.05); "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
