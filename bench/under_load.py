#!/usr/bin/env python3
"""baton against the plain PyTorch script while N busy processes share the cores, in one run.

For each N in --co-runners (default 0 1 2) it starts N co-runners (Python processes spinning
on one core each, as a co-scheduled job or a compiler would), then runs the workloads of
bench/pipeline_vs_peers.py (8-layer MLP, batch 256, 2 ranks x 1 thread, cut 4 + 4):
  - baton train --schedule 1f1b over shared memory (and over Gloo with --gloo);
  - bench/peers/gpipe_send_recv.py, the plain PyTorch GPipe with gloo send/recv, under Debian's
    torch 1.13 and the PyPI torch 2.x (the faster of the two is the peer);
and prints median step times, baton's speedup over the script, baton's --compare-sim
efficiency and its measured and simulated bubble. The runs of one N alternate baton and the
script, so both see the same load. With --main it also runs the main job
(examples/fashion_mnist.toml, --compare-sim) and prints its bubble gap; --realtime adds a run of
it with --realtime on (the ranks in SCHED_FIFO; docs/cli.md, "Sharing the machine").

Usage: python3 bench/under_load.py [--baton build/baton] [--steps 40] [--co-runners 0 1 2]
                                  [--gloo] [--main [--realtime]]
"""
import argparse, os, re, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline_vs_peers as peers  # noqa: E402

WORKLOADS = [(16, 32), (1024, 8)]
BUSY = "while True:\n    pass\n"


def start_co_runners(n):
    return [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def baton_over(binary, hidden, m, steps, transport):
    """peers.baton with --transport: (step ms, efficiency %, (measured, simulated) bubble)."""
    if transport == "auto":
        return peers.baton(binary, hidden, m, "1f1b", steps, "cpu")
    wrapper = os.path.join(tempfile.gettempdir(), "baton_gloo_wrapper.sh")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec "{os.path.abspath(binary)}" "$@" --transport gloo\n')
    os.chmod(wrapper, 0o755)
    return peers.baton(wrapper, hidden, m, "1f1b", steps, "cpu")


def main_job(binary, steps=300, realtime="off"):
    out = subprocess.run([binary, "train", "--config", os.path.join(HERE, "..", "examples",
                                                                     "fashion_mnist.toml"),
                          "--nproc", "2", "--compare-sim", "--steps", str(steps),
                          "--realtime", realtime],
                         check=True, capture_output=True, text=True).stdout
    b = re.search(r"bubble median measured ([0-9.]+)%, simulated ([0-9.]+)%", out)
    return (float(b.group(1)), float(b.group(2))) if b else (float("nan"), float("nan"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", default="build/baton")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--co-runners", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--gloo", action="store_true", help="also baton over --transport gloo")
    p.add_argument("--main", action="store_true", help="also the main job's bubble gap")
    p.add_argument("--realtime", action="store_true",
                   help="with --main: the main job also with --realtime on (ranks in SCHED_FIFO)")
    a = p.parse_args()
    peers.ENV = peers.blas_env(a.baton)  # Debian's torch on baton's OpenBLAS kernels
    debian = "/usr/bin/python3" if peers.has_torch("/usr/bin/python3") else None
    print(f"{'N':>2} {'hidden':>6} {'m':>3} {'baton shm':>9} {'baton gloo':>10} {'script':>8} "
          f"{'vs script':>9} {'gloo vs script':>14} {'eff':>6} {'bubble meas/sim':>15} "
          f"{'load':>5}  (ms per step, medians)", flush=True)
    for n in a.co_runners:
        co = start_co_runners(n)
        try:
            time.sleep(1.0)
            for hidden, m in WORKLOADS:
                shm, eff, bubbles = baton_over(a.baton, hidden, m, a.steps, "auto")
                gloo = (baton_over(a.baton, hidden, m, a.steps, "gloo")[0] if a.gloo
                        else float("nan"))
                old = (peers.peer(debian, "gpipe_send_recv.py", hidden, m, a.steps)
                       if debian else float("nan"))
                new = peers.peer(sys.executable, "gpipe_send_recv.py", hidden, m, a.steps,
                                 ("--device", "cpu"))
                script = min(x for x in (old, new, float("inf")) if x == x)
                load = os.getloadavg()[0]
                print(f"{n:>2} {hidden:>6} {m:>3} {shm:>9.2f} {gloo:>10.2f} {script:>8.2f} "
                      f"{script / shm:>8.2f}x {script / gloo:>13.2f}x {eff:>5.1f}% "
                      f"{'/'.join(bubbles) if bubbles else '-':>15} {load:>5.1f}", flush=True)
            for realtime in (("off", "on") if a.realtime else ("off",)) if a.main else ():
                measured, simulated = main_job(a.baton, realtime=realtime)
                print(f"{n:>2} main job{' --realtime on' if realtime == 'on' else ''}: bubble "
                      f"measured {measured:.1f}%, simulated {simulated:.1f}%, gap "
                      f"{measured - simulated:.1f} points (load {os.getloadavg()[0]:.1f})",
                      flush=True)
        finally:
            stop(co)


if __name__ == "__main__":
    main()
