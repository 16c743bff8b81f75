#!/usr/bin/env bash
# --precision: bf16 (and fp16 where LibTorch autocasts it on the CPU) trains a
# gpt on 2 stages for 80 steps to a final loss within 3% of fp32's; the
# checkpoint holds fp32 weights, and a bf16 run resumes as fp32 only when
# --allow-resume-change precision says so; bad values get one line, exit 2.
source "$(dirname "$0")/lib/common.sh"

G=(--model gpt --layers 2 --hidden 64 --heads 4 --context 16 --batch 16 --microbatches 4
   --pp 2 --nproc 2 --steps 80 --threads 1 --log-every 1000)
final_loss() { python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]['loss'])" "$1"; }
for p in fp32 bf16; do
  timeout 600 "$baton" train "${G[@]}" --precision $p --metrics "$tmp/$p.jsonl" > "$tmp/$p.out" 2>&1 \
    || fail "$p: $(tail -3 "$tmp/$p.out")"
done
within() {  # within <a> <b> <relative>: |a - b| <= relative * |b|
  python3 -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(abs(a - b) > r * abs(b))" "$@"
}
fp32=$(final_loss "$tmp/fp32.jsonl"); bf16=$(final_loss "$tmp/bf16.jsonl")
within "$bf16" "$fp32" 0.03 || fail "bf16's final loss $bf16 is not within 3% of fp32's $fp32"
[ "$bf16" != "$fp32" ] || fail "bf16 and fp32 gave the same loss $fp32: was bf16 used?"

# fp16: LibTorch 2.4+ runs it with a loss scale; 1.13's CPU autocast refuses it by name.
if timeout 600 "$baton" train "${G[@]}" --precision fp16 --metrics "$tmp/fp16.jsonl" > "$tmp/fp16.out" 2> "$tmp/fp16.err"; then
  fp16=$(final_loss "$tmp/fp16.jsonl")
  within "$fp16" "$fp32" 0.03 || fail "fp16's final loss $fp16 is not within 3% of fp32's $fp32"
  grep -q '"loss_scale":65536' "$tmp/fp16.jsonl" || fail "fp16's metrics have no loss scale"
else
  rc=$?
  [ $rc -eq 2 ] || fail "fp16 exit $rc: $(cat "$tmp/fp16.err")"
  grep -qx "baton: error: \[runtime.precision\] fp16 on the CPU needs LibTorch 2.4 or later; this is LibTorch 1.13.*" "$tmp/fp16.err" \
    || fail "fp16's refusal: $(cat "$tmp/fp16.err")"
fi

# The checkpoint of a bf16 run: fp32 tensors; a resume in fp32 is a change to allow.
S=(--model gpt --layers 2 --hidden 64 --heads 4 --context 16 --batch 16 --microbatches 4
   --pp 2 --nproc 2 --threads 1)
timeout 600 "$baton" train "${S[@]}" --steps 2 --precision bf16 --save "$tmp/ck" > "$tmp/save.out" 2>&1 \
  || fail "save: $(tail -3 "$tmp/save.out")"
grep -q 'bfloat16' "$tmp"/ck/step_*/manifest.json && fail "the checkpoint holds bf16 tensors"
grep -q '"dtype": "float32"' "$tmp"/ck/step_*/manifest.json || fail "no fp32 tensor in the manifest"
expect_bad_input 'was saved with --precision "bf16" but this run has --precision "fp32"; pass --allow-resume-change precision' \
  "${S[@]}" --steps 3 --resume "$tmp/ck"
timeout 600 "$baton" train "${S[@]}" --steps 3 --resume "$tmp/ck" --allow-resume-change precision \
  > "$tmp/resume.out" 2>&1 || fail "bf16 -> fp32 resume: $(tail -3 "$tmp/resume.out")"

for bad in fp8 bfloat16 FP32; do
  expect_bad_input "unknown precision \"$bad\" (expected fp32, bf16 or fp16)" "${T[@]}" --precision "$bad"
done
expect_bad_input "has no flush between steps and runs in fp32 only" \
  "${J[@]}" --hidden 16 --steps 2 --schedule 2bw --precision bf16
echo "1 passed, 0 failed"
