#!/usr/bin/env bash
# Quick forward timings of lina's own kernels on the GPU (no fla): for the
# bench presets at fla's largest and smallest shapes, `lina run --device gpu`
# with the default schedule, or with the schedule given in LINA_PERF_ARGS.
# Used between performance changes (docs/perf-notes.md); the comparison with
# fla is bench/compare_fla.py. Needs dist/ staged (scripts/gpu-check.sh
# --stage). Usage: bash scripts/gpu-perf.sh [PRESET...]
# LINA_PERF_SHAPES: ';'-separated `lina run` shape flags instead of the two
# defaults, e.g. "2,16384,16 --dk 128 --dv 128". LINA_BIN: another lina
# binary (an A/B against an earlier build staged beside dist/bin/lina).
set -u
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(retnet gla gdn kda rwkv7)
for p in "${presets[@]}"; do
  IFS=';' read -ra shapes <<<"${LINA_PERF_SHAPES:-1,8192,96 --dk 128 --dv 128;8,1024,8 --dk 64 --dv 64}"
  for shape in "${shapes[@]}"; do
    # shellcheck disable=SC2086
    out=$("${LINA_BIN:-dist/bin/lina}" run "$p" --shape $shape --device gpu --repeat 10 \
      --no-initial-state ${LINA_PERF_ARGS:-} 2>&1)
    echo "$p $shape ${LINA_PERF_ARGS:-}${LINA_BIN:+ ($LINA_BIN)}: $(echo "$out" |
      grep -E '^time|error' | tr '\n' ' ')"
  done
done
