#!/usr/bin/env bash
# Every file a checkpoint's manifest names loads with Python's torch.load and
# its defaults, with the manifest's shapes and dtypes, also those of a tp x dp
# ZeRO-1 run: in Debian's torch 1.13 (/usr/bin/python3) and in the PyPI
# torch 2.x (python3 on the PATH), whose torch.load defaults to
# weights_only=True (PyTorch 2.6+) and refuses TorchScript's type tags.
# Skipped (77) when neither Python can import torch.
source "$(dirname "$0")/lib/common.sh"
torch_pythons
load() {  # load <dir>: every Python's torch.load of every file
  for p in "${pythons[@]}"; do
    "$p" "$(dirname "$0")/lib/load_checkpoint.py" "$1" > "$tmp/load.out" 2>&1 \
      || fail "torch.load of $1 with $p: $(tail -3 "$tmp/load.out")"
    grep "^loaded" "$tmp/load.out"
  done
}

for optimizer in adam sgd; do
  timeout 300 "$baton" train "${T[@]}" --threads 1 --optimizer "$optimizer" --save "$tmp/$optimizer" \
    > "$tmp/$optimizer.out" 2>&1 || fail "$optimizer run: $(tail -3 "$tmp/$optimizer.out")"
  load "$tmp/$optimizer"
done
# The GPT's layers (attention, embeddings) too, tied and trained in bf16 (fp32 masters saved).
timeout 300 "$baton" train --model gpt --layers 2 --hidden 32 --heads 2 --context 16 --pp 2 --nproc 2 \
  --microbatches 2 --batch 4 --steps 1 --threads 1 --tie-embeddings --precision bf16 \
  --save "$tmp/gpt" > "$tmp/gpt.out" 2>&1 \
  || fail "gpt run: $(tail -3 "$tmp/gpt.out")"
load "$tmp/gpt"
# Split over tp ranks and with the optimizer state sharded over dp replicas: the files of whole layers.
timeout 300 "$baton" train --model gpt --layers 2 --hidden 32 --heads 2 --context 16 --dp 2 --tp 2 --pp 1 \
  --nproc 4 --zero 1 --microbatches 2 --batch 4 --steps 1 --threads 1 --save "$tmp/gpt_tp" > "$tmp/gpt_tp.out" 2>&1 \
  || fail "gpt tp run: $(tail -3 "$tmp/gpt_tp.out")"
load "$tmp/gpt_tp"
echo "ok"
