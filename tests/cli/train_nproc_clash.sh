#!/usr/bin/env bash
# Issue 16.7: with RANK and WORLD_SIZE set (a launcher such as torchrun),
# `--nproc 2` was ignored: one rank ran, then suggested "--nproc 2". The
# clash is refused with one line naming both, exit 2; --nproc alone still
# starts its ranks, which see the launcher's RANK and the same --nproc.
source "$(dirname "$0")/lib/common.sh"

RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 expect_bad_input \
  "RANK=0 and WORLD_SIZE=1 are set (by a launcher such as torchrun) and --nproc 2 is given" \
  "${T[@]}"
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 expect_bad_input \
  "RANK=1 and WORLD_SIZE=2 are set" "${T[@]}"
# A variable inherited from a launcher that is not this process's parent is no licence.
BATON_LAUNCHER_PID=1 RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
  expect_bad_input "and --nproc 2 is given" "${T[@]}"

out=$(timeout 120 "$baton" train "${T[@]}" --threads 1 2> "$tmp/err"); rc=$?
[ $rc -eq 0 ] || fail "--nproc 2 alone: exit $rc: $(cat "$tmp/err")"
printf '%s\n' "$out" | grep -q "^\[rank 0\] final loss" || fail "--nproc 2 alone: $out"
echo "1 passed, 0 failed"
