#!/usr/bin/env python3
"""The plain PyTorch peer: an 8-layer MLP cut in two, GPipe with gloo dist.send/recv.

Two processes x 1 thread, the same model, batch and micro-batches as
`baton train --model mlp`. With --device cuda rank r runs on cuda:r, with NCCL.
Prints one JSON line: {"median_step_ms": ...}.
Usage: python3 gpipe_send_recv.py --hidden 16 --microbatches 32 [--steps 40] [--device cuda]
"""
import argparse, json, os, statistics, subprocess, sys, time
import torch, torch.distributed as dist, torch.nn as nn


def stage(rank, a):
    dims = [a.in_features] + [a.hidden] * (a.layers - 1) + [a.classes]
    layers = []
    for i in range(a.layers):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i != a.layers - 1:
            layers.append(nn.ReLU())
    half = 2 * (a.layers // 2)  # Linear+ReLU pairs on rank 0
    return nn.Sequential(*(layers[:half] if rank == 0 else layers[half:]))


def place(rank, a):
    """Joins the process group: gloo on the CPU, NCCL with rank r on cuda:r."""
    if a.device == "cuda":
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=2)
        return torch.device("cuda", rank)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    return torch.device("cpu")


def main(a):
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    device = place(rank, a)
    torch.manual_seed(0)
    model = stage(rank, a).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mb = a.batch // a.microbatches
    x = torch.randn(a.batch, a.in_features).to(device)
    y = torch.randint(0, a.classes, (a.batch,)).to(device)
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad()
        saved = []
        for i in range(a.microbatches):
            if rank == 0:
                out = model(x[i * mb:(i + 1) * mb])
                dist.send(out.detach(), 1)
                saved.append(out)
            else:
                inp = torch.empty(mb, a.hidden, device=device)
                dist.recv(inp, 0)
                inp.requires_grad_()
                loss = nn.functional.cross_entropy(model(inp), y[i * mb:(i + 1) * mb]) / a.microbatches
                saved.append((inp, loss))
        for i in range(a.microbatches):
            if rank == 0:
                grad = torch.empty(mb, a.hidden, device=device)
                dist.recv(grad, 1)
                saved[i].backward(grad)
            else:
                inp, loss = saved[i]
                loss.backward()
                dist.send(inp.grad, 0)
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
                          ("batch", 256), ("microbatches", 32), ("steps", 40), ("port", 29611)]:
        p.add_argument("--" + name, type=int, default=default)
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
