#!/usr/bin/python3
"""baton's model zoo written in plain PyTorch, and a one-process training-step timer for it.

The models match baton/nn/models.cpp and baton/nn/transformer.cpp layer for layer (types,
sizes, activations, loss); only the initial values differ, which timing does not see:
  mlp   `layers` Linears in_features -> hidden -> ... -> classes, ReLU after all but the last;
        float [B, in_features] (synthetic, a fresh batch per step), cross entropy.
  cnn   conv(1, 32, 3, pad 1) + ReLU, max-pool 2, conv(32, 64, 3, pad 1) + ReLU, max-pool 2,
        flatten, Linear(3136, 128) + ReLU, Linear(128, 10); float [B, 1, 28, 28], cross entropy.
  gpt   token + position embedding, `layers` pre-LN blocks (causal attention through qkv/proj
        Linears, exact GELU MLP of width 4 * hidden), final LayerNorm + LM head; int64 tokens
        [B, context], byte-level vocab 256 (baton/data/text.h); cross entropy over every position.

The timed window is baton's `step_ms` (baton/train/trainer.cpp): from after zero_grad to after
the optimizer step, i.e. forward, loss (read with .item(), as baton's executor does), backward,
optimizer step. Batches are made before the clock starts, as baton's are.

Prints one JSON line: {"model": ..., "median_step_ms": ..., "cpu_ms_per_step": ..., "step_ms":
[...], "params": ...}; cpu_ms_per_step is the process's CPU time over the timed steps (whole
steps: batch, zero_grad and the timed window) divided by their number.
Usage: /usr/bin/python3 bench/peers/zoo.py --model mlp|cnn|gpt [--layers 8] [--hidden 1024]
       [--in-features 1024] [--batch 256] [--steps 30] [--warmup 5] [--optimizer adam]
       [--lr 0.001] [--threads 1]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256  # baton::data::TextCorpus::kVocabSize: every byte is a token


def mlp(layers, hidden, in_features, classes):
    modules = []
    for i in range(layers):
        modules.append(nn.Linear(in_features if i == 0 else hidden,
                                 classes if i == layers - 1 else hidden))
        if i != layers - 1:
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10))


class TokenEmbedding(nn.Module):
    def __init__(self, vocab, context, hidden):
        super().__init__()
        self.token = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(context, hidden)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1), dtype=tokens.dtype, device=tokens.device)
        return self.token(tokens) + self.position(positions)


class TransformerBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def attention(self, x):
        batch, time_, hidden = x.shape
        head_dim = hidden // self.heads
        qkv = self.qkv(x).view(batch, time_, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q.matmul(k.transpose(-2, -1)) / math.sqrt(head_dim)
        future = torch.ones(time_, time_, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        mixed = scores.softmax(-1).matmul(v)
        return self.proj(mixed.transpose(1, 2).reshape(batch, time_, hidden))

    def forward(self, x):
        h = x + self.attention(self.ln1(x))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class LmHead(nn.Module):
    def __init__(self, hidden, vocab):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.head(self.ln(x))


def gpt(layers, hidden, heads, vocab, context):
    assert hidden % heads == 0, f"hidden {hidden} must be a multiple of heads {heads}"
    return nn.Sequential(TokenEmbedding(vocab, context, hidden),
                         *[TransformerBlock(hidden, heads) for _ in range(layers)],
                         LmHead(hidden, vocab))


def classification_loss(logits, target):
    return F.cross_entropy(logits, target)


def gpt_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))


def make(a):
    """(model, loss, batch(step) -> (inputs, targets)) for the options `a`."""
    gen = torch.Generator().manual_seed(a.seed)
    if a.model == "mlp":
        model = mlp(a.layers, a.hidden, a.in_features, a.classes)
        batch = lambda: (torch.randn(a.batch, a.in_features, generator=gen),
                         torch.randint(0, a.classes, (a.batch,), generator=gen))
        return model, classification_loss, batch
    if a.model == "cnn":
        batch = lambda: (torch.rand(a.batch, 1, 28, 28, generator=gen),
                         torch.randint(0, 10, (a.batch,), generator=gen))
        return fashion_cnn(), classification_loss, batch
    if a.model == "gpt":
        model = gpt(a.layers, a.hidden, a.heads, VOCAB, a.context)
        batch = lambda: (torch.randint(0, VOCAB, (a.batch, a.context), generator=gen),
                         torch.randint(0, VOCAB, (a.batch, a.context), generator=gen))
        return model, gpt_loss, batch
    raise SystemExit(f"zoo.py: unknown model '{a.model}': known models are mlp, cnn, gpt")


def make_optimizer(name, params, lr):
    kinds = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if name not in kinds:
        raise SystemExit(f"zoo.py: unknown optimizer '{name}': known are sgd, adam, adamw")
    return kinds[name](params, lr=lr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    # The defaults are baton's (baton/train/config.h).
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--in-features", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model, loss_fn, next_batch = make(a)
    optimizer = make_optimizer(a.optimizer, model.parameters(), a.lr)
    times_ms = []
    cpu_start = time.process_time()
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            cpu_start = time.process_time()
        inputs, targets = next_batch()
        optimizer.zero_grad()
        start = time.perf_counter()
        loss = loss_fn(model(inputs), targets)
        loss.item()
        loss.backward()
        optimizer.step()
        elapsed_ms = (time.perf_counter() - start) * 1000
        if step >= a.warmup:
            times_ms.append(elapsed_ms)
    cpu_ms = (time.process_time() - cpu_start) * 1000
    print(json.dumps({"model": a.model,
                      "median_step_ms": statistics.median(times_ms) if times_ms else None,
                      "cpu_ms_per_step": cpu_ms / a.steps if a.steps else None,
                      "step_ms": times_ms, "params": sum(p.numel() for p in model.parameters()),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
