#!/usr/bin/env bash
# Issue 16.11: `baton plan --gpus 1073741824` ran the table's columns together
# ("   1    4268435456"). Each column is now as wide as its widest cell: every
# row splits into the header's 17 fields, and t * p * d is the GPU count.
source "$(dirname "$0")/lib/common.sh"
gpus=1073741824
"$baton" plan --model gpt --layers 8 --hidden 64 --heads 8 --seq 16 --vocab 100 --gpus $gpus \
  --gpus-per-node 8 --gpu-memory-gb 80 --peak-tflops 100 --batch $gpus --top 5 \
  > "$tmp/table.txt" || fail "plan exit $?: $(cat "$tmp/table.txt")"
python3 - "$tmp/table.txt" $gpus <<'PY' || fail "table: $(cat "$tmp/table.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
def spans(line):
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", line)]
header = spans(lines[1])
assert [h[2] for h in header[:5]] == ["t", "p", "d", "b", "m"] and len(header) == 17, header
rows = [l for l in lines[2:] if l[:1] == " "]
assert len(rows) == 5, rows
for row in rows:
    cells = spans(row)
    assert len(cells) == 17, row
    t, p, d = (int(c[2]) for c in cells[:3])
    assert t * p * d == int(sys.argv[2]), row
    # Numbers end under the end of their header; the schedule starts under its start.
    for i, (cell, head) in enumerate(zip(cells, header)):
        assert (cell[0] == head[0]) if i == 5 else (cell[1] == head[1]), (head[2], row)
PY
echo "1 passed, 0 failed"
