#!/usr/bin/env bash
# Issue 21: `baton plan --emit-config FILE` writes the best plan as a `baton
# train` TOML, and `baton train --config FILE` runs it unchanged (a small gpt
# scaled to this machine: 4 ranks). The file's layout is the JSON's best plan:
# t, p, d, micro-batches, schedule, v, recompute, zero, and the stage cut as
# balance counts (embedding and head layers included). Skips (77) without the
# torch build.
source "$(dirname "$0")/lib/common.sh"
if "$baton" train 2>&1 | grep -q "built without LibTorch"; then
  echo "skipped: this baton was built without LibTorch (baton train unavailable)"
  exit 77
fi

# baton train's gpt reads bytes: vocabulary 256. Five blocks on p = 2 cannot be cut evenly.
SMALL=(--model gpt --layers 5 --hidden 32 --heads 2 --seq 16 --vocab 256 --gpus 4
       --gpus-per-node 4 --gpu-memory-gb 1 --peak-tflops 1 --batch 8)
check_and_run() {  # <name> plan-args...
  local name=$1; shift
  "$baton" plan "${SMALL[@]}" "$@" --json --emit-config "$tmp/$name.toml" > "$tmp/$name.json" \
    || fail "$name: plan exit $?"
  python3 - "$tmp/$name.json" "$tmp/$name.toml" "$*" <<'PY' || fail "$name: $(cat "$tmp/$name.toml")"
import json, sys, tomllib
best = json.load(open(sys.argv[1]))["plans"][0]
config = tomllib.load(open(sys.argv[2], "rb"))
want = {"model": "gpt", "layers": 5, "hidden": 32, "heads": 2, "context": 16,
        "tp": best["t"], "pp": best["p"], "dp": best["d"], "zero": best["zero"],
        "schedule": best["schedule"], "virtual": best["virtual"],
        "microbatches": best["microbatches"], "batch": 8,
        "recompute": "always" if best["recompute"] else "selective" if best["selective"] else "never",
        "tie_embeddings": "--tie-embeddings" in sys.argv[3].split()}
for key, value in want.items():
    assert config[key] == value, (key, config[key], value)
counts = [int(n) for n in config["balance"].split(",")]
stages = best["stage_layers"]
assert counts == [stages[0] + 1] + stages[1:-1] + [stages[-1] + 1] if len(stages) > 1 else [stages[0] + 2], (counts, stages)
assert sum(counts) == 5 + 2
PY
  timeout 600 "$baton" train --config "$tmp/$name.toml" --nproc 4 --steps 2 --threads 1 \
    > "$tmp/$name.out" 2>&1 || fail "$name: train exit $?: $(tail -5 "$tmp/$name.out")"
  grep -q 'step 2/2  loss' "$tmp/$name.out" || fail "$name: no step 2: $(tail -5 "$tmp/$name.out")"
}
# An uneven cut of 5 blocks over p = 2 with interleaved chunks; a V schedule with tp,
# recomputation and tied embeddings (first and last stage on rank 0); tied across ranks.
check_and_run interleaved --pp 2 --dp 2 --schedules interleaved --zero 0
check_and_run zb_v --tp 2 --pp 2 --schedules zb-v --recompute always --tie-embeddings
check_and_run tied_1f1b --pp 4 --schedules 1f1b --tie-embeddings
check_and_run best
echo "plan_emit_config: ok"
