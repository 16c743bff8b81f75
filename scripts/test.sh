#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
cd build
# The test programs run with the OpenBLAS kernels `baton train` runs with
# (baton/core/blas_kernels.h: OpenBLAS 0.3.21 falls back to its generic
# kernels on the newest Xeons); a user's OPENBLAS_CORETYPE stands.
if [ -z "${OPENBLAS_CORETYPE+x}" ]; then
  core=$(./baton train --model mlp --layers 2 --hidden 8 --batch 8 --microbatches 1 --pp 1 --steps 1 \
    2>/dev/null | sed -n 's/.*OpenBLAS \([A-Za-z0-9]*\) kernels.*/\1/p' | head -1) || true
  if [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; echo "tests run with OPENBLAS_CORETYPE=$core"; fi
fi
ctest --output-on-failure -j "${BATON_TEST_JOBS:-2}" --timeout 600
