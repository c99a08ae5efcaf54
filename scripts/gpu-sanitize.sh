#!/usr/bin/env bash
# compute-sanitizer over the generated kernels, on the GPU machine, from the
# binaries staged in dist/ (scripts/gpu-check.sh --stage). Each tool runs
# `lina-gpu-suite --tiny`: every preset x {fused, materialize, split} at a
# tiny shape (bf16 and f32) and a tiny varlen batch (bf16), plus split with
# the prefetch knob (bf16), other layouts, segments and the wgmma scan
# (d128), 116 cases, with
# the suite's own reference check still on. With --decode it runs
# `lina-decode-suite --quick` instead (the decode kernels: pool, speculative,
# fla-form and prefill-then-decode cases). The sanitizers make each launch
# 10-100x slower, which the small shapes absorb.
#
#   bash scripts/gpu-sanitize.sh
#   bash scripts/gpu-sanitize.sh --decode
#   bash scripts/gpu-sanitize.sh --tool memcheck
#   bash scripts/gpu-sanitize.sh --filter gdn/
#
# --tool NAME (repeatable) picks tools (default: memcheck racecheck initcheck
# synccheck); other arguments go to the suite (--filter, --threads).
# Per tool, LINA_SANITIZE_TIMEOUT seconds at most (default 130, so that
# four tools that all time out still end within 10 minutes).
#
# Output: one log per tool and summary.txt, "TOOL: N cases (L launches)
# checked, M reports" per tool, in the directory in $OUT when set, else in
# dist/logs/sanitize/.
# Exit status: 0 no reports and every case passed, 1 a report, a failed case
# or a timeout, 2 dist/ not staged, 77 no compute-sanitizer or no GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
suite=dist/bin/lina-gpu-suite
suite_args=(--tiny)
label=""
if [ "${1:-}" = "--decode" ]; then
  shift
  suite=dist/bin/lina-decode-suite
  suite_args=(--quick)
  label="decode-"
fi
if [ ! -x "$suite" ]; then
  echo "gpu-sanitize: $suite is missing: stage dist/ first" \
    "(scripts/gpu-check.sh --stage)"
  exit 2
fi

sanitizer=""
for candidate in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
  /usr/local/cuda/bin/compute-sanitizer "$(command -v compute-sanitizer)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    sanitizer=$candidate
    break
  fi
done
if [ -z "$sanitizer" ]; then
  echo "gpu-sanitize: SKIP: compute-sanitizer not found (looked in" \
    "\$CUDA_HOME/bin, /usr/local/cuda/bin and on PATH); install the CUDA" \
    "toolkit's compute-sanitizer or set CUDA_HOME"
  exit 77
fi

tools=()
args=()
while [ $# -gt 0 ]; do
  case "$1" in
  --tool)
    tools+=("$2")
    shift 2
    ;;
  --tool=*)
    tools+=("${1#--tool=}")
    shift
    ;;
  *)
    args+=("$1")
    shift
    ;;
  esac
done
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck initcheck synccheck)

logs=${OUT:-$root/dist/logs/sanitize}
mkdir -p "$logs"
summary="$logs/${label}summary.txt"
{
  echo "== lina gpu-sanitize"
  cat dist/BUILD_INFO 2>/dev/null || echo "no dist/BUILD_INFO: commit unknown"
  "$sanitizer" --version 2>&1 | tail -1
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
} | tee "$summary"

status=0
for tool in "${tools[@]}"; do
  log="$logs/sanitize-$label$tool.log"
  echo "== $tool"
  start=$(date +%s)
  # --error-exitcode tells a report from a failed case; the suite's own
  # exit status (1 on a failed case, 77 without a GPU) comes through
  # otherwise.
  timeout "${LINA_SANITIZE_TIMEOUT:-130}" "$sanitizer" --tool "$tool" \
    --error-exitcode 99 --print-limit 200 \
    "$suite" "${suite_args[@]}" ${args[@]+"${args[@]}"} >"$log" 2>&1
  rc=$?
  seconds=$(($(date +%s) - start))
  tail -5 "$log"
  if [ $rc = 77 ] || grep -q '^SKIP' "$log"; then
    echo "$tool: SKIP: $(grep -m1 '^SKIP' "$log")" | tee -a "$summary"
    [ $status != 0 ] || status=77
    continue
  fi
  # Cases and launches: one launch per fused case, two per materialize or
  # split case (its prepare kernel and its scan); decode cases are counted
  # as cases only.
  cases=$(grep -cE '^\[ *[0-9]+/[0-9]+\] (PASS|FAIL) ' "$log")
  failed=$(grep -cE '^\[ *[0-9]+/[0-9]+\] FAIL ' "$log")
  two_kernels=$(grep -E '^\[ *[0-9]+/[0-9]+\] (PASS|FAIL) ' "$log" |
    grep -cE '/(materialize|split)/')
  launches=$((cases + two_kernels))
  # "========= ERROR SUMMARY: N errors" ends memcheck's, initcheck's and
  # synccheck's output; racecheck ends with "RACECHECK SUMMARY: N hazards
  # displayed (E errors, W warnings)" instead.
  reports=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 |
    grep -oE '[0-9]+$')
  [ -n "$reports" ] || reports=$(grep -oE 'hazards displayed \([0-9]+ errors' \
    "$log" | tail -1 | grep -oE '[0-9]+')
  hazards=$(grep -oE 'RACECHECK SUMMARY: [0-9]+' "$log" | tail -1 |
    grep -oE '[0-9]+$')
  line="$tool: $cases cases ($launches launches) checked, ${reports:-?} reports"
  [ "$suite" = "dist/bin/lina-gpu-suite" ] ||
    line="$tool (decode): $cases cases checked, ${reports:-?} reports"
  [ -z "$hazards" ] || line="$line, $hazards racecheck hazards"
  [ "$failed" = 0 ] || line="$line, $failed cases FAILED the reference check"
  case $rc in
  0) ;;
  99) line="$line (compute-sanitizer reported errors)" ;;
  124) line="$line: TIMEOUT after ${LINA_SANITIZE_TIMEOUT:-130} s" ;;
  *) line="$line (exit $rc)" ;;
  esac
  echo "$line, ${seconds}s" | tee -a "$summary"
  if [ $rc != 0 ] || [ "${reports:-1}" != 0 ] || [ "${hazards:-0}" != 0 ] ||
    [ "$failed" != 0 ]; then
    status=1
  fi
done
echo "logs: $logs" | tee -a "$summary"
exit $status
