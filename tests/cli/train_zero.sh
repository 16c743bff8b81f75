#!/usr/bin/env bash
# `baton train --zero 1|2|3`: two replicas of a 2-stage pipeline with Adam
# take bitwise the steps of --zero 0 and reach its test accuracy, while each
# replica's optimizer state is a share of --zero 0's and the two shares add up
# to it (the per-rank memory report); at rest each replica holds half the
# gradients, and under --zero 3 half the weights too (the --metrics memory
# line). A --zero 1 or 3 checkpoint resumes under --zero 0 and the
# reverse with the losses of the run that never stopped, bitwise. A bad
# --zero value, and --zero 3 with a schedule without a flush, get one line
# and exit 2; at --dp 1 the banner says --zero changes nothing.
source "$(dirname "$0")/lib/common.sh"

for z in 0 1 2 3; do
  timeout 300 "$baton" train --model mlp --layers 4 --hidden 64 --batch 32 --microbatches 2 --steps 3 \
    --dp 2 --pp 2 --nproc 4 --optimizer adam --zero "$z" --threads 1 --metrics "$tmp/z$z.jsonl" \
    > "$tmp/z$z.out" 2>&1 || fail "--zero $z: $(tail -5 "$tmp/z$z.out")"
done
python3 - "$tmp" <<'PY' || fail "--zero 1-3 differ from --zero 0"
import json, re, sys
def run(prefix):
    lines = [json.loads(l) for l in open(prefix + ".jsonl")]
    losses = [d["loss"] for d in lines if "step" in d]
    held = {m["rank"]: m for d in lines if "memory" in d for m in d["memory"]}
    text = open(prefix + ".out").read()
    accuracy = re.search(r"test accuracy ([0-9.]+)", text).group(1)
    optimizer = {int(r): float(kb) for r, kb in re.findall(r"rank (\d): parameters .*? optimizer ([0-9.]+) kB", text)}
    return losses, accuracy, optimizer, held
l0, a0, o0, h0 = run(sys.argv[1] + "/z0")
for z in (1, 2, 3):
    lz, az, oz, hz = run(sys.argv[1] + f"/z{z}")
    assert len(l0) == 3 and l0 == lz, (z, l0, lz)
    assert a0 == az, (z, a0, az)
    assert sorted(o0) == sorted(oz) == [0, 1, 2, 3], (o0, oz)
    # Ranks 2d and 2d+1 are the replicas of pipeline rank d (dp varies fastest).
    for first in (0, 2):
        whole = o0[first]
        assert o0[first + 1] == whole, o0
        assert 0 < oz[first] < whole and 0 < oz[first + 1] < whole, (z, o0, oz)
        assert abs(oz[first] + oz[first + 1] - whole) <= 0.02, (z, o0, oz)  # printed to 0.01 kB
    for r in range(4):
        g0, gz = h0[r]["gradient_bytes"], hz[r]["gradient_bytes"]
        p0, pz = h0[r]["parameter_bytes"], hz[r]["parameter_bytes"]
        assert abs(gz - g0 / 2) <= 0.05 * g0 / 2, (z, r, g0, gz)
        assert (abs(pz - p0 / 2) <= 0.05 * p0 / 2) if z == 3 else pz == p0, (z, r, p0, pz)
    print("--zero", z, "losses", lz, "accuracy", az, "optimizer kB", o0, "->", oz)
PY

expect_bad_input "zero must be 0 to 3" "${T[@]}" --zero 4
expect_bad_input "zero must be 0 to 3" "${T[@]}" --zero -1
expect_bad_input "--zero 3 needs a schedule with a flush" "${T[@]}" --schedule 2bw --zero 3
# With one replica ZeRO has nothing to shard: accepted, and the banner says so.
out=$(timeout 300 "$baton" train --model mlp --layers 2 --hidden 8 --batch 8 --microbatches 2 --pp 1 \
  --steps 1 --zero 3 --threads 1 2>&1) || fail "--zero 3 at dp 1: $out"
grep -q "zero=3 (no-op at dp=1)" <<< "$out" || fail "no dp=1 note in the banner: $(head -1 <<< "$out")"

# Checkpoints: the owners' optimizer state reaches the files.
Z=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --dp 2 --pp 1 --nproc 2 --optimizer adam --threads 1)
z() {  # z <name> args...: baton train with Z, metrics in $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${Z[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
z straight --zero 0 --steps 4
z save1 --zero 1 --steps 2 --save "$tmp/ck1"
z save3 --zero 3 --steps 2 --save "$tmp/ck3"
z save0 --zero 0 --steps 2 --save "$tmp/ck0"
z resume0_from1 --zero 0 --steps 4 --resume "$tmp/ck1"
z resume1_from0 --zero 1 --steps 4 --resume "$tmp/ck0"
z resume0_from3 --zero 0 --steps 4 --resume "$tmp/ck3"
z resume3_from0 --zero 3 --steps 4 --resume "$tmp/ck0"
z resume2_from3 --zero 2 --steps 4 --resume "$tmp/ck3"
python3 - "$tmp" <<'PY' || fail "a resumed run's losses differ from the straight run's"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return [repr(d["loss"]) for d in map(json.loads, open(f"{tmp}/{name}.jsonl")) if "step" in d]
want = losses("straight")[2:]
assert len(want) == 2, want
for name in ("resume0_from1", "resume1_from0", "resume0_from3", "resume3_from0", "resume2_from3"):
    assert losses(name) == want, (name, losses(name), want)
PY
echo "ok"
