#!/usr/bin/env bash
# The one GPU entry point. On a machine with an NVIDIA GPU, runs the runtime
# tests (gtest: driver, NVRTC, module load and launch) and lina-gpu-suite
# (every preset's generated kernels against the float64 reference), from
# binaries built on the build machine and staged in dist/ (git-ignored).
# docs/gpu-validation.md says what is checked and keeps the results.
#
# 1. Build and stage dist/ on the build machine. No GPU or CUDA is needed
#    there: lina loads libcuda and NVRTC with dlopen, and LINA_STATIC links
#    LLVM/MLIR and libstdc++ in, so the binaries need only glibc on the GPU
#    machine.
#
#      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINA_STATIC=ON
#      cmake --build build -j1 --target runtime-tests lina-gpu-suite lina
#      mkdir -p dist/bin
#      cp build/test/unit/runtime/runtime-tests build/test/gpu/lina-gpu-suite \
#         build/bin/lina dist/bin/
#      strip dist/bin/*
#
#    `scripts/gpu-check.sh --stage [BUILD_DIR]` does exactly that (BUILD_DIR
#    defaults to build, LINA_JOBS to 1) and records the commit in
#    dist/BUILD_INFO. scripts/gpu-tune.sh (the tuner and the warm start)
#    runs from the same dist/bin/lina.
#
# 2. Run it on the GPU machine from the repo root, with dist/ copied there:
#
#      bash scripts/gpu-check.sh
#      bash scripts/gpu-check.sh --quick
#
#    Arguments go to lina-gpu-suite (--quick, --filter SUBSTR, --threads N,
#    --seed N). Logs, the suite's JSON and a summary go to the directory in
#    $OUT when it is set, else to dist/logs/. LINA_RUNTIME_TESTS_TIMEOUT
#    (default 60) and LINA_SUITE_TIMEOUT (default 480) bound the two binaries
#    in seconds.
#
#    The decode kernels (docs/decode.md) have their own suite and benchmark:
#
#      bash scripts/gpu-check.sh --decode
#      bash scripts/gpu-check.sh --decode --quick
#      bash scripts/gpu-check.sh --decode --bench
#
#    Arguments after --decode go to lina-decode-suite (--quick, --filter
#    SUBSTR, --seed N, --bench [PRESETS]).
#
#    The backward's kernels (docs/training.md) against the float64 backward:
#
#      bash scripts/gpu-check.sh --backward
#      bash scripts/gpu-check.sh --backward --quick
#
#    Arguments after --backward go to lina-backward-suite (--quick, --filter
#    SUBSTR, --seed N).
#
# Exit status: 0 all passed, 1 something failed or timed out, 2 dist/ is not
# staged, 77 no GPU here (the suite skipped).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=dist/bin
binaries=(runtime-tests lina-gpu-suite lina lina-decode-suite lina-backward-suite)

stage() {
  set -e
  local build=${1:-build}
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLINA_STATIC=ON
  cmake --build "$build" -j "${LINA_JOBS:-1}" --target "${binaries[@]}" \
    LinaShared
  mkdir -p "$bin" dist/lib
  cp "$build/test/unit/runtime/runtime-tests" \
    "$build/test/gpu/lina-gpu-suite" "$build/bin/lina" \
    "$build/test/gpu/lina-decode-suite" "$build/test/gpu/lina-backward-suite" \
    "$bin/"
  # liblina.so for the Python package and bench/compare_fla.py.
  cp "$build/lib/liblina.so" dist/lib/
  strip "$bin"/* dist/lib/liblina.so
  local dirty=""
  [ -z "$(git status --porcelain 2>/dev/null)" ] ||
    dirty=" (plus uncommitted changes)"
  {
    echo "commit  $(git rev-parse --short HEAD 2>/dev/null)$dirty"
    echo "built   $(date -u +%Y-%m-%dT%H:%MZ) from $build"
  } >dist/BUILD_INFO
  # The GPU machine has its own libraries: anything beyond glibc's would be
  # missing or a different version there.
  local extra
  extra=$(ldd "$bin"/* 2>/dev/null |
    grep -E 'libLLVM|libMLIR|libstdc\+\+|libgtest' || true)
  if [ -n "$extra" ]; then
    echo "warning: dist/bin needs shared libraries the GPU machine may lack:"
    echo "$extra"
  fi
  du -sh "$bin"/*
  cat dist/BUILD_INFO
}

if [ "${1:-}" = "--stage" ]; then
  shift
  stage "$@"
  exit
fi

# A suite of its own (lina-decode-suite, lina-backward-suite), its log and
# summary under $OUT or dist/logs/.
run_suite() {
  local suite=$1 tag=$2
  shift 2
  if [ ! -x "$bin/$suite" ]; then
    echo "gpu-check: $bin/$suite is missing: stage dist/ first" \
      "(scripts/gpu-check.sh --stage)"
    exit 2
  fi
  logs=${OUT:-$root/dist/logs}
  mkdir -p "$logs"
  echo "== $suite $*"
  cat dist/BUILD_INFO 2>/dev/null || echo "no dist/BUILD_INFO: commit unknown"
  timeout "${LINA_SUITE_TIMEOUT:-540}" "$bin/$suite" "$@" 2>&1 |
    tee "$logs/$tag-suite.log"
  rc=${PIPESTATUS[0]}
  {
    echo "== summary"
    cat dist/BUILD_INFO 2>/dev/null
    case $rc in
    0) echo "$suite  PASS: $(grep -E '^cases ' "$logs/$tag-suite.log" | tail -1)" ;;
    77) echo "$suite  SKIP: $(grep -m1 '^SKIP' "$logs/$tag-suite.log" | cut -c7-)" ;;
    124) echo "$suite  TIMEOUT: $(grep -m1 'stopped by a signal' "$logs/$tag-suite.log")" ;;
    *) echo "$suite  FAIL (exit $rc): $(grep -E '^cases ' "$logs/$tag-suite.log" | tail -1)" ;;
    esac
    echo "logs               $logs"
  } | tee "$logs/$tag-summary.txt"
  case $rc in
  0 | 77) exit "$rc" ;;
  *) exit 1 ;;
  esac
}

if [ "${1:-}" = "--decode" ]; then
  shift
  run_suite lina-decode-suite decode "$@"
fi
if [ "${1:-}" = "--backward" ]; then
  shift
  run_suite lina-backward-suite backward "$@"
fi

for b in runtime-tests lina-gpu-suite; do
  if [ ! -x "$bin/$b" ]; then
    echo "gpu-check: $bin/$b is missing: stage dist/ first (see the top of $0)"
    exit 2
  fi
done
logs=${OUT:-$root/dist/logs}
mkdir -p "$logs"

echo "== lina gpu-check"
cat dist/BUILD_INFO 2>/dev/null || echo "no dist/BUILD_INFO: commit unknown"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1 | tee "$logs/nvidia-smi.txt"
fi

# Both under a timeout, 9 minutes together by default, so that the summary
# is printed even when a kernel hangs (the suite then names it).
echo "== runtime-tests"
timeout "${LINA_RUNTIME_TESTS_TIMEOUT:-60}" "$bin/runtime-tests" \
  --gtest_color=no 2>&1 | tee "$logs/runtime-tests.log"
runtime_rc=${PIPESTATUS[0]}

echo "== lina-gpu-suite $*"
timeout "${LINA_SUITE_TIMEOUT:-480}" "$bin/lina-gpu-suite" \
  --json "$logs/gpu-suite.json" "$@" 2>&1 | tee "$logs/gpu-suite.log"
suite_rc=${PIPESTATUS[0]}

# gtest passes a run whose tests all skipped; on a GPU machine a skip means
# the driver, the GPU or NVRTC was not found, which the summary must show.
# Its closing "[  SKIPPED ] N tests, listed below:" has the count.
skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?,' "$logs/runtime-tests.log" |
  grep -oE '[0-9]+' || true)
skipped=${skipped:-0}
case $runtime_rc in
0) runtime="PASS" ;;
124) runtime="TIMEOUT after ${LINA_RUNTIME_TESTS_TIMEOUT:-60} s" ;;
*) runtime="FAIL (exit $runtime_rc)" ;;
esac
[ "$skipped" = 0 ] || runtime="$runtime, $skipped skipped"

cases=$(grep -E '^cases ' "$logs/gpu-suite.log" | tail -1 | sed 's/^cases *//')
case $suite_rc in
0) suite="PASS: $cases" ;;
1) suite="FAIL: ${cases:-see the log}" ;;
77) suite="SKIP: $(grep -m1 '^SKIP' "$logs/gpu-suite.log" | cut -c7-)" ;;
124)
  hung=$(grep -m1 'stopped by a signal' "$logs/gpu-suite.log" |
    sed 's/^lina-gpu-suite: //')
  suite="TIMEOUT after ${LINA_SUITE_TIMEOUT:-480} s: ${hung:-no case named}"
  ;;
*) suite="ERROR (exit $suite_rc)" ;;
esac

{
  echo "== summary"
  cat dist/BUILD_INFO 2>/dev/null
  echo "runtime-tests   $runtime"
  echo "lina-gpu-suite  $suite"
  echo "logs            $logs"
} | tee "$logs/summary.txt"

if [ "$runtime_rc" -ne 0 ]; then
  exit 1
fi
case $suite_rc in
0 | 77) exit "$suite_rc" ;;
*) exit 1 ;;
esac
