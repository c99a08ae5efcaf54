#!/usr/bin/env bash
# Every GPU check and benchmark that docs/ records, spread over the GPUs of
# the machine, in one command. Each job is one of the repo's own scripts;
# this only schedules them (longest first, each on the least loaded GPU) and
# packs their logs. Run it from the repository root on the GPU machine, with
# dist/ staged by scripts/gpu-check.sh --stage (the stripped static binaries
# in dist/bin, liblina.so in dist/lib):
#
#   bash scripts/gpu-all.sh checks
#   bash scripts/gpu-all.sh compare-gdn compare-kda decode-bench
#
# Jobs (estimated minutes on an H200):
#   check            scripts/gpu-check.sh: runtime-tests + the full suite (3)
#   decode           scripts/gpu-check.sh --decode --quick (1)
#   backward         scripts/gpu-check.sh --backward: the backward's kernels
#                    against the float64 backward (3)
#   decode-full      scripts/gpu-check.sh --decode, all 360 cases (5)
#   large            lina-gpu-suite --large and --large-wgmma (sm_90), tensors
#                    of 2^32 elements (4)
#   sanitize         scripts/gpu-sanitize.sh, chunk kernels (2)
#   sanitize-decode  scripts/gpu-sanitize.sh --decode (3)
#   tune             scripts/gpu-tune.sh (4)
#   perf             scripts/gpu-perf.sh once per schedule in LINA_PERF_VARIANTS
#                    (';'-separated lina run flags, '' the default) for the
#                    presets in LINA_PERF_PRESETS (default: all five) (5)
#   tune-full-FORM   lina tune FORM --shape 1,8192,96 --mode full --compare:
#                    every viable schedule, then how close fast gets (6)
#   compare-default  bench/compare_fla.py, every form and shape (or
#                    LINA_COMPARE_FORMS / LINA_COMPARE_SHAPES), lina at its
#                    default schedule (no tune) (8)
#   warm-fla         fla's Triton kernels compiled for every form and shape
#                    of a compare (LINA_COMPARE_FORMS / LINA_COMPARE_SHAPES),
#                    one process a form in parallel, so that a compare after
#                    it in the same machine finds each autotuning config
#                    compiled and only times them. The parallel processes
#                    keep no autotuning choice (FLA_CACHE_RESULTS=0,
#                    TRITON_CACHE_AUTOTUNING=0): they time configs while
#                    sharing the GPU, so their choices would not be fla's
#                    best; the compare chooses alone (5)
#   compare-default-FORM+FORM...  compare-default for those forms only, so
#                    that two GPUs can share the forms in one call (4 a form)
#   compare-FORM     bench/compare_fla.py --forms FORM --tune fast, every
#                    shape (or LINA_COMPARE_SHAPES, in that order); FORM in
#                    simple_gla gla gdn kda dplr (8 each)
#   decode-bench     bench/decode_fla.py (2)
#   decode-bench-vk  bench/decode_fla.py --state-v-first: both libraries with
#                    [V, K] states, vLLM's pool order (2)
#   decode-sweep     lina-decode-suite --bench --sweep: gdn and kda's step at
#                    every decode schedule, batch 1/32/256 (3)
#   tune-decode      lina tune --decode for gdn and kda at batch 1, 32 and 256
#                    (32 heads, d128), then bench/decode_fla.py in the same
#                    cache: the tuned decode step against fla; needs .fla
#                    and .whl (3)
#   python           test/python's GPU tests: test_gpu.py and
#                    test_backward_gpu.py (against fla's naive references;
#                    need .fla and .whl), test_decode_gpu.py,
#                    test_decode_layouts_gpu.py,
#                    test_eager_extension_gpu.py,
#                    test_compile_gpu.py, test_cuda_graph_gpu.py (2)
#   catalog          scripts/gpu-catalog.sh: the specs no preset spells, each
#                    checked against float64 and timed beside its preset (3)
#   train-lina       bench/train_fla.py --lina-only: lina's training step
#                    (forward + backward) for every form at the d64 and d128
#                    shapes the docs record, at the default layouts (2)
#   train-fla        bench/train_fla.py against fla, its kernels compiled
#                    first (--warm-fla): the training step of every form at
#                    the d64 and d128 shapes, fla's forward + naive backward
#                    where it refuses; needs .fla and .whl (9)
#   serving          examples/python/serving_gdn.py: a Gated DeltaNet layer
#                    served as vLLM does, against the layer in float64 (1)
#   profile          scripts/gpu-profile.sh (ncu kernel durations, and the
#                    sections and per-segment instruction and stall shares
#                    of the kernel LINA_PROFILE_KERNEL names) for the
#                    presets in LINA_PROFILE_PRESETS (default: gdn kda), at
#                    the schedules in LINA_PROFILE_ARGS (3)
#   perf-prefetch    scripts/gpu-perf.sh without and with --prefetch, at the
#                    default schedule and at gdn's tuned one (3)
# Groups: checks = check decode large sanitize sanitize-decode;
#         bench = compare-* decode-bench. A compare needs .fla and .whl.
#
# Each job gets LINA_JOB_BUDGET_S seconds at most (default 540). Output, in
# the directory in $OUT when set, else dist/logs/all: summary.txt (one line
# per job: exit status, seconds, its summary lines) and logs.tgz (every job's
# logs), two files rather than a tree, so that they are easy to copy off the
# machine. Until every job is done, partial-summary.txt and logs.tgz hold the
# jobs finished so far, so a run killed by an outer time limit still leaves
# those. After compare jobs, triton-cache.tgz too (fla's autotuning choices;
# see the end of this script).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/dist/logs/all}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
budget=${LINA_JOB_BUDGET_S:-540}

declare -A minutes=([check]=3 [decode]=1 [backward]=3 [decode-full]=5 [large]=4 [sanitize]=2
  [sanitize-decode]=3 [tune]=4 [decode-bench]=2 [decode-sweep]=3 [tune-decode]=3 [python]=2 [perf-prefetch]=3
  [profile]=3 [warm-fla]=5 [decode-bench-vk]=2 [serving]=1 [catalog]=3
  [train-lina]=2 [train-fla]=9)
forms=(simple_gla gla gdn kda dplr)
minutes[perf]=5
minutes[compare-default]=8
for f in "${forms[@]}"; do minutes[compare-$f]=8; done
for f in gdn kda; do minutes[tune-full-$f]=6; done

jobs=()
for arg in "${@:-checks}"; do
  case $arg in
  checks) jobs+=(check decode backward large sanitize sanitize-decode) ;;
  bench) for f in "${forms[@]}"; do jobs+=("compare-$f"); done
    jobs+=(decode-bench) ;;
  compare-default-*)
    minutes[$arg]=$((4 * $(echo "${arg#compare-default-}" | tr '+' '\n' | wc -l)))
    jobs+=("$arg")
    ;;
  *)
    if [ -z "${minutes[$arg]:-}" ]; then
      echo "gpu-all: unknown job '$arg' (see the top of $0)"
      exit 2
    fi
    jobs+=("$arg")
    ;;
  esac
done

# The command of one job; its logs go to $1.
job_command() {
  local name=$1 dir=$2
  case $name in
  check) echo "OUT=$dir bash scripts/gpu-check.sh" ;;
  decode) echo "OUT=$dir bash scripts/gpu-check.sh --decode --quick" ;;
  backward) echo "OUT=$dir bash scripts/gpu-check.sh --backward" ;;
  decode-full) echo "OUT=$dir bash scripts/gpu-check.sh --decode" ;;
  large) echo "dist/bin/lina-gpu-suite --large && dist/bin/lina-gpu-suite --large-wgmma" ;;
  sanitize) echo "OUT=$dir bash scripts/gpu-sanitize.sh" ;;
  sanitize-decode) echo "OUT=$dir bash scripts/gpu-sanitize.sh --decode" ;;
  tune) echo "OUT=$dir bash scripts/gpu-tune.sh" ;;
  decode-bench) echo "python3 bench/decode_fla.py --json $dir/decode.json --markdown $dir/decode.md" ;;
  decode-bench-vk) echo "python3 bench/decode_fla.py --state-v-first --json $dir/decode-vk.json --markdown $dir/decode-vk.md" ;;
  serving) echo "PYTHONPATH=python python3 examples/python/serving_gdn.py" ;;
  catalog) echo "OUT=$dir bash scripts/gpu-catalog.sh" ;;
  train-lina) echo "python3 bench/train_fla.py --lina-only --shapes B8_T1024_H8_D64,B4_T2048_H16_D128 --repeats 5" ;;
  train-fla) echo "python3 bench/train_fla.py --shapes B8_T1024_H8_D64,B4_T2048_H16_D128 --repeats 5 --warm-fla $((budget / 2))" ;;
  tune-decode) echo "export LINA_CACHE_DIR=$work/cache-decode; for p in gdn kda; do for b in 1 32 256; do dist/bin/lina tune \$p --decode --shape \$b,1,32 --dk 128 --dv 128 || exit 1; done; done; python3 bench/decode_fla.py --json $dir/decode.json --markdown $dir/decode.md" ;;
  decode-sweep) echo "dist/bin/lina-decode-suite --bench --sweep" ;;
  python) echo "python3 -m unittest discover -v -s test/python -p 'test_*gpu.py'" ;;
  profile) echo "OUT=$dir bash scripts/gpu-profile.sh \${LINA_PROFILE_PRESETS:-}" ;;
  perf-prefetch) echo "bash scripts/gpu-perf.sh; LINA_PERF_ARGS=--prefetch bash scripts/gpu-perf.sh; for p in '' --prefetch; do LINA_PERF_ARGS=\"--chunk-size 16 --tile-v 32 --warps 8 --strategy split \$p\" bash scripts/gpu-perf.sh gdn kda; done" ;;
  perf) echo "IFS=';' read -ra variants <<<\"\${LINA_PERF_VARIANTS:-}\"; for v in \"\${variants[@]:-}\"; do LINA_PERF_ARGS=\"\$v\" bash scripts/gpu-perf.sh \${LINA_PERF_PRESETS:-}; done" ;;
  tune-full-*) echo "LINA_CACHE_DIR=$work/cache-$name dist/bin/lina tune ${name#tune-full-} --shape 1,8192,96 --mode full --compare" ;;
  warm-fla)
    local f list=${LINA_COMPARE_FORMS:-${forms[*]}}
    for f in ${list//,/ }; do
      echo "FLA_CACHE_RESULTS=0 TRITON_CACHE_AUTOTUNING=0 LINA_CACHE_DIR=$work/cache-warm-$f python3 bench/compare_fla.py --forms $f ${LINA_COMPARE_SHAPES:+--shapes $LINA_COMPARE_SHAPES} --warmup 1 --rep 1 --budget-s $((budget - 60)) >$dir/$f.log 2>&1 &"
    done
    echo "wait; tail -n 3 $dir/*.log" ;;
  compare-default*)
    # compare-default-FORM+FORM names its forms; compare-default takes them
    # from LINA_COMPARE_FORMS (every form when unset).
    local forms=${LINA_COMPARE_FORMS:-}
    [ "$name" = compare-default ] || forms=$(echo "${name#compare-default-}" | tr '+' ',')
    echo "LINA_CACHE_DIR=$work/cache-$name python3 bench/compare_fla.py ${forms:+--forms $forms} ${LINA_COMPARE_SHAPES:+--shapes $LINA_COMPARE_SHAPES} --budget-s $((budget - 60)) --json $dir/compare.json --markdown $dir/compare.md" ;;
  compare-*) echo "LINA_CACHE_DIR=$work/cache python3 bench/compare_fla.py --forms ${name#compare-} --tune fast ${LINA_COMPARE_SHAPES:+--shapes $LINA_COMPARE_SHAPES} --budget-s $((budget - 60)) --json $dir/compare.json --markdown $dir/compare.md" ;;
  esac
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${gpus:-0}" -ge 1 ] || gpus=1
# Longest first, each on the GPU with the fewest estimated minutes.
mapfile -t sorted < <(for j in "${jobs[@]}"; do echo "${minutes[$j]} $j"; done |
  sort -rn | cut -d' ' -f2)
declare -a load queue
for ((g = 0; g < gpus; g++)); do load[g]=0; queue[g]=""; done
for j in "${sorted[@]}"; do
  best=0
  for ((g = 1; g < gpus; g++)); do
    [ "${load[g]}" -lt "${load[best]}" ] && best=$g
  done
  load[best]=$((load[best] + minutes[$j]))
  queue[best]="${queue[best]} $j"
done

run_queue() {
  local gpu=$1 name dir start rc
  for name in ${queue[gpu]}; do
    dir=$work/$name
    mkdir -p "$dir"
    start=$SECONDS
    CUDA_VISIBLE_DEVICES=$gpu timeout "$budget" \
      bash -c "$(job_command "$name" "$dir")" >"$dir/output.log" 2>&1
    rc=$?
    {
      echo "$name  gpu $gpu  exit $rc  $((SECONDS - start)) s"
      # The job's own summary file when it writes one, else its output's
      # result lines; the last lines of the output when it failed.
      local pattern='^(gdn .*best|kda .*best|full mode|best:|default:|fast vs full|Ran |OK|FAILED|retnet|gla|gdn|kda|rwkv7|lina-gpu-suite|lina-decode-suite|runtime-tests|memcheck|racecheck|initcheck|synccheck|result|cases|best:|fast:|full:|\[)'
      if ls "$dir"/*summary.txt >/dev/null 2>&1; then
        grep -hE "$pattern" "$dir"/*summary.txt
      else
        grep -hE "$pattern" "$dir/output.log" | grep -v '^\[ *[0-9]*/[0-9]*\] PASS'
      fi | sed 's/^/  /' | head -40
      [ "$rc" = 0 ] || tail -3 "$dir/output.log" | sed 's/^/  | /'
    } >"$work/$name.summary"
    # Also into the output directory at once, logs included: a run killed by
    # an outer time limit still leaves every job that finished.
    (
      flock 9
      cat "$work/$name.summary" >>"$out/partial-summary.txt"
      tar -czf "$out/logs.tgz" -C "$work" $(cd "$work" && ls -d */ | grep -v '^cache')
    ) 9>"$work/.lock"
  done
}

echo "gpu-all: ${#jobs[@]} jobs on $gpus GPU(s)"
for ((g = 0; g < gpus; g++)); do echo "  gpu $g:${queue[g]}"; done
for ((g = 0; g < gpus; g++)); do run_queue "$g" & done
wait
{
  cat dist/BUILD_INFO 2>/dev/null
  for j in "${jobs[@]}"; do cat "$work/$j.summary" 2>/dev/null; done
} | tee "$out/summary.txt"
tar -czf "$out/logs.tgz" -C "$work" $(cd "$work" && ls -d */ | grep -v '^cache')
rm -f "$out/partial-summary.txt"
# The compares' Triton autotuning choices (bench/compare_fla.py's Triton cache,
# its *.autotune.json files only: ~40 KB, where the compiled kernels pack to
# 17-40 MiB). Unpacked into build-bench/ of the tree a later compare runs in,
# they let fla's first calls compile only the chosen configs instead of
# timing all.
#   tar -xzf triton-cache.tgz -C build-bench
if [ -d build-bench/triton-cache ]; then
  (cd build-bench && find triton-cache -name '*.autotune.json' -print0 |
    tar -czf "$work/triton-cache.tgz" --null -T -) &&
    cp "$work/triton-cache.tgz" "$out/"
fi
grep -q 'exit [1-9]' "$out/summary.txt" && exit 1
exit 0
