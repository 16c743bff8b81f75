#!/usr/bin/env bash
# Issue 7.17: the documented `torchrun --nproc-per-node 2 build/baton train ...`
# lacked --no-python, so torchrun ran baton as a Python script. This runs
# docs/cli.md's command line for real under the PyPI torch's torchrun (2.x); when
# that is not importable it says why and exits 77 (CTest: skipped).
source "$(dirname "$0")/lib/common.sh"
version=$(python3 -c 'import torch; print(torch.__version__)' 2>"$tmp/py_err" | tail -1)
case "$version" in
  2.*) ;;
  *) echo "skipped: python3 cannot import torch 2.x (got '${version}': $(tail -1 "$tmp/py_err"))"
     exit 77 ;;
esac
# The documented line, with --standalone so that parallel tests do not share a port.
readme_line=$(grep -E '^torchrun .*--no-python .*baton train' "$(dirname "$0")/../../docs/cli.md" | head -1)
[ -n "$readme_line" ] || fail "docs/cli.md has no torchrun line with --no-python"
# A baton on LibTorch 1.13 hosts its own store on MASTER_PORT + 1 (docs/cli.md), which
# --standalone does not reserve: under parallel tests another socket (a worker's outgoing
# connection, of the other parity) can hold it, and the rank says so in one line. That line,
# and only it, gets another try on another port.
for try in 1 2 3; do
  timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node 2 --no-python \
    "$baton" train --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 3 --pp 2 \
    --threads 1 > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc -ne 0 ] && grep -q "could not host the rendezvous store on .* is in use" "$tmp/err" || break
  echo "try $try: MASTER_PORT + 1 was in use: $(grep -m1 'could not host' "$tmp/err")"
done
# baton's own error lines first: torchrun's summary that follows them names no cause.
[ $rc -eq 0 ] || fail "torchrun exit $rc: $(grep -m 5 -E 'error|\[comm\]' "$tmp/err"; tail -20 "$tmp/err")"
grep -q "step 3/3" "$tmp/out" || fail "no progress from rank 0: $(cat "$tmp/out")"
grep -q "final loss" "$tmp/out" || fail "no final loss: $(cat "$tmp/out")"
echo "1 passed, 0 failed"
