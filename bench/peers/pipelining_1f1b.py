#!/usr/bin/env python3
"""The torch.distributed.pipelining peer: the same 8-layer MLP in two stages, Schedule1F1B
(or ScheduleGPipe) over gloo on CPU, or with --device cuda over NCCL, rank r on cuda:r.
Needs torch 2.x (the PyPI wheel).

Prints one JSON line: {"median_step_ms": ...}.
Usage: python3 pipelining_1f1b.py --hidden 16 --microbatches 32 [--schedule 1f1b|gpipe]
       [--device cuda]
"""
import argparse, json, os, statistics, subprocess, sys, time
import torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpipe_send_recv import place, stage  # the same two halves, the same placement


def main(a):
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    device = place(rank, a)
    torch.manual_seed(0)
    model = stage(rank, a).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pipe_stage = PipelineStage(model, rank, 2, device)
    loss_fn = lambda out, target: nn.functional.cross_entropy(out, target)
    kind = Schedule1F1B if a.schedule == "1f1b" else ScheduleGPipe
    schedule = kind(pipe_stage, n_microbatches=a.microbatches, loss_fn=loss_fn)
    x = torch.randn(a.batch, a.in_features).to(device)
    y = torch.randint(0, a.classes, (a.batch,)).to(device)
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad()
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y, losses=[])
        opt.step()
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000)
    if rank == 0:
        print(json.dumps({"median_step_ms": statistics.median(times[3:])}))
    dist.destroy_process_group()


def args():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 8), ("hidden", 16), ("in-features", 64), ("classes", 10),
                          ("batch", 256), ("microbatches", 32), ("steps", 40), ("port", 29612)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    return p.parse_args()


if __name__ == "__main__":
    a = args()
    if "RANK" in os.environ:
        main(a)
    else:
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port), WORLD_SIZE="2",
                   OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([sys.executable, *sys.argv], env=dict(env, RANK=str(r))) for r in range(2)]
        sys.exit(max(p.wait() for p in procs))
