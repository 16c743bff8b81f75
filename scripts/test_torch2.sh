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
ctest --output-on-failure -j "${BATON_TEST_JOBS:-2}" --timeout 600
