#!/usr/bin/env bash
# The test suite under sanitizers (LibTorch 1.13), for CI:
#  - AddressSanitizer + UBSan: every test executable (all its cases in one
#    process) and every CLI test, built into build-asan/;
#  - ThreadSanitizer: the comm and runtime tests (transports, launcher,
#    executor), built into build-tsan/.
# A sanitizer report fails the run. LibTorch itself is not instrumented, and
# leaks that LibTorch's own static state holds at exit are not ours, so leak
# detection is off; `SAN=asan` or `SAN=tsan` runs one half.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
which=${SAN:-all}
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"

run_one() {  # run_one <gtest executable>: all its cases, its log beside it
  if ! "$1" --gtest_brief=1 > "$1.log" 2>&1; then
    echo "FAILED under sanitizers: $1"; tail -40 "$1.log"; return 1
  fi
}
export -f run_one
run_executables() {  # run_executables <dir> <glob>: each gtest executable once, two at a time
  local t list=()
  for t in "$1"/tests/$2; do
    [ -x "$t" ] || continue
    case "$t" in *comm_peer) continue ;; esac
    list+=("$t")
  done
  [ "${#list[@]}" -eq 0 ] || printf '%s\0' "${list[@]}" | xargs -0 -n 1 -P "${BATON_TEST_JOBS:-2}" bash -c 'run_one "$0"'
}

if [ "$which" = all ] || [ "$which" = asan ]; then
  BATON_BUILD_DIR=build-asan BATON_CMAKE_ARGS="-DBATON_SANITIZE=address;undefined -DBATON_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo" \
    bash scripts/build.sh
  # The CLI tests first: they reach the file and network parsers, where
  # ASan has found defects; CI may stop this half at its deadline.
  (cd build-asan && ctest --output-on-failure -j "${BATON_TEST_JOBS:-2}" -R '^cli\.' --timeout 600)
  run_executables build-asan '*_test'
fi
if [ "$which" = all ] || [ "$which" = tsan ]; then
  BATON_BUILD_DIR=build-tsan BATON_CMAKE_ARGS="-DBATON_SANITIZE=thread -DBATON_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo" \
    bash scripts/build.sh comm_communicator_test comm_transport_test comm_process_test comm_peer \
      comm_launcher_test runtime_gradient_equivalence_test
  run_executables build-tsan 'comm_*_test'
  run_executables build-tsan 'runtime_*_test'
fi
echo "sanitizers: clean"
