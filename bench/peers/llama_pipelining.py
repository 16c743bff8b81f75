#!/usr/bin/env python3
"""The torch.distributed.pipelining peer for bench/llama_vs_pipelining.py: baton's llama
(nn/llama.h) written in PyTorch, on 2 ranks over gloo on the CPU, one thread per rank:
Schedule1F1B on two stages (the default), or with --schedule interleaved-1f1b, interleaved-zb or
zbv (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble) on four,
two a rank (looped, or V-shaped for zbv).

The model is baton's, layer for layer: token embedding, `layers` pre-norm blocks (RMSNorm,
bias-free wq/wk/wv/wo with rotary embeddings in the rotate-half layout on q and k, causal
attention, SwiGLU gate/up/down of llama_ffn_hidden(hidden) units), final RMSNorm and a
bias-free LM head, cut as baton's uniform balance cuts layers + 2 layers (the embedding first,
the head last; the first stages take one more where they do not divide). As in baton,
the boundary carries the hidden states and the int64 positions the embedding made. The stages
are given example micro-batches (static metadata): the wheel's runtime shape inference needs
NumPy, and the example hidden states must require a gradient, or the backward stops with "A
GradientEdge root requires a gradient but got <class 'NoneType'>". Attention is torch's
scaled_dot_product_attention(is_causal=True), what a PyTorch user writes.

Prints one JSON line: {"median_step_ms": ...}.
Usage: python3 llama_pipelining.py --hidden 1024 --heads 16 --layers 4 --context 32
       --batch 8 --microbatches 4 --steps 12 [--schedule 1f1b]
"""
import argparse, json, os, statistics, subprocess, sys, time
import torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B,
                                          ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble)


def ffn_hidden(hidden):
    """baton's llama_ffn_hidden: 2/3 of 4 hidden, rounded up to a multiple of 256."""
    return (2 * (4 * hidden) // 3 + 255) // 256 * 256


def rotary(x, positions, theta=10000.0):
    d = x.shape[-1]
    half = d // 2
    inverse_frequency = theta ** (torch.arange(half, dtype=torch.float32) * (-2.0 / d))
    angles = (positions.float()[..., None] * inverse_frequency)[:, None]  # [B, 1, T, d/2]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def positions_of(x):
    """0..T-1 in every row of x [B, T, H], as baton's embedding makes them."""
    b, t = x.shape[:2]
    return torch.arange(t).expand(b, t)


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        ffn = ffn_hidden(hidden)
        self.attention_norm = nn.RMSNorm(hidden, eps=1e-5)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        self.ffn_norm = nn.RMSNorm(hidden, eps=1e-5)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, positions):
        b, t, h = x.shape
        split = lambda y: y.view(b, t, self.heads, h // self.heads).transpose(1, 2)
        n = self.attention_norm(x)
        q = rotary(split(self.wq(n)), positions)
        k = rotary(split(self.wk(n)), positions)
        mixed = F.scaled_dot_product_attention(q, k, split(self.wv(n)), is_causal=True)
        x = x + self.wo(mixed.transpose(1, 2).reshape(b, t, h))
        m = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Part(nn.Module):
    """One pipeline stage: the embedding (first stage), blocks [begin, end), the final norm and
    the head (last stage). Its output is (hidden, positions), or the logits on the last stage."""

    def __init__(self, a, begin, end, first, last):
        super().__init__()
        self.token = nn.Embedding(a.vocab, a.hidden) if first else None
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads) for _ in range(begin, end))
        self.norm = nn.RMSNorm(a.hidden, eps=1e-5) if last else None
        self.head = nn.Linear(a.hidden, a.vocab, bias=False) if last else None

    def forward(self, x, positions=None):
        if self.token is not None:
            x = self.token(x)
            positions = positions_of(x).contiguous()
        for block in self.blocks:
            x = block(x, positions)
        if self.head is not None:
            return self.head(self.norm(x))
        return x, positions


# Each schedule's stages per rank and placement: stage -> rank.
SCHEDULES = {
    "1f1b": (Schedule1F1B, 1, lambda s: s),
    "interleaved-1f1b": (ScheduleInterleaved1F1B, 2, lambda s: s % 2),
    "interleaved-zb": (ScheduleInterleavedZeroBubble, 2, lambda s: s % 2),
    "zbv": (ScheduleZBVZeroBubble, 2, lambda s: s if s < 2 else 3 - s),
}


def layer_split(a, stages):
    """baton's uniform balance of layers + 2 layers (the embedding first, the head last) over
    `stages` stages: the first stages take one more where they do not divide. Returns each
    stage's (begin, end) block range."""
    total = a.layers + 2
    counts = [total // stages + (1 if s < total % stages else 0) for s in range(stages)]
    ranges, layer = [], 0
    for c in counts:
        ranges.append((layer, layer + c))
        layer += c
    # Layer 0 is the embedding and layer total - 1 the head: blocks are layers 1..layers.
    return [(max(lo, 1) - 1, min(hi, a.layers + 1) - 1) for lo, hi in ranges]


def main(a):
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    kind, per_rank, rank_of = SCHEDULES[a.schedule]
    n = 2 * per_rank
    split = layer_split(a, n)
    mb = a.batch // a.microbatches
    # Static metadata (example micro-batches); see the module's docstring.
    hidden = (torch.empty(mb, a.context, a.hidden, requires_grad=True),
              torch.zeros(mb, a.context, dtype=torch.long))
    tokens_mb = torch.zeros(mb, a.context, dtype=torch.long)
    logits = torch.empty(mb, a.context, a.vocab)
    stages, params = [], []
    for s in range(n):
        if rank_of(s) != rank:
            continue
        part = Part(a, *split[s], first=s == 0, last=s == n - 1)
        params += list(part.parameters())
        stages.append(PipelineStage(part, s, n, torch.device("cpu"),
                                    input_args=tokens_mb if s == 0 else hidden,
                                    output_args=logits if s == n - 1 else hidden))
    opt = torch.optim.SGD(params, lr=0.01)
    loss_fn = lambda out, target: F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    schedule = kind(stages[0] if per_rank == 1 else stages, n_microbatches=a.microbatches,
                    loss_fn=loss_fn)
    tokens = torch.randint(0, a.vocab, (a.batch, a.context))
    targets = torch.randint(0, a.vocab, (a.batch, a.context))
    has_first, has_last = rank_of(0) == rank, rank_of(n - 1) == rank
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad()
        kwargs = dict(target=targets, losses=[]) if has_last else {}
        if has_first:
            schedule.step(tokens, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()
        dist.barrier()
        times.append((time.perf_counter() - start) * 1000)
    if rank == 0:
        print(json.dumps({"median_step_ms": statistics.median(times[a.warmup:])}))
    dist.destroy_process_group()


def args():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 1024), ("heads", 16), ("vocab", 256),
                          ("context", 32), ("batch", 8), ("microbatches", 4), ("steps", 12),
                          ("warmup", 2), ("port", 29613)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
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
