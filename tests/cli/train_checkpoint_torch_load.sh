#!/usr/bin/env bash
# Every file a checkpoint's manifest names loads with Python's torch.load
# (/usr/bin/python3, Debian's torch 1.13), with the manifest's shapes and
# dtypes, also those of a tp x dp ZeRO-1 run; skipped (77) when that Python
# cannot import torch.
source "$(dirname "$0")/lib/common.sh"
python=/usr/bin/python3
[ -x "$python" ] || { echo "skipped: no $python"; exit 77; }
"$python" -c 'import torch' 2>/dev/null || { echo "skipped: $python cannot import torch"; exit 77; }

for optimizer in adam sgd; do
  timeout 300 "$baton" train "${T[@]}" --threads 1 --optimizer "$optimizer" --save "$tmp/$optimizer" \
    > "$tmp/$optimizer.out" 2>&1 || fail "$optimizer run: $(tail -3 "$tmp/$optimizer.out")"
  "$python" "$(dirname "$0")/lib/load_checkpoint.py" "$tmp/$optimizer" || fail "torch.load of the $optimizer checkpoint"
done
# The GPT's layers (attention, embeddings) too.
timeout 300 "$baton" train --model gpt --layers 2 --hidden 32 --heads 2 --context 16 --pp 2 --nproc 2 \
  --microbatches 2 --batch 4 --steps 1 --threads 1 --save "$tmp/gpt" > "$tmp/gpt.out" 2>&1 \
  || fail "gpt run: $(tail -3 "$tmp/gpt.out")"
"$python" "$(dirname "$0")/lib/load_checkpoint.py" "$tmp/gpt" || fail "torch.load of the gpt checkpoint"
# Split over tp ranks and with the optimizer state sharded over dp replicas: the files of whole layers.
timeout 300 "$baton" train --model gpt --layers 2 --hidden 32 --heads 2 --context 16 --dp 2 --tp 2 --pp 1 \
  --nproc 4 --zero 1 --microbatches 2 --batch 4 --steps 1 --threads 1 --save "$tmp/gpt_tp" > "$tmp/gpt_tp.out" 2>&1 \
  || fail "gpt tp run: $(tail -3 "$tmp/gpt_tp.out")"
"$python" "$(dirname "$0")/lib/load_checkpoint.py" "$tmp/gpt_tp" || fail "torch.load of the tp x zero gpt checkpoint"
echo "ok"
