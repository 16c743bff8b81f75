#!/usr/bin/env bash
# Issue 34: `baton train --data PREFIX` on a dataset `baton data prepare`
# wrote. pp 2 and dp 2 x pp 2 take one process's steps bitwise (each replica
# reads its share of the same samples); a run resumed from a checkpoint
# continues at the saved sample, bitwise the undisturbed run; the held-out
# loss is one process's and its perplexity exp(loss); the vocabulary comes
# from PREFIX.model; bad input is one line and exit 2 before any rank starts.
source "$(dirname "$0")/lib/common.sh"
cd "$tmp"
"$baton" data prepare --input /usr/share/common-licenses/GPL-3 --input /usr/share/common-licenses/Apache-2.0 \
  --doc-per-line --output corpus --byte-level > prep.out 2>&1 || fail "prepare: $(cat prep.out)"
"$baton" data prepare --input /usr/share/common-licenses/LGPL-3 --output valid --byte-level \
  > prep.out 2>&1 || fail "prepare valid: $(cat prep.out)"
G=(--model gpt --layers 2 --hidden 32 --heads 4 --context 16 --batch 8 --microbatches 2 --threads 1
   --data corpus --vocab 257 --lr 0.01 --valid valid --eval-every 3)
run() {  # run <name> args...
  local name=$1; shift
  timeout 300 "$baton" train "${G[@]}" --metrics "$name.jsonl" "$@" > "$name.out" 2>&1 \
    || fail "$name: $(tail -3 "$name.out")"
}
run one --pp 1 --steps 6
run pp2 --pp 2 --nproc 2 --steps 6
run grid --dp 2 --pp 2 --nproc 4 --steps 6
run resumed --pp 2 --nproc 2 --steps 3 --save ck
run resumed --pp 2 --nproc 2 --steps 6 --resume ck --save ck
python3 - <<'PY' || fail "the runs differ"
import json, math
def lines(name):
    return [json.loads(l) for l in open(f"{name}.jsonl")]
def losses(name):
    return [(r["step"], r["loss"]) for r in lines(name) if "loss" in r and "step" in r]
def valid(name):
    return [(r["step"], r["valid_loss"], r["valid_perplexity"]) for r in lines(name) if "valid_loss" in r]
one = losses("one")
assert [s for s, _ in one] == [1, 2, 3, 4, 5, 6], one
assert losses("pp2") == one, (losses("pp2"), one)
for (s, a), (t, b) in zip(losses("grid"), one):  # dp sums in another order: within 1e-5
    assert s == t and abs(a - b) <= 1e-5 * abs(b), (s, a, b)
assert losses("resumed") == one, (losses("resumed"), one)  # the file continued, steps 1-6 once
v = valid("one")
assert [s for s, _, _ in v] == [3, 6], v
for s, loss, ppl in v:
    assert abs(ppl - math.exp(loss)) <= 1e-9 * ppl, (loss, ppl)
assert valid("pp2") == v, (valid("pp2"), v)
for (s, a, _), (t, b, _) in zip(valid("grid"), v):
    assert s == t and abs(a - b) <= 1e-5 * abs(b), (s, a, b)
assert v[1][1] < v[0][1], v  # it learns
PY
grep -q "step 6/6  valid loss" one.out || fail "no held-out line: $(cat one.out)"
python3 -c 'import json; d=json.load(open("ck/manifest.json"))["extra"]["data"]; assert d["next_sample"] == 48 and d["dataset"]["path"] == "corpus", d' \
  || fail "the checkpoint does not record the data position: $(cat ck/manifest.json | head -c 600)"

# A SentencePiece dataset: the vocabulary is its model's.
"$baton" data prepare --input /usr/share/common-licenses/GPL-3 --doc-per-line --output spm --vocab 600 \
  > prep.out 2>&1 || fail "prepare --vocab: $(cat prep.out)"
timeout 300 "$baton" train --model llama --layers 2 --hidden 32 --heads 4 --context 16 --batch 8 \
  --microbatches 2 --threads 1 --pp 2 --nproc 2 --steps 2 --data spm > spm.out 2>&1 \
  || fail "llama on a SentencePiece dataset: $(tail -3 spm.out)"

# Bad input: one line, exit 2.
B=(--model gpt --layers 2 --hidden 32 --heads 4 --batch 8 --microbatches 2 --pp 1 --steps 2)
expect_bad_input "corpus.bin: token id 256 at byte offset" "${B[@]}" --data corpus --vocab 100
expect_bad_input "--data and --text both given" "${B[@]}" --data corpus --vocab 257 --text corpus.bin
expect_bad_input "--data corpus has no corpus.model to give the vocabulary; pass --vocab N" "${B[@]}" --data corpus
expect_bad_input "--vocab: must be an integer in [1, 2147483647], got 0" "${B[@]}" --data corpus --vocab 0
expect_bad_input "--vocab 599 disagrees with spm.model, a vocabulary of 600" "${B[@]}" --data spm --vocab 599
expect_bad_input "fewer than one sample of context + 1 = 9001 tokens" "${B[@]}" --data valid --vocab 257 --context 9000
expect_bad_input "missing.idx does not exist" "${B[@]}" --data missing --vocab 257
expect_bad_input "--data holds token ids for gpt and llama; model mlp reads none" \
  --model mlp --layers 2 --hidden 8 --batch 8 --microbatches 2 --pp 1 --steps 2 --data corpus --vocab 257
expect_bad_input "--eval-every 2 evaluates on --valid PREFIX" "${B[@]}" --data corpus --vocab 257 --eval-every 2
expect_bad_input "--schedule 2bw carries backwards between steps" --model gpt --layers 2 --hidden 32 \
  --heads 4 --batch 8 --microbatches 2 --pp 2 --nproc 2 --steps 2 --data corpus --vocab 257 \
  --valid valid --schedule 2bw
printf 'MMIDIDX\0\0' > bad.idx; cp corpus.bin bad.bin
expect_bad_input "bad.idx" "${B[@]}" --data bad --vocab 257
head -c 100 corpus.bin > short.bin; cp corpus.idx short.idx
expect_bad_input "short" "${B[@]}" --data short --vocab 257
R=(--model gpt --layers 2 --hidden 32 --heads 4 --batch 8 --microbatches 2 --pp 1 --context 16 --steps 8)
expect_bad_input "was saved training on corpus" "${R[@]}" --data valid --vocab 257 --resume ck
timeout 300 "$baton" train "${R[@]}" --data valid --vocab 257 --resume ck --allow-resume-change data \
  > allowed.out 2>&1 || fail "an allowed dataset change: $(tail -2 allowed.out)"
echo "1 passed, 0 failed"
