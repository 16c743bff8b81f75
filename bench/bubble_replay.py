#!/usr/bin/env python3
"""Where the main job's bubble goes under load: the runtime's own waits against the spread of
the actions' durations, in one run (issue 20).

`baton train --compare-sim` simulates the step from each stage's *mean* F and B time; with busy
co-runners on the cores the actions' durations spread (a rank descheduled inside an action makes
that action long), and a pipeline pays for a long action on its critical path with idle time on
the other rank, which a simulation from means does not see. This bench runs the main job
(examples/fashion_mnist.toml, 2 ranks, `--compare-sim --trace`) with N busy co-runners and, from
the trace of the measured step, replays it: every action starts as soon as its own rank's
previous action and its data (the previous stage's F, the next stage's B, plus the probed link
latency) allow, each taking its own measured duration. Then
  - measured - replayed is what the runtime lost beyond the dependencies (waking, picking up a
    message, bookkeeping between actions, a rank descheduled between actions);
  - replayed - simulated is what the durations' spread costs the schedule itself.
Their sum is the bubble gap `--compare-sim` reports (measured - simulated, one step). The runtime's
part is then taken apart by what each late action waited on last: a message from the other rank
(a receive that woke late) or the rank's own previous action (the rank went on late).

With --realtime every run is made twice in turn, without and with `--realtime on` (the ranks in
SCHED_FIFO, baton/core/realtime.h), and each row also gives the co-runners' share of a core
during the run: what the ranks' priority takes from them.

Usage: python3 bench/bubble_replay.py [--baton build/baton] [--co-runners 0 1] [--runs 3]
                                      [--steps 300] [--realtime]
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUSY = "while True:\n    pass\n"


def bubble(events, makespan):
    busy = sum(e["end"] - e["start"] for e in events)
    ranks = len({e["rank"] for e in events})
    return 100 * (1 - busy / (ranks * makespan))


def dependencies(events):
    """For each action (by id): its rank's previous action and the action whose data it needs
    (the previous stage's F, the next stage's B, or the last stage's own F), or None."""
    last_stage = max(e["stage"] for e in events)
    by_key = {(e["kind"], e["stage"], e["mb"]): e for e in events}
    deps = {}
    for rank in {e["rank"] for e in events}:
        mine = sorted((e for e in events if e["rank"] == rank), key=lambda e: e["start"])
        for prev, e in zip([None] + mine, mine):
            s, mb = e["stage"], e["mb"]
            data = None
            if e["kind"] == "F" and s > 0:
                data = by_key[("F", s - 1, mb)]
            elif e["kind"] == "B":
                data = by_key[("B", s + 1, mb)] if s < last_stage else by_key[("F", s, mb)]
            deps[id(e)] = (prev, data)
    return deps


def replay(events, latency_ms):
    """Each action at the earliest its rank order and data allow, with its own duration."""
    deps = dependencies(events)
    t0 = min(e["start"] for e in events)
    done = {}

    def end_of(e):
        if id(e) not in done:
            prev, data = deps[id(e)]
            ready = max(t0, end_of(prev) if prev else t0)
            if data is not None:
                ready = max(ready, end_of(data) + (latency_ms if data["rank"] != e["rank"] else 0))
            done[id(e)] = ready + (e["end"] - e["start"])
        return done[id(e)]

    sys.setrecursionlimit(100000)
    return max(end_of(e) for e in events) - t0


def late_starts(events, latency_ms):
    """Each action's start past what its measured rank predecessor and data allowed, summed by
    what bound it: a message from the other rank (waking on it) or its own rank's previous
    action (the rank itself was late to go on). In ms."""
    late = {"message": 0.0, "own rank": 0.0}
    deps = dependencies(events)
    for e in events:
        prev, data = deps[id(e)]
        own = prev["end"] if prev else None
        message = data["end"] + latency_ms if data and data["rank"] != e["rank"] else None
        bounds = [(t, w) for t, w in ((own, "own rank"), (message, "message")) if t is not None]
        if bounds:
            t, what = max(bounds)
            late[what] += max(0.0, e["start"] - t)
    return late


def one_run(binary, steps, realtime="off"):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.json")
        out = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "examples",
                              "fashion_mnist.toml"), "--nproc", "2", "--steps", str(steps),
                              "--compare-sim", "--trace", trace, "--realtime", realtime],
                             check=True, capture_output=True, text=True).stdout
        raw = json.load(open(trace))
    raw = raw["traceEvents"] if isinstance(raw, dict) else raw
    events = [{"rank": e["tid"], "kind": e["args"]["kind"], "stage": e["args"]["stage"],
               "mb": e["args"]["microbatch"], "start": e["ts"] / 1e3,
               "end": (e["ts"] + e["dur"]) / 1e3}
              for e in raw if e.get("ph") == "X" and e.get("pid") == 0
              and e.get("args", {}).get("kind") in ("F", "B")]
    link = re.search(r"compare-sim: link ([0-9.]+) us", out)
    sim = re.search(r"measured step ([0-9.]+) ms, simulated ([0-9.]+) ms \(efficiency [0-9.]+%\); "
                    r"bubble measured ([0-9.]+)%, simulated ([0-9.]+)%", out)
    if not (link and sim and events):
        raise SystemExit("no --compare-sim lines or trace events in baton train's output:\n" + out)
    latency = float(link.group(1)) / 1e3
    makespan = max(e["end"] for e in events) - min(e["start"] for e in events)
    replayed = replay(events, latency)
    late = late_starts(events, latency)
    return {"measured": bubble(events, makespan), "replayed": bubble(events, replayed),
            "late_message": late["message"], "late_own": late["own rank"],
            "simulated": float(sim.group(4)), "reported": float(sim.group(3)),
            "step": makespan, "replayed_step": replayed}


def cpu_seconds(procs):
    """User + system CPU seconds the processes have used (/proc/PID/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for proc in procs:
        fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default=os.path.join(ROOT, "build", "baton"))
    p.add_argument("--co-runners", type=int, nargs="+", default=[0, 1])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--realtime", action="store_true",
                   help="each run without and then with --realtime on")
    a = p.parse_args()
    print("load average before:", open("/proc/loadavg").read().strip(), flush=True)
    print(" N run     bubble: measured replayed simulated | runtime's own  durations' spread  "
          "(points; step ms measured / replayed; late starts, both ranks; rt: --realtime on)")
    for n in a.co_runners:
        procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]
        try:
            for r, realtime in [(r, mode) for r in range(a.runs)
                                for mode in (("off", "on") if a.realtime else ("off",))]:
                cpu, wall = cpu_seconds(procs), time.monotonic()
                x = one_run(a.baton, a.steps, realtime)
                share = (cpu_seconds(procs) - cpu) / (time.monotonic() - wall)
                label = f"{r + 1:>3}{' rt' if realtime == 'on' else '   '}"
                print(f"{n:>2} {label}  {x['measured']:>12.1f} {x['replayed']:>8.1f} "
                      f"{x['simulated']:>9.1f} | {x['measured'] - x['replayed']:>13.1f}  "
                      f"{x['replayed'] - x['simulated']:>17.1f}  ({x['step']:.2f} / "
                      f"{x['replayed_step']:.2f}; late starts after a message "
                      f"{x['late_message']:.2f} ms, after the rank's own action "
                      f"{x['late_own']:.2f} ms)"
                      + (f"; co-runners {share:.2f} of a core" if n else ""), flush=True)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    print("load average after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
