#!/usr/bin/env bash
# `baton train --zero 1`: two replicas of a 2-stage pipeline with Adam take
# the same steps and reach the same test accuracy as --zero 0, while each
# replica's optimizer state is a share of --zero 0's and the two shares add up
# to it (the per-rank memory report). A --zero 1 checkpoint resumes under
# --zero 0 and the reverse with the losses of the run that never stopped,
# bitwise. A bad --zero value gets one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

for z in 0 1; do
  timeout 300 "$baton" train --model mlp --layers 4 --hidden 64 --batch 32 --microbatches 2 --steps 3 \
    --dp 2 --pp 2 --nproc 4 --optimizer adam --zero "$z" --threads 1 --metrics "$tmp/z$z.jsonl" \
    > "$tmp/z$z.out" 2>&1 || fail "--zero $z: $(tail -5 "$tmp/z$z.out")"
done
python3 - "$tmp/z0" "$tmp/z1" <<'PY' || fail "--zero 1 differs from --zero 0"
import json, re, sys
def run(prefix):
    losses = [json.loads(l)["loss"] for l in open(prefix + ".jsonl") if '"step"' in l]
    text = open(prefix + ".out").read()
    accuracy = re.search(r"test accuracy ([0-9.]+)", text).group(1)
    optimizer = {int(r): float(kb) for r, kb in re.findall(r"rank (\d): parameters .*? optimizer ([0-9.]+) kB", text)}
    return losses, accuracy, optimizer
l0, a0, o0 = run(sys.argv[1])
l1, a1, o1 = run(sys.argv[2])
assert len(l0) == 3 and l0 == l1, (l0, l1)
assert a0 == a1, (a0, a1)
assert sorted(o0) == sorted(o1) == [0, 1, 2, 3], (o0, o1)
# Ranks 2d and 2d+1 are the replicas of pipeline rank d (dp varies fastest).
for first in (0, 2):
    whole = o0[first]
    assert o0[first + 1] == whole, o0
    assert 0 < o1[first] < whole and 0 < o1[first + 1] < whole, (o0, o1)
    assert abs(o1[first] + o1[first + 1] - whole) <= 0.02, (o0, o1)  # printed to 0.01 kB
print("losses", l1, "accuracy", a1, "optimizer kB", o0, "->", o1)
PY

expect_bad_input "zero must be 0 or 1" "${T[@]}" --zero 2

# Checkpoints: the owners' optimizer state reaches the files.
Z=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --dp 2 --pp 1 --nproc 2 --optimizer adam --threads 1)
z() {  # z <name> args...: baton train with Z, metrics in $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${Z[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
z straight --zero 0 --steps 4
z save1 --zero 1 --steps 2 --save "$tmp/ck1"
z save0 --zero 0 --steps 2 --save "$tmp/ck0"
z resume0_from1 --zero 0 --steps 4 --resume "$tmp/ck1"
z resume1_from0 --zero 1 --steps 4 --resume "$tmp/ck0"
python3 - "$tmp" <<'PY' || fail "a resumed run's losses differ from the straight run's"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return [repr(d["loss"]) for d in map(json.loads, open(f"{tmp}/{name}.jsonl")) if "step" in d]
want = losses("straight")[2:]
assert len(want) == 2, want
for name in ("resume0_from1", "resume1_from0"):
    assert losses(name) == want, (name, losses(name), want)
PY
echo "ok"
