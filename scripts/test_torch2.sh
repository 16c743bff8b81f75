#!/usr/bin/env bash
# The whole test suite against LibTorch 2.x: the PyPI wheel `torch` (with
# CUDA and NCCL; it runs on the CPU here). Installs it with pip when
# python3 cannot import torch 2.x, builds into build-torch2/ and runs every
# test with CTest. CUDA-only sources (nccl_cuda.cpp) compile and link when the
# wheel carries CUDA and nvcc is on the PATH; their tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
torch_major() { python3 -c 'import torch; print(torch.__version__.split(".")[0])' 2>/dev/null || echo 0; }
if [ "$(torch_major)" -lt 2 ]; then
  echo "installing the PyPI torch wheel (LibTorch 2.x)"
  python3 -m pip install -q torch numpy
fi
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
BATON_BUILD_DIR=build-torch2 BATON_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$prefix -DBATON_BUILD_BENCH=OFF ${BATON_CMAKE_ARGS:-}" \
  bash scripts/build.sh
cd build-torch2
if [ -z "${BATON_TEST_DEADLINE:-}" ]; then
  exec ctest --output-on-failure -j "${BATON_TEST_JOBS:-2}" --timeout 600
fi
# BATON_TEST_DEADLINE (seconds since the epoch; .ci/run sets it): the tests
# besides the CLI's first, then the CLI's, all stopped at the deadline with
# their whole process group. A failure fails the run; the tests the deadline
# left unrun do not, and the line says how many passed of how many.
left=$((BATON_TEST_DEADLINE - $(date +%s)))
total=$(ctest -N | sed -n 's/^Total Tests: //p')
if [ "$left" -lt 60 ]; then
  echo "test_torch2: SKIPPED the $total tests: the deadline has passed (built only)"
  exit 0
fi
echo "test_torch2: $total tests, $left s to the deadline"
setsid bash -c 'ctest --output-on-failure -j "$0" --timeout 600 -E "^cli\." &&
                ctest --output-on-failure -j "$0" --timeout 600 -R "^cli\."' "${BATON_TEST_JOBS:-2}" \
  > >(tee ctest-deadline.log) 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$BATON_TEST_DEADLINE" ]; do sleep 2; done
if kill -0 "$pid" 2>/dev/null; then
  cp ctest-deadline.log ctest-before-deadline.log  # what the tests printed before they were stopped
  kill -TERM -- "-$pid" 2>/dev/null || true
  sleep 15
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" || true
  passed=$(grep -c " Passed " ctest-before-deadline.log || true)
  if grep -qE "\*\*\*(Failed|Timeout|Exception|Not Run)" ctest-before-deadline.log; then
    echo "test_torch2: a test failed before the deadline"; exit 1
  fi
  echo "test_torch2: STOPPED at the deadline: $passed of $total tests passed, none failed, the rest not run"
  exit 0
fi
wait "$pid"
