#!/usr/bin/env bash
# Issue 30, items 4-7 and 10-11: bad input is one line and exit 2 before the
# first step on every launch path: baton's launcher (--nproc), a rank under
# torchrun's variables (RANK set: nothing checked it before it started), and
# one process. A rank that finds bad input exits 2, so --max-restarts never
# restarts on it. Flags that would do nothing are refused; an integer past
# 2^31-1 is named as out of range.
source "$(dirname "$0")/lib/common.sh"

# ONE ends in --steps: its value follows.
ONE=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --pp 1 --threads 1 --steps)
# torchrun's variables for a one-rank world (a port nothing listens on: the
# checks come before the rendezvous).
RANK_ENV=(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=9)

# under_torchrun "<expected text>" args...: as a rank, one line, exit 2, no step trained.
under_torchrun() {
  local expected=$1; shift
  local rc
  env "${RANK_ENV[@]}" timeout 120 "$baton" train "$@" > "$tmp/rank.out" 2> "$tmp/rank.err"; rc=$?
  [ $rc -eq 2 ] || fail "as a rank, '$*' exit $rc (expected 2): $(cat "$tmp/rank.err")"
  [ "$(wc -l < "$tmp/rank.err")" -eq 1 ] || fail "as a rank, '$*' printed: $(cat "$tmp/rank.err")"
  grep -qF -- "$expected" "$tmp/rank.err" || fail "as a rank, '$*' said: $(cat "$tmp/rank.err") (expected: $expected)"
  grep -q "^step " "$tmp/rank.out" && fail "as a rank, '$*' trained before refusing"
  return 0
}

# --save naming a file: refused before the first step, not after training.
echo x > "$tmp/afile"
under_torchrun "--save $tmp/afile is a file; name a folder" "${ONE[@]}" 2 --save "$tmp/afile"
expect_bad_input "--save $tmp/afile is a file; name a folder" "${ONE[@]}" 2 --save "$tmp/afile"

# A corrupt checkpoint.
timeout 300 "$baton" train "${ONE[@]}" 2 --save "$tmp/ck" > "$tmp/save.out" 2>&1 || fail "save: $(cat "$tmp/save.out")"
layer=$(ls "$tmp"/ck/step_*/layer_00000.pt)
printf 'X' | dd of="$layer" bs=1 seek=40 conv=notrunc status=none
under_torchrun "is corrupt: its CRC-32 is" "${ONE[@]}" 3 --resume "$tmp/ck"
expect_bad_input "is corrupt: its CRC-32 is" "${ONE[@]}" 3 --resume "$tmp/ck"

# An empty corpus.
: > "$tmp/empty.txt"
G=(--model gpt --layers 2 --hidden 16 --heads 2 --context 8 --batch 4 --microbatches 2 --pp 1 --steps 1)
under_torchrun "$tmp/empty.txt" "${G[@]}" --text "$tmp/empty.txt"

# llama's context (gpt's was caught; llama's failed inside every rank).
L=(--model llama --layers 2 --hidden 16 --heads 2 --batch 4 --microbatches 2 --steps 1 --threads 1)
for bad in 0 -5; do
  under_torchrun "context must be at least 1, got $bad" "${L[@]}" --pp 1 --context "$bad"
  expect_bad_input "context must be at least 1, got $bad" "${L[@]}" --pp 2 --nproc 2 --context "$bad" \
    --save "$tmp/l$bad" --max-restarts 2
done

# A schedule file declaring skips the model does not have.
cat > "$tmp/skips.txt" <<'EOF'
# baton schedule: name=mine pp=2 stages=2 microbatches=2 skips=x:0:1
0F0 0F1 0B0 0B1
1F0 1F1 1B0 1B1
EOF
expect_bad_input "declares 1 skip connections that are not the model's" "${T[@]}" \
  --schedule-file "$tmp/skips.txt" --save "$tmp/s" --max-restarts 2
[ -e "$tmp/s" ] && [ -n "$(ls -A "$tmp/s")" ] && fail "a refused run wrote into --save"

# fp16 on LibTorch 1.13's CPU: refused as a rank too.
if "$baton" train "${ONE[@]}" 2 --precision fp16 > /dev/null 2> "$tmp/fp16.err"; then
  echo "fp16 runs on this LibTorch: its refusal is not checked"
else
  under_torchrun "fp16 on the CPU needs LibTorch 2.4 or later" "${ONE[@]}" 2 --precision fp16
fi

# --realtime without the rights, as a rank (where setpriv may drop the capability).
if command -v prlimit >/dev/null && setpriv --bounding-set -sys_nice true 2>/dev/null; then
  err=$(env "${RANK_ENV[@]}" prlimit --rtprio=0 setpriv --bounding-set -sys_nice --inh-caps -sys_nice \
        "$baton" train "${ONE[@]}" 2 --realtime on 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "--realtime as a rank without the rights: exit $rc: $err"
  printf '%s' "$err" | grep -q "CAP_SYS_NICE" || fail "the refusal names no right: $err"
fi

# Checkpoint flags that would do nothing (as --save-every without --save).
expect_bad_input "--keep-last 3 needs --save DIR" "${T[@]}" --keep-last 3
expect_bad_input "--allow-resume-change precision needs --resume" "${T[@]}" --allow-resume-change precision
printf 'keep_last = 3\n' > "$tmp/keep.toml"
expect_bad_input "--keep-last 3 needs --save DIR" "${T[@]}" --config "$tmp/keep.toml"

# Integers past 2^31-1 name the range.
for flag in --steps --save-every --keep-last; do
  expect_bad_input "$flag: must be an integer in [1, 2147483647], got 99999999999999999999" \
    "${T[@]}" --save "$tmp/big" "$flag" 99999999999999999999
done
expect_bad_input "--steps: must be a whole number of at least 1, got \"12x\"" "${T[@]}" --steps 12x
echo "1 passed, 0 failed"
