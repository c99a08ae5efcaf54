#!/usr/bin/env bash
# The tuner and the warm start on a GPU, from binaries staged in dist/ by
# `scripts/gpu-check.sh --stage` (it stages dist/bin/lina). For gdn and kda
# at two shapes:
#   - lina tune --mode fast in a fresh cache, and --mode full in another,
#     each timed (wall clock); then fast replayed on full's recorded times
#     (--compare: how close fast gets to full, no GPU work);
#   - the tuned winner against the default schedule: the tune's own table
#     (CUDA events, inputs rotated past L2), and at the small shapes `lina
#     run --device gpu` with the tuned schedule vs --no-cache (the default);
#   - time to the first launch in a fresh process, cold cache then warm
#     (target: < 50 ms of lina's own time when warm).
# Kept to about 4 minutes of GPU time: --repeat 5 --warmup 2, and each step
# under a timeout; steps past the overall deadline (LINA_TUNE_BUDGET_S,
# default 230 s) are skipped and named.
#
# From the repository root on the GPU machine:
#   bash scripts/gpu-tune.sh
#
# LINA_TUNE_BACKWARD=1 tunes the backward's kernels instead (lina tune
# --backward: chunk size, tile-v, warps; each candidate checked against the
# float64 backward), compares `lina run --backward` with the tuned and the
# default schedule at the small shapes, and skips the first-launch steps;
# its logs go to dist/logs/tune-backward/. Backward candidates compile for
# seconds each: its budget is 540 s unless LINA_TUNE_BUDGET_S says.
#
# LINA_TUNE_CASES=SUBSTR tunes only those shapes (e.g. 1x8192); with
# LINA_TUNE_CACHE_DIR=DIR the full sweeps keep their results in DIR/lina.db
# (for bench/compare_fla.py to use after), else in a temporary directory.
# Logs and summary.txt go to the directory in $OUT when it is set, else to
# dist/logs/tune/.
# Exit status: 0 every step ran, 1 a step failed or was skipped, 2 dist/ is
# not staged.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
lina=$root/dist/bin/lina
if [ ! -x "$lina" ]; then
  echo "gpu-tune: $lina is missing: run scripts/gpu-check.sh --stage first"
  exit 2
fi
backward=${LINA_TUNE_BACKWARD:-0}
kind=()
# A backward candidate compiles and runs for longer: its steps get 3x the
# time.
slow=1
[ "$backward" = 1 ] && kind=(--backward) && slow=3
logs=${OUT:-$root/dist/logs/tune$([ "$backward" = 1 ] && echo -backward)}
mkdir -p "$logs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=$logs/summary.txt
: >"$summary"
budget=${LINA_TUNE_BUDGET_S:-$([ "$backward" = 1 ] && echo 540 || echo 230)}
deadline=$((SECONDS + budget))
failed=0
tune_args=(--repeat 5 --warmup 2 "${kind[@]}")
# LINA_GPU_TUNE_SIMULATE=1 runs the tunes on the cost model: a check of
# this script on a machine without a GPU (the lina run steps then fail).
[ "${LINA_GPU_TUNE_SIMULATE:-0}" = 1 ] && tune_args+=(--simulate)

say() { echo "$*" | tee -a "$summary"; }

# step NAME TIMEOUT CMD...: runs CMD with its output in $logs/NAME.log,
# echoing it; sets $step_s to its wall time and $step_rc to its status.
step() {
  local name=$1 limit=$2
  shift 2
  step_s=0
  step_rc=0
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "SKIPPED $name: past the $budget s budget"
    step_rc=125
    failed=1
    return
  fi
  # No step may run far past the overall budget.
  local left=$((deadline - SECONDS + 15))
  [ "$left" -lt "$limit" ] && limit=$left
  echo "== $name (at most $limit s): $*"
  local start=$(date +%s%N)
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  step_rc=$?
  step_s=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1f", ns / 1e9 }')
  tail -n 25 "$logs/$name.log"
  if [ "$step_rc" -ne 0 ]; then
    say "FAILED $name (exit $step_rc after ${step_s} s): see $name.log"
    failed=1
  fi
}

# tune NAME TIMEOUT CMD...: a step that is run once more when it fails (a
# candidate's fault that broke the GPU context stops lina tune; the second
# run resumes in a new process and skips what is recorded). $step_s is the
# sum of both.
tune() {
  local name=$1 was=$failed
  step "$@"
  if [ "$step_rc" -ne 0 ] && [ "$step_rc" -ne 125 ]; then
    local first_s=$step_s
    cp "$logs/$name.log" "$logs/$name.first.log"
    say "  resuming $name (first run's log: $name.first.log)"
    step "$@"
    step_s=$(awk -v a="$first_s" -v b="$step_s" 'BEGIN { printf "%.1f", a + b }')
    if [ "$step_rc" -eq 0 ]; then failed=$was; else failed=1; fi
  fi
}

# field LOG PATTERN: the first line of LOG matching PATTERN.
field() { grep -m1 -E "$2" "$logs/$1.log" 2>/dev/null || echo "(none)"; }

{
  echo "== lina gpu-tune$([ "$backward" = 1 ] && echo " (backward)")"
  cat dist/BUILD_INFO 2>/dev/null || echo "no dist/BUILD_INFO"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 ||
    echo "no nvidia-smi"
} | tee -a "$summary"

# Time to the first launch in a fresh process: a cold cache (codegen +
# NVRTC), then the same command again (cubin from the cache). The forward's.
say ""
[ "$backward" = 1 ] || say "## first launch (gdn 8x1024x8, dk=dv=64, fresh processes)"
for run in cold warm; do
  [ "$backward" = 1 ] && break
  step "first-launch-$run" 60 env LINA_CACHE_DIR="$work/first" \
    "$lina" run gdn --shape 8,1024,8 --dk 64 --dv 64 --device gpu --repeat 1
  say "$run: $(field "first-launch-$run" '^cache')"
  say "  $(field "first-launch-$run" '^first call')"
done

# name preset B,T,H dims; the cheap shapes first, so that a run cut short
# by the budget loses the most expensive step.
configs=(
  "gdn-8x1024x8 gdn 8,1024,8 64"
  "kda-8x1024x8 kda 8,1024,8 64"
  "gdn-1x8192x96 gdn 1,8192,96 128"
  "kda-1x8192x96 kda 1,8192,96 128"
)
for c in "${configs[@]}"; do
  read -r name preset shape dim <<<"$c"
  # LINA_TUNE_CASES=SUBSTR runs only the shapes whose name contains it.
  [[ "$name" == *"${LINA_TUNE_CASES:-}"* ]] || continue
  spec=("$preset" --shape "$shape" --dk "$dim" --dv "$dim")
  say ""
  say "## $name"
  tune "$name-fast" $((120 * slow)) env LINA_CACHE_DIR="$work/fast-$name" \
    "$lina" tune "${spec[@]}" --mode fast "${tune_args[@]}"
  say "fast: ${step_s} s; $(field "$name-fast" '^fast: looked')"
  say "  $(field "$name-fast" '^best:')"
  say "  $(field "$name-fast" '^default:')"
  tune "$name-full" $((240 * slow)) env LINA_CACHE_DIR="${LINA_TUNE_CACHE_DIR:-$work/full-$name}" \
    "$lina" tune "${spec[@]}" --mode full "${tune_args[@]}"
  say "full: ${step_s} s; $(field "$name-full" '^full: looked')"
  say "  $(field "$name-full" '^best:')"
  say "  $(field "$name-full" '^default:')"
  [ "$backward" = 1 ] || say "  $(field "$name-full" '^fast vs full')"
  # The tuned winner (from full's cache) against the default schedule, as
  # `lina run` launches them: shows the runtime picks up the tuned schedule.
  # Small shapes only: lina run makes a float64 random problem, which takes
  # tens of seconds at 1 x 8192 x 96 (the tune's table times both there).
  [ "$dim" = 64 ] || continue
  step "$name-run-tuned" 60 env LINA_CACHE_DIR="${LINA_TUNE_CACHE_DIR:-$work/full-$name}" \
    "$lina" run "${spec[@]}" "${kind[@]}" --device gpu --repeat 20
  step "$name-run-default" 60 env LINA_CACHE_DIR="${LINA_TUNE_CACHE_DIR:-$work/full-$name}" \
    "$lina" run "${spec[@]}" "${kind[@]}" --device gpu --repeat 20 --no-cache
  if [ "$backward" = 1 ]; then
    # The backward check prints its schedule line, time and verdict.
    say "lina run --backward, tuned:   $(field "$name-run-tuned" '^time') [$(field "$name-run-tuned" '^schedule'); $(field "$name-run-tuned" '^(PASS|FAIL)')]"
    say "lina run --backward, default: $(field "$name-run-default" '^time') [$(field "$name-run-default" '^(PASS|FAIL)')]"
    continue
  fi
  say "lina run, tuned:   $(field "$name-run-tuned" '^time') [$(field "$name-run-tuned" '^schedule'); $(field "$name-run-tuned" '^device' | sed 's/^device *//')]"
  say "lina run, default: $(field "$name-run-default" '^time') [$(field "$name-run-default" '^device' | sed 's/^device *//')]"
done

say ""
say "logs: $logs"
exit "$failed"
