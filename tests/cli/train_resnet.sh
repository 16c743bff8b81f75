#!/usr/bin/env bash
# `baton train --model resnet`: a tiny ResNet on Fashion-MNIST over 2 pipeline
# ranks reports, step by step, the losses of one process (GroupNorm has no
# batch statistics, so micro-batches change nothing: within 1e-5 for 3 steps,
# 1e-3 for 12), and they fall below guessing's; with --augment and AdamW's
# --weight-decay, pp 2 is still one process (augmentation is drawn per step,
# not per rank) and each changes the run, and so does --label-smoothing; --tp 2, --augment on a model without
# images and a negative weight decay are refused with one line and exit 2.
source "$(dirname "$0")/lib/common.sh"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "apt-get install dataset-fashion-mnist; skipped"; exit 77; }
B=(--model resnet --layers 3 --hidden 8 --batch 64 --lr 0.002 --threads 1 --cache-dir "$tmp/cache")
R=("${B[@]}" --steps 12)
timeout 120 "$baton" train "${R[@]}" --pp 1 --microbatches 1 --metrics "$tmp/one.jsonl" \
  > "$tmp/one.out" 2>&1 || fail "one process: $(tail -5 "$tmp/one.out")"
timeout 120 "$baton" train "${R[@]}" --pp 2 --nproc 2 --microbatches 4 --metrics "$tmp/pp2.jsonl" \
  > "$tmp/pp2.out" 2>&1 || fail "pp 2: $(tail -5 "$tmp/pp2.out")"
grep -q "model resnet (5 layers)" "$tmp/pp2.out" || fail "banner: $(head -1 "$tmp/pp2.out")"
python3 - "$tmp/one.jsonl" "$tmp/pp2.jsonl" <<'PY' || fail "losses"
import json, math, sys
def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"step"' in l]
one, pp2 = losses(sys.argv[1]), losses(sys.argv[2])
assert len(one) == 12 and len(pp2) == 12, (one, pp2)
assert all(math.isfinite(x) for x in pp2), pp2
# Exact for 3 steps, as the other layouts' tests hold (1e-5). Later, Adam
# amplifies rounding: under LibTorch 2.x oneDNN picks other convolution
# kernels for a micro-batch of 16 than for the batch of 64, and by step 12
# the losses differ by up to 3e-4 relative (measured; 1.13 stays within
# 1e-5). So the rest is held to 1e-3.
assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(pp2[:3], one[:3])), ("pp 2 differs from one process", pp2, one)
assert all(abs(a - b) <= 1e-3 * abs(b) for a, b in zip(pp2, one)), ("pp 2 drifts from one process", pp2, one)
# Guessing is ln 10 = 2.303 nats; the last steps must do clearly better.
assert sum(pp2[-3:]) / 3 < math.log(10) - 0.2, ("the loss does not fall", pp2)
PY
# Augmentation and weight decay: 3 steps, exact against one process, and each changes the losses.
A=("${B[@]}" --steps 3 --optimizer adamw)
timeout 120 "$baton" train "${A[@]}" --pp 1 --microbatches 1 --metrics "$tmp/plain.jsonl" \
  > "$tmp/plain.out" 2>&1 || fail "plain: $(tail -5 "$tmp/plain.out")"
timeout 120 "$baton" train "${A[@]}" --augment on --weight-decay 0.5 --pp 1 --microbatches 1 \
  --metrics "$tmp/aug1.jsonl" > "$tmp/aug1.out" 2>&1 || fail "augment pp 1: $(tail -5 "$tmp/aug1.out")"
timeout 120 "$baton" train "${A[@]}" --augment on --weight-decay 0.5 --pp 2 --nproc 2 \
  --microbatches 4 --metrics "$tmp/aug2.jsonl" > "$tmp/aug2.out" 2>&1 \
  || fail "augment pp 2: $(tail -5 "$tmp/aug2.out")"
timeout 120 "$baton" train "${A[@]}" --augment on --pp 1 --microbatches 1 \
  --metrics "$tmp/aug_wd.jsonl" > "$tmp/aug_wd.out" 2>&1 || fail "augment, default decay: $(tail -5 "$tmp/aug_wd.out")"
python3 - "$tmp" <<'PY' || fail "augmentation or weight decay"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{tmp}/{name}.jsonl") if '"step"' in l]
plain, aug1, aug2, aug_wd = losses("plain"), losses("aug1"), losses("aug2"), losses("aug_wd")
assert len(plain) == len(aug1) == len(aug2) == len(aug_wd) == 3, (plain, aug1, aug2, aug_wd)
assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(aug2, aug1)), ("pp 2 differs from one process", aug2, aug1)
# The first step's images differ (augmented), so its loss does.
assert abs(aug1[0] - plain[0]) > 1e-4 * abs(plain[0]), ("--augment changed nothing", aug1, plain)
# The same images, another decay (0.5 against AdamW's 0.01): the first update differs.
assert aug_wd[0] == aug1[0], (aug_wd, aug1)
assert abs(aug_wd[1] - aug1[1]) > 1e-5 * abs(aug1[1]), ("--weight-decay changed nothing", aug_wd, aug1)
PY
# --label-smoothing: the same first images, another loss; pp 2 is still one process.
timeout 120 "$baton" train "${A[@]}" --label-smoothing 0.2 --pp 1 --microbatches 1 \
  --metrics "$tmp/ls1.jsonl" > "$tmp/ls1.out" 2>&1 || fail "smoothing pp 1: $(tail -5 "$tmp/ls1.out")"
timeout 120 "$baton" train "${A[@]}" --label-smoothing 0.2 --pp 2 --nproc 2 --microbatches 4 \
  --metrics "$tmp/ls2.jsonl" > "$tmp/ls2.out" 2>&1 || fail "smoothing pp 2: $(tail -5 "$tmp/ls2.out")"
python3 - "$tmp" <<'PY' || fail "label smoothing"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return [r["loss"] for r in map(json.loads, open(f"{tmp}/{name}.jsonl")) if "loss" in r]
plain, one, two = losses("plain"), losses("ls1"), losses("ls2")
assert max(abs(a - b) / abs(b) for a, b in zip(one, plain)) > 1e-4, ("--label-smoothing changed nothing", one, plain)
for a, b in zip(one, two):
    assert abs(a - b) <= 1e-5 * abs(a), ("pp 2 differs from one process", one, two)
PY
expect_bad_input "--label-smoothing: must be a number in [0, 1), got 1" "${T[@]}" --label-smoothing 1
printf 'label_smoothing = -0.5\n' > "$tmp/ls.toml"
expect_bad_input 'key "label_smoothing" must be in [0, 1)' "${T[@]}" --config "$tmp/ls.toml"
expect_bad_input "--augment moves and mirrors images; model mlp has no images" "${T[@]}" --augment on
expect_bad_input "--weight-decay: must be a finite number >= 0, got -1" "${T[@]}" --weight-decay -1
printf 'weight_decay = -0.5\n' > "$tmp/wd.toml"
expect_bad_input 'key "weight_decay" must be finite and at least 0' "${T[@]}" --config "$tmp/wd.toml"
expect_bad_input "--tp 2 splits the blocks of gpt and llama and the Linear pairs of mlp; model resnet has none" \
  "${R[@]}" --pp 2 --tp 2 --nproc 4 --microbatches 2
echo "1 passed, 0 failed"
