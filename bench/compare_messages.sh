#!/usr/bin/env bash
# Two baton binaries, the same bad inputs: which refusals changed?
#
# For a change that must keep every error message one line (issue 31's
# options table): each bad flag set below, and each bad TOML line as a
# --config file, goes to OLD and to NEW (`baton train --steps 1 ...`); the
# script prints the last line and exit code of each pair that differs, and
# how many did.
#
# Usage: bash bench/compare_messages.sh OLD_BATON NEW_BATON
old=$1 new=$2
[ -x "$old" ] && [ -x "$new" ] || { echo "usage: $0 OLD_BATON NEW_BATON" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
changed=0 total=0
run() { "$1" train --steps 1 "${@:2}" 2>&1 | tail -1; echo "rc=${PIPESTATUS[0]}"; }
compare() {  # compare <label> <args...>
  local label=$1 a b
  shift
  total=$((total + 1))
  a=$(run "$old" "$@" | tr '\n' ' ' | sed "s|$tmp|TMP|g")
  b=$(run "$new" "$@" | tr '\n' ' ' | sed "s|$tmp|TMP|g")
  [ "$a" = "$b" ] || { changed=$((changed + 1)); printf '%s\n  old: %s\n  new: %s\n' "$label" "$a" "$b"; }
}
while read -r line; do
  # shellcheck disable=SC2086
  [ -n "$line" ] && compare "FLAGS $line" $line
done <<'FLAGS'
--model nosuch
--schedule fancy
--optimizer rmsprop
--lr-schedule linear
--precision fp8
--transport tcp
--device tpu
--data-format raw --model gpt --data /nonexistent
--label-smoothing 1
--label-smoothing -0.5
--weight-decay -1
--weight-decay inf
--clip-grad-norm 0
--clip-grad-norm nan
--max-memory-gb 0
--augment-shift 9
--virtual 0
--virtual 2000
--steps 0
--epochs 0
--eval-every 0
--keep-last 0
--save-every 0
--max-restarts -1
--pipemare-warmup -1
--pipemare-decay 1
--seed -1
--vocab 0
--recompute sometimes
--recompute selective
--zero 2
--pp 0
--batch 3 --microbatches 4
--allow-resume-change everything --resume x
--keep-last 2
--timeout 0
--threads 999
--lr 0
--lr nan
--model mlp --tp 3
--save-every 2
--valid x
--eval-every 2
--model mlp --layers 2 --pp 4 --nproc 4
--model gpt --pp 2 --nproc 2 --schedule 2bw --tie-embeddings
--model gpt --pp 2 --nproc 4 --dp 2 --schedule 2bw
--model gpt --pp 2 --nproc 2 --schedule 2bw --zero 2
--model gpt --pp 2 --nproc 2 --schedule 2bw --precision bf16
--model gpt --pp 2 --nproc 2 --schedule 2bw --save ck
--model gpt --pp 2 --nproc 2 --schedule interleaved --layers 1
FLAGS
while read -r line; do
  [ -z "$line" ] && continue
  printf '%s\n' "$line" > "$tmp/c.toml"
  compare "TOML $line" --config "$tmp/c.toml"
done <<'TOML'
label_smoothing = 1.0
pipemare_decay = 2.0
augment_shift = 9
virtual = 2000
virtual = 0
steps = 0
clip_grad_norm = 0.0
max_memory_gb = -1.0
weight_decay = -0.5
model = "nosuch"
schedule = ""
no_such_key = 1
pp = "two"
seed = -1
checkpoint = "always"
TOML
echo "$changed of $total messages changed"
