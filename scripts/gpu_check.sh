#!/usr/bin/env bash
# The GPU path in one command, for the day a GPU is lent (docs/architecture.md,
# "Device"): builds baton against the PyPI CUDA torch into build-gpu-check/,
# runs every test whose name ends in _CUDA, trains the gpt on the CPU and on 1
# and 2 GPUs and compares the losses, runs bench/pipeline_vs_peers.py on the
# GPUs, checks each rank's predicted memory against the CUDA caching
# allocator's peak (memory), prints a short report, and exits non-zero on any
# failure. Without a GPU (nvidia-smi missing or failing) it says so in one line
# and exits 0.
#
#   scripts/gpu_check.sh [build] [tests] [train] [memory] [bench]   (default: all, in order)
#
# BATON_GPU_CHECK_DEVICE=cpu runs the memory stage's CPU half, without a GPU:
# a smaller gpt on the CPU against the counting allocator, through the same
# comparison (tests/cli/gpu_check_memory_cpu.sh; BATON_GPU_BUILD_DIR names
# the build to use).
#
# Nothing is downloaded: python3 must import a CUDA build of torch, and CMake
# must find its CUDA (nvcc on the PATH, or in /usr/local/cuda/bin). Where commands are stopped after 10
# minutes, run `scripts/gpu_check.sh build` first (again if cut off: ninja
# resumes), then the rest. BATON_JOBS (default: cores), BATON_GPU_BUILD_DIR.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

on_cpu=0
if [ "${BATON_GPU_CHECK_DEVICE:-}" = cpu ]; then
  on_cpu=1
  for stage in "$@"; do
    [ "$stage" = memory ] && continue
    echo "gpu_check: BATON_GPU_CHECK_DEVICE=cpu runs the memory stage alone, not \"$stage\"" >&2
    exit 2
  done
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi is missing or fails); nothing to check"
  exit 0
fi

dir=${BATON_GPU_BUILD_DIR:-build-gpu-check}
logs=$dir/gpu_check
mkdir -p "$logs"
gpus=0
[ "$on_cpu" -eq 0 ] && gpus=$(nvidia-smi -L | grep -c '^GPU ')
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build tests train memory bench)
[ "$on_cpu" -eq 1 ] && stages=(memory)
report=()
failed=0
pass() { report+=("PASS  $*"); }
skip() { report+=("SKIP  $*"); }
# fail WHAT LOG: records the failure and shows the end of its log.
fail() {
  report+=("FAIL  $1 (log: $2)")
  failed=1
  echo "---- $1: the end of $2" >&2
  tail -n 25 "$2" >&2
}
# The test executables holding _CUDA tests, as CMake names them (module_file).
cuda_test_targets() {
  grep -l '_CUDA)' tests/*/*_test.cpp | sed -E 's#tests/([^/]+)/([^/.]+)\.cpp#\1_\2#'
}

build() {
  local log=$logs/build.log prefix
  if ! prefix=$(python3 -c 'import torch; assert torch.version.cuda, "a CPU-only torch"
print(torch.utils.cmake_prefix_path)' 2>"$log"); then
    echo "python3 cannot import a CUDA torch (python3 -m pip install torch)" >>"$log"
    fail "build: no CUDA torch for python3" "$log"
    return
  fi
  # CMake finds CUDA through nvcc; a toolkit in the usual place will do.
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    PATH=/usr/local/cuda/bin:$PATH
  fi
  local version
  version=$(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')
  # shellcheck disable=SC2046
  if ! BATON_BUILD_DIR=$dir BATON_JOBS=${BATON_JOBS:-$(nproc)} \
      BATON_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$prefix -DBATON_BUILD_BENCH=OFF" \
      bash scripts/build.sh baton $(cuda_test_targets) >>"$log" 2>&1; then
    fail "build: against torch $version" "$log"
  # nccl_cuda.cpp is its own object, or (unity builds of the torch modules) part of one.
  elif ! grep -q 'nccl_cuda\.cpp\.o' "$dir/build.ninja" &&
       ! grep -qs 'nccl_cuda\.cpp' "$dir"/CMakeFiles/baton_comm.dir/Unity/*.cxx; then
    echo "CMake found no CUDA in torch's config (nvcc on the PATH?): nccl_cuda.cpp unbuilt" \
      >>"$log"
    fail "build: torch $version, but without CUDA" "$log"
  else
    pass "build: $dir against torch $version"
  fi
}

tests() {
  local target log passed skipped
  for target in $(cuda_test_targets); do
    log=$logs/$target.log
    if [ ! -x "$dir/tests/$target" ]; then
      echo "$dir/tests/$target is not built" >"$log"
      fail "tests: $target" "$log"
      continue
    fi
    if "$dir/tests/$target" --gtest_filter='*_CUDA:*_CUDA/*' >"$log" 2>&1; then
      passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\./\1/p' "$log")
      skipped=$(sed -nE 's/^\[  SKIPPED \] ([A-Za-z][^ ]*).*/\1/p' "$log" | sort -u |
                paste -sd, - | sed 's/,/, /g')
      pass "tests: $target: ${passed:-0} passed${skipped:+; skipped: $skipped}"
    else
      fail "tests: $target" "$log"
    fi
  done
}

# train NAME FLAGS...: the gpt for 8 steps; its losses go to $logs/NAME.jsonl.
train() {
  local name=$1
  shift
  rm -f "$logs/$name.jsonl"
  "$dir/baton" train --model gpt --layers 4 --hidden 64 --heads 4 --context 32 --batch 16 \
    --microbatches 4 --schedule 1f1b --optimizer sgd --lr 0.05 --seed 3 --steps 8 \
    --timeout 120 --metrics "$logs/$name.jsonl" "$@" >"$logs/$name.log" 2>&1
}

# compare WHAT CPU GPU: the GPU run's losses against the CPU run's, step by step.
compare() {
  local result
  if result=$(python3 - "$logs/$2.jsonl" "$logs/$3.jsonl" 2>&1 <<'EOF'
import json, sys
def losses(path):
    return [row["loss"] for row in map(json.loads, open(path)) if "step" in row]
cpu, gpu = losses(sys.argv[1]), losses(sys.argv[2])
assert len(cpu) == len(gpu) > 0, f"{len(cpu)} CPU steps, {len(gpu)} GPU steps"
worst = max(abs(g - c) / max(abs(c), 1e-6) for c, g in zip(cpu, gpu))
print(f"{len(cpu)} steps, final loss {gpu[-1]:.4f} (CPU {cpu[-1]:.4f}), "
      f"worst relative gap {worst:.1e}")
sys.exit(0 if worst <= 1e-3 else 1)
EOF
  ); then
    pass "train: $1: $result"
  else
    echo "$result" >>"$logs/$3.log"
    fail "train: $1: $result" "$logs/$3.log"
  fi
}

train_stage() {
  if [ ! -x "$dir/baton" ]; then
    echo "$dir/baton is not built" >"$logs/train.log"
    fail "train: no baton" "$logs/train.log"
    return
  fi
  if ! train cpu1 --device cpu --pp 1 --nproc 1; then
    fail "train: the CPU reference, 1 rank" "$logs/cpu1.log"
  elif ! train gpu1 --device cuda --pp 1 --nproc 1; then
    fail "train: 1 GPU" "$logs/gpu1.log"
  else
    compare "1 GPU against the CPU" cpu1 gpu1
  fi
  if [ "$gpus" -lt 2 ]; then
    skip "train: 2 GPUs: this machine has $gpus (NCCL takes one GPU per rank; the _CUDA" \
         "tests ran two ranks on one GPU over a CPU communicator)"
  elif ! train cpu2 --device cpu --pp 2 --nproc 2; then
    fail "train: the CPU reference, 2 ranks" "$logs/cpu2.log"
  elif ! train gpu2 --device cuda --pp 2 --nproc 2; then
    fail "train: 2 GPUs, pp=2 over NCCL" "$logs/gpu2.log"
  else
    compare "2 GPUs (pp=2, NCCL) against the CPU" cpu2 gpu2
  fi
}

# memory: the gpt under 1F1B over p = 4 ranks, all on the one GPU (cuda:0;
# they share it, talking over shared memory), each rank's predicted peak
# (the activation model, from its layers measured on the CPU, plus the step's
# batch and cuBLAS's workspace) against the CUDA caching allocator's peak
# allocated bytes from the third step on: within 5% (issue 32). With
# BATON_GPU_CHECK_DEVICE=cpu, a smaller gpt on the CPU against the counting
# allocator, through the same comparison.
memory_stage() {
  local log=$logs/memory.log metrics=$logs/memory.jsonl result where=cuda:0
  local -a model=(--layers 8 --hidden 512 --heads 8 --context 256 --batch 32)
  if [ "$on_cpu" -eq 1 ]; then
    where=cpu
    model=(--layers 4 --hidden 64 --heads 4 --context 64 --batch 16 --threads 1)
  fi
  if [ ! -x "$dir/baton" ]; then
    echo "$dir/baton is not built" >"$log"
    fail "memory: no baton" "$log"
    return
  fi
  rm -f "$metrics"
  if ! "$dir/baton" train --model gpt "${model[@]}" --device "$where" --microbatches 8 --pp 4 \
      --nproc 4 --schedule 1f1b --optimizer adam --steps 5 --seed 3 --timeout 120 \
      --log-every 100 --metrics "$metrics" >"$log" 2>&1; then
    fail "memory: gpt, 1F1B, p = 4 on $where" "$log"
    return
  fi
  if result=$(python3 - "$metrics" 2>&1 <<'EOF'
import json, sys
final = [json.loads(line) for line in open(sys.argv[1]) if '"final"' in line][-1]
worst, parts = 0.0, []
for m in final["memory"]:
    predicted, measured = m["predicted_peak_bytes"], m["measured_peak_bytes"]
    assert predicted > 0 and measured > 0, f"rank {m['rank']}: no figure: {m}"
    worst = max(worst, abs(predicted / measured - 1))
    parts.append(f"rank {m['rank']} {predicted / 1e6:.1f} / {measured / 1e6:.1f} MB "
                 f"({predicted / measured:.3f})")
print(f"predicted / {final['memory'][0]['measured_by']} peak: " + ", ".join(parts))
sys.exit(0 if worst <= 0.05 else 1)
EOF
  ); then
    pass "memory: gpt, 1F1B, p = 4 on $where: $result"
  else
    echo "$result" >>"$log"
    fail "memory: gpt, 1F1B, p = 4 on $where: $result" "$log"
  fi
}

bench() {
  local log=$logs/bench.log
  if [ ! -f bench/pipeline_vs_peers.py ]; then
    skip "bench: bench/pipeline_vs_peers.py is not in this tree"
  elif [ "$gpus" -lt 2 ]; then
    skip "bench: baton against torch.distributed.pipelining needs 2 GPUs, this machine has $gpus"
  elif ! python3 bench/pipeline_vs_peers.py --baton "$dir/baton" --device cuda --steps 30 \
      >"$log" 2>&1; then
    fail "bench: pipeline_vs_peers on 2 GPUs" "$log"
  elif awk 'NR > 1 && ($3 == "nan" || $4 == "nan" || $6 == "nan" || $7 == "nan")' "$log" |
       grep -q .; then
    echo "a run gave no time (nan): baton, or a torch 2.x peer, failed" >>"$log"
    fail "bench: pipeline_vs_peers on 2 GPUs: a run failed" "$log"
  else
    pass "bench: pipeline_vs_peers on 2 GPUs (ms per step):"
    while IFS= read -r line; do report+=("        $line"); done <"$log"
  fi
}

for stage in "${stages[@]}"; do
  case $stage in
    build) build ;;
    tests) tests ;;
    train) train_stage ;;
    memory) memory_stage ;;
    bench) bench ;;
    *) echo "gpu_check: unknown stage \"$stage\" (expected build, tests, train, memory or bench)" >&2
       exit 2 ;;
  esac
done

if [ "$on_cpu" -eq 1 ]; then
  echo "gpu_check: the memory stage's CPU half (BATON_GPU_CHECK_DEVICE=cpu)"
else
  echo "gpu_check: $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort |
    uniq -c | sed -E 's/^ *//' | paste -sd, -)"
fi
printf '%s\n' "${report[@]}"
if [ "$failed" -ne 0 ]; then
  echo "gpu_check: FAILED (logs in $logs)"
  exit 1
fi
echo "gpu_check: all passed"
