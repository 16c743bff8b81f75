#!/usr/bin/env bash
# `baton simulate` with the schedules without a flush (2bw, pipedream, pipemare): one
# step from an empty pipeline is 1F1B's ((m + p - 1)(F + B), p - r in flight on
# rank r) and back to back a step costs m (F + B), PipeDream's bubble-free
# steady state; they draw and print, a text schedule file round-trips with
# carries=1, and PyTorch's CSV (which has no such schedule) is refused.
source "$(dirname "$0")/lib/common.sh"

for s in 2bw pipedream pipemare; do
  "$baton" simulate --schedule "$s" --pp 4 --microbatches 8 --tf 1 --tb 2 --json > "$tmp/$s.json" \
    || fail "$s --json"
  python3 - "$tmp/$s.json" <<'PY' || fail "$s statistics"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["makespan"] == (8 + 4 - 1) * 3, d["makespan"]
assert d["steady_step"] == 8 * 3, d["steady_step"]
assert d["peak_inflight"] == [4, 3, 2, 1], d["peak_inflight"]
PY
  "$baton" simulate --schedule "$s" --pp 4 --microbatches 8 --svg "$tmp/$s.svg" --grid > "$tmp/$s.txt" \
    || fail "$s --svg --grid"
  grep -q "<svg" "$tmp/$s.svg" || fail "$s drew no svg"
  "$baton" simulate --schedule "$s" --pp 2 --microbatches 4 --print-schedule > "$tmp/$s.out" || fail "$s print"
  sed -n '/^# baton schedule:/,$p' "$tmp/$s.out" > "$tmp/$s.sched"
  grep -q "carries=1" "$tmp/$s.sched" || fail "$s printed without carries=1: $(head -1 "$tmp/$s.sched")"
  "$baton" simulate --schedule-file "$tmp/$s.sched" --tf 1 --tb 2 --json > "$tmp/$s.file.json" || fail "$s file"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['steady_step'] == 12, d" \
    "$tmp/$s.file.json" || fail "$s from a file"
  expect_bad_input_of simulate "PyTorch's schedule CSV describes one flushed step" \
    --schedule "$s" --pp 2 --microbatches 4 --export-csv "$tmp/$s.csv"
done
echo "ok"
