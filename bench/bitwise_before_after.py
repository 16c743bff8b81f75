#!/usr/bin/env python3
"""Two baton binaries, the same runs: are the losses and checkpoints bit for bit the same?

For a refactor that must change no number (issue 31's options table): each configuration
trains 3 steps with binary A and with binary B, saving at the end, and the script compares
every step's loss as printed in --metrics (as text, so bit for bit) and the SHA-256 of every
file of the final checkpoint but manifest.json, whose recorded config may gain keys (it
prints which manifest keys differ). Both binaries must be built against the same LibTorch.

Usage: python3 bench/bitwise_before_after.py OLD_BATON NEW_BATON
"""
import hashlib, json, os, subprocess, sys, tempfile

GPT = ["--model", "gpt", "--layers", "4", "--hidden", "32", "--heads", "4", "--context", "16",
       "--batch", "16", "--microbatches", "4"]
MLP = ["--model", "mlp", "--layers", "8", "--hidden", "32", "--batch", "32", "--microbatches", "4"]
CONFIGS = {
    "mlp 1f1b": MLP + ["--pp", "2", "--schedule", "1f1b"],
    "mlp gpipe sgd": MLP + ["--pp", "2", "--schedule", "gpipe", "--optimizer", "sgd"],
    "mlp dp2 zero1": MLP + ["--pp", "2", "--dp", "2", "--zero", "1"],
    "mlp chimera": MLP + ["--pp", "2", "--schedule", "chimera"],
    "mlp tp2": MLP + ["--pp", "2", "--tp", "2"],
    "gpt interleaved": GPT + ["--pp", "2", "--schedule", "interleaved"],
    "gpt zb-h1": GPT + ["--pp", "2", "--schedule", "zb-h1"],
    "gpt zb-v": GPT + ["--pp", "2", "--schedule", "zb-v"],
    "gpt dualpipev": GPT + ["--pp", "2", "--schedule", "dualpipev"],
    "gpt tp2": GPT + ["--pp", "2", "--tp", "2"],
    "gpt tied": GPT + ["--pp", "2", "--tie-embeddings"],
    "gpt bf16 clip": GPT + ["--pp", "2", "--precision", "bf16", "--clip-grad-norm", "1"],
    "gpt recompute cosine": GPT + ["--pp", "2", "--recompute", "always", "--lr-schedule", "cosine"],
    "llama 1f1b": ["--model", "llama", "--layers", "2", "--hidden", "32", "--heads", "4",
                   "--context", "16", "--batch", "16", "--microbatches", "4", "--pp", "2"],
    "mlp 2bw (no save)": MLP + ["--pp", "2", "--schedule", "2bw"],
    "mlp balance 3,5": MLP + ["--pp", "2", "--balance", "3,5"],
    "gpt selective": GPT + ["--pp", "2", "--recompute", "selective"],
    "gpt selective bf16": GPT + ["--pp", "2", "--recompute", "selective", "--precision", "bf16"],
    "llama selective": ["--model", "llama", "--layers", "2", "--hidden", "32", "--heads", "4",
                        "--context", "16", "--batch", "16", "--microbatches", "4", "--pp", "2",
                        "--recompute", "selective"],
}


def world(args):
    size = 1
    for flag in ("--pp", "--dp", "--tp"):
        if flag in args:
            size *= int(args[args.index(flag) + 1])
    return size


def run(binary, args, folder):
    metrics = os.path.join(folder, "m.jsonl")
    save = [] if "2bw" in args else ["--save", os.path.join(folder, "save")]
    cmd = [binary, "train", *args, "--nproc", str(world(args)), "--threads", "1", "--steps", "3",
           "--metrics", metrics, *save]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    losses = [line.split('"loss":')[1].split(",")[0] for line in open(metrics) if '"step"' in line
              and '"loss"' in line]
    hashes, manifest = {}, {}
    if save:
        root = os.path.join(folder, "save")
        for base, _, files in os.walk(root):
            for name in files:
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                if name == "manifest.json":
                    manifest[rel] = json.load(open(path))
                else:
                    hashes[rel] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return losses, hashes, manifest


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def main():
    old, new = sys.argv[1], sys.argv[2]
    same = 0
    for name, args in CONFIGS.items():
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            la, ha, ma = run(old, args, a)
            lb, hb, mb = run(new, args, b)
        equal = la == lb and ha == hb
        same += equal
        keys = set()
        for rel in set(ma) | set(mb):
            fa, fb = flat(ma.get(rel, {})), flat(mb.get(rel, {}))
            keys |= {k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k)}
        print(f"{name:22s} losses {'equal' if la == lb else 'DIFFER'} ({len(la)} steps), "
              f"{len(ha)} checkpoint files {'equal' if ha == hb else 'DIFFER'}; manifest keys "
              f"that differ: {sorted(keys) or 'none'}")
    print(f"{same} of {len(CONFIGS)} configurations bit for bit equal; load average "
          f"{os.getloadavg()[0]:.2f}")
    return 0 if same == len(CONFIGS) else 1


if __name__ == "__main__":
    sys.exit(main())
