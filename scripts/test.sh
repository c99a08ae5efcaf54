#!/usr/bin/env bash
# Builds lina (Release, ninja -j2) and runs every CPU test through ctest: lit +
# FileCheck, GoogleTest, NVRTC compiles of every emitted kernel, the Python
# package's checks, the spec fuzz corpus; then `pip install .` into a fresh venv
# (scripts/test-pip-install.sh).
#   --sanitize  also a second tree with AddressSanitizer + UBSan, same suite
#   --fuzz      also the libFuzzer targets (clang), scripts/fuzz.sh
#   --all       both (what CI runs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${LINA_JOBS:-2}
sanitize=0 fuzz=0
for arg in "$@"; do
  case "$arg" in
  --sanitize) sanitize=1 ;;
  --fuzz) fuzz=1 ;;
  --all) sanitize=1 fuzz=1 ;;
  *) echo "usage: scripts/test.sh [--sanitize] [--fuzz] [--all]" >&2; exit 2 ;;
  esac
done

run_suite() {
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs") && return 0
  # ctest prints a failing test's output where it finished, long before the
  # summary, and a log's tail is often all a reader gets: run the failures
  # again, alone (which says whether they fail every time or only beside
  # other tests), then end with what lit said of its failing tests, kept
  # from ctest's log before the rerun replaces it.
  local log="$dir/Testing/Temporary/LastTest.log" kept
  kept=$(mktemp)
  [ -f "$log" ] && cp "$log" "$kept"
  echo "=== the failed tests again, one at a time ===" >&2
  (cd "$dir" && ctest --rerun-failed --output-on-failure -j 1) || true
  if grep -q "^\*\** TEST '.*' FAILED \*\**$" "$kept"; then
    echo "=== what lit said of its failing tests, beside the others ===" >&2
    sed -n "/^\*\** TEST '.*' FAILED \*\**$/,/^\*\{20\}$/p" "$kept" | tail -n 80 >&2
    grep -E "^(FAIL|UNRESOLVED|TIMEOUT|XPASS): " "$kept" >&2 || true
  fi
  rm -f "$kept"
  return 1
}

# Both trees compile the same kernels (NVRTC's cubins, the emulated device's
# host builds); each compile is remembered once (runtime/lib/Runtime/
# CompileMemo.h), so the sanitizer tree's tests run lina's code and not
# NVRTC's again, which no sanitizer instruments.
export LINA_COMPILE_MEMO_DIR="$root/build/compile-memo"
# With ccache (scripts/install-deps.sh installs it) every tree compiles
# through it, so `pip install .` (scripts/test-pip-install.sh) finds the
# Release tree's objects instead of compiling the library again; the base
# dir makes the commands of trees at the same depth below the root alike.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
run_suite "$root/build"
"$root/scripts/test-pip-install.sh"
if [ $sanitize = 1 ]; then
  # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs from
  # inline header code, which the uninstrumented MLIR libraries never unpoison;
  # without it ASan reports MLIR's own allocations. Real reads and writes out
  # of bounds are still caught.
  # intercept_tls_get_addr=0: with it, Debian 12's LeakSanitizer (GCC 12)
  # records a bogus dynamic-TLS range for the dlopen'ed NVRTC and its tracer
  # dies on it at exit ("Tracer caught signal 11", RegisterState.
  # EveryWarpLayoutCompiles after twelve compiles). Dynamic TLS then is no
  # root for the leak check, which could only add reports, and none appear.
  ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite "$root/build-asan" -DLINA_SANITIZE=ON -DLINA_STATIC=OFF
fi
if [ $fuzz = 1 ]; then
  # Three targets at 30 s: the same 90 s of fuzzing CI had with two at 45.
  "$root/scripts/fuzz.sh" "${LINA_FUZZ_SECONDS:-30}"
fi
