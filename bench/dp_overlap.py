#!/usr/bin/env python3
"""How much of the data-parallel gradient all-reduce the overlap hides, measured against the
simulator's prediction (issues 9 and 20).

For each configuration it runs `baton train --dp 2 --compare-sim` on local ranks, with REDUCE_GRAD
where the lowering pass puts it (each stage's buckets right after its last backward on the rank,
overlapping whatever the rank computes after that) and with --overlap-grad-reduce off (every
REDUCE_GRAD at the end of the rank's actions). The executor times each REDUCE_GRAD from its
action to its all-reduce's finish; per rank, `reduction_ms` is the time they were in flight and
`exposed_reduction_ms` how far the last one ended past the rank's last compute (medians over the
steps, the final metrics line). Hidden = 1 - exposed / total. --compare-sim prints the same two
figures for the last step from the simulator, fed with the measured F/B times and an all-reduce
cost probed over the dp group.

The model is an MLP of 8 Linears (in = hidden), SGD, 1 thread per rank. Usage:
  python3 bench/dp_overlap.py [--baton build/baton] [--steps 30] [--hidden 1024]
                              [--batch 64] [--microbatches 4]
"""
import argparse, json, os, re, statistics, subprocess, tempfile

SIM = re.compile(r"compare-sim: rank (\d+) all-reduce measured ([0-9.]+) ms, exposed ([0-9.]+) ms "
                 r"\(hidden ([0-9.]+)%\); simulated ([0-9.]+) ms, exposed ([0-9.]+) ms "
                 r"\(hidden ([0-9.]+)%\)")


def run(binary, a, pp, schedule, overlap):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [binary, "train", "--model", "mlp", "--layers", "8", "--hidden", str(a.hidden),
               "--in-features", str(a.hidden), "--classes", "10", "--batch", str(a.batch),
               "--microbatches", str(a.microbatches), "--dp", "2", "--pp", str(pp),
               "--nproc", str(2 * pp), "--threads", "1", "--schedule", schedule,
               "--optimizer", "sgd", "--lr", "0.001", "--steps", str(a.steps),
               "--log-every", "100000", "--metrics", metrics, "--compare-sim",
               "--overlap-grad-reduce", "on" if overlap else "off"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        lines = [json.loads(line) for line in open(metrics)]
    steps = [r for r in lines if "step_ms" in r][len(lines) // 3:]  # past the warm-up
    final = [r for r in lines if r.get("final")][0]
    simulated = {int(m.group(1)): (float(m.group(5)), float(m.group(6))) for m in SIM.finditer(out)}
    return statistics.median(r["step_ms"] for r in steps), final["memory"], simulated


def hidden(total, exposed):
    return 100 * max(0.0, 1 - exposed / total) if total > 0 else float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--microbatches", type=int, default=4)
    a = p.parse_args()
    print(f"mlp 8 x {a.hidden}, batch {a.batch} (2 replicas), m={a.microbatches}, {a.steps} steps; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'pp':>2} {'schedule':>11} {'overlap':>7} {'step ms':>8} | per rank: all-reduce ms, "
          f"exposed ms, hidden measured / simulated (last step)")
    for pp, schedule in [(1, "interleaved"), (2, "1f1b"), (2, "interleaved")]:
        for overlap in (True, False):
            step, memory, simulated = run(a.baton, a, pp, schedule, overlap)
            cells = []
            for m in memory:
                r, total, exposed = m["rank"], m["reduction_ms"], m["exposed_reduction_ms"]
                sim_total, sim_exposed = simulated.get(r, (float("nan"), float("nan")))
                cells.append(f"r{r} {total:6.2f} {exposed:6.2f} {hidden(total, exposed):5.1f}%"
                             f"/{hidden(sim_total, sim_exposed):5.1f}%")
            print(f"{pp:>2} {schedule:>11} {'on' if overlap else 'off':>7} {step:8.2f} | "
                  + "  ".join(cells), flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
