#!/usr/bin/env bash
# Builds lina (Release, ninja -j2) and runs every CPU test: lit + FileCheck,
# GoogleTest, the spec fuzz corpus. With --sanitize, builds a second tree with
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite there too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${LINA_JOBS:-2}

run_suite() {
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

run_suite "$root/build"
if [ "${1:-}" = "--sanitize" ]; then
  # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs from
  # inline header code, which the uninstrumented MLIR libraries never unpoison;
  # without it ASan reports MLIR's own allocations. Real reads and writes out
  # of bounds are still caught.
  ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite "$root/build-asan" -DLINA_SANITIZE=ON -DLINA_STATIC=OFF
fi
