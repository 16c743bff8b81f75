#!/usr/bin/env python3
"""A corpus larger than memory trains with flat memory (issue 34).

Writes a flat uint16 token file of --gib GiB of random ids (more than the
machine's RAM by default), trains llama on it for --steps steps at pp 2 with
`baton train --data FILE --data-format flat-uint16`, and samples each rank's
RssAnon (/proc/PID/status: anonymous memory; the mapped file's pages are the
kernel's to reclaim) every 50 ms. Then the same run on a 10 MB file. Prints
each rank's peak RssAnon for both and the difference (target: within 100 MB),
with the load average, and deletes the large file.

    python3 bench/large_corpus.py [--baton build/baton] [--gib 32] [--steps 50]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

VOCAB = 32000


def write_tokens(path, n_tokens, seed):
    rng = np.random.default_rng(seed)
    chunk = 1 << 27  # 128 Mi tokens, 256 MiB
    with open(path, "wb") as f:
        left = n_tokens
        while left > 0:
            n = min(chunk, left)
            rng.integers(0, VOCAB, size=n, dtype=np.uint16).tofile(f)
            left -= n


def rss_anon_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run(baton, data, steps):
    cmd = [baton, "train", "--model", "llama", "--layers", "4", "--hidden", "256", "--heads", "4",
           "--context", "128", "--batch", "16", "--microbatches", "4", "--pp", "2", "--nproc", "2",
           "--steps", str(steps), "--threads", "1", "--data", data, "--data-format", "flat-uint16",
           "--vocab", str(VOCAB), "--log-every", "1000"]
    start = time.time()
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = {}
    while launcher.poll() is None:
        try:
            children = open(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read().split()
        except OSError:
            children = []
        for rank, pid in enumerate(sorted(int(c) for c in children)):
            kb = rss_anon_kb(pid)
            if kb is not None:
                peaks[rank] = max(peaks.get(rank, 0), kb)
        time.sleep(0.05)
    out = launcher.stdout.read()
    if launcher.returncode != 0:
        sys.exit(f"baton train exited {launcher.returncode}:\n{out[-2000:]}")
    return peaks, time.time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baton", default="build/baton")
    parser.add_argument("--gib", type=float, default=32)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="baton-large-", dir=args.dir)
    large, small = os.path.join(folder, "large.bin"), os.path.join(folder, "small.bin")
    try:
        print(f"load average at the start: {open('/proc/loadavg').read().split()[0]}")
        t = time.time()
        write_tokens(large, int(args.gib * (1 << 30) / 2), 1)
        print(f"wrote {args.gib:g} GiB of random uint16 ids in {time.time() - t:.1f} s")
        write_tokens(small, 5 * 1000 * 1000, 2)
        small_peaks, small_s = run(args.baton, small, args.steps)
        large_peaks, large_s = run(args.baton, large, args.steps)
        print(f"load average at the end: {open('/proc/loadavg').read().split()[0]}")
        print("| rank | peak RssAnon, 10 MB corpus | peak RssAnon, large corpus | difference |")
        print("|---|---|---|---|")
        for rank in sorted(large_peaks):
            a, b = small_peaks.get(rank, 0) / 1024, large_peaks[rank] / 1024
            print(f"| {rank} | {a:.1f} MB | {b:.1f} MB | {b - a:+.1f} MB |")
        print(f"runs: {small_s:.1f} s and {large_s:.1f} s (checks, {args.steps} steps)")
    finally:
        for path in (large, small):
            if os.path.exists(path):
                os.remove(path)
        os.rmdir(folder)


if __name__ == "__main__":
    main()
