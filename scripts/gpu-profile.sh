#!/usr/bin/env bash
# Where the forward time goes, kernel by kernel: Nsight Compute's duration of
# every lina kernel of one `lina run` (prepare, scan, output), for the
# schedules in LINA_PROFILE_ARGS (';'-separated lina run flags, '' the
# default), then the warp-state and memory sections of the default scan of
# the first preset (or the kernel LINA_PROFILE_KERNEL names), and that
# kernel's instructions and stall samples per barrier-delimited segment
# (scripts/sass_segments.py).
# docs/perf-notes.md records what it said. Needs dist/
# staged (scripts/gpu-check.sh --stage) and ncu (Nsight Compute). Its
# files go to the directory in $OUT when set, else dist/logs/profile/.
#   bash scripts/gpu-profile.sh [PRESET...]     (default: gdn kda)
set -u
cd "$(dirname "$0")/.."
out=${OUT:-dist/logs/profile}
mkdir -p "$out"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(gdn kda)
shape=${LINA_PROFILE_SHAPE:-"1,8192,96 --dk 128 --dv 128"}
IFS=';' read -ra variants <<<"${LINA_PROFILE_ARGS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
ncu_flags=(--clock-control none --target-processes all)
for p in "${presets[@]}"; do
  for v in "${variants[@]}"; do
    # One timed call after one warm-up: the last launch of each kernel counts.
    # shellcheck disable=SC2086
    ncu "${ncu_flags[@]}" --metrics gpu__time_duration.sum --csv \
      dist/bin/lina run "$p" --shape $shape --device gpu --repeat 1 \
      --no-initial-state --no-cache $v >"$out/$p-durations.csv" 2>"$out/$p.err"
    echo "== $p $shape $v"
    python3 - "$out/$p-durations.csv" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("  no kernel ran; lina said: " + " ".join(
        l.strip() for l in open(sys.argv[1].replace("-durations.csv", ".err"))
        if "error" in l))
head, rows = rows[0], rows[1:]
name, value = head.index("Kernel Name"), head.index("Metric Value")
last = {}
for r in rows:
    last[r[name]] = float(r[value].replace(",", ""))
total = sum(last.values())
for k, ns in last.items():
    print(f"  {k:32s} {ns / 1e3:10.1f} us  {100 * ns / total:5.1f}%")
print(f"  {'total':32s} {total / 1e3:10.1f} us")
EOF
  done
done
# Sections and stall reasons of one kernel of the first preset at its default
# schedule (or the lina run flags in LINA_PROFILE_KERNEL_ARGS), one launch:
# the scan (the kernel that walks the chunks) unless LINA_PROFILE_KERNEL
# names another by regex (prepare, output).
kernel=${LINA_PROFILE_KERNEL:-scan|fused}
kernel_args=${LINA_PROFILE_KERNEL_ARGS:-}
tag=$(echo "$kernel" | tr -c 'a-z0-9\n' '-')
# shellcheck disable=SC2086
ncu "${ncu_flags[@]}" -k regex:"$kernel" -c 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  dist/bin/lina run "${presets[0]}" --shape $shape --device gpu --repeat 1 \
  --no-initial-state --no-cache $kernel_args >"$out/${presets[0]}-$tag-sections.txt" 2>&1
# shellcheck disable=SC2086
ncu "${ncu_flags[@]}" -k regex:"$kernel" -c 1 --metrics \
  regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  dist/bin/lina run "${presets[0]}" --shape $shape --device gpu --repeat 1 \
  --no-initial-state --no-cache $kernel_args >"$out/${presets[0]}-$tag-stalls.txt" 2>&1
echo "== sections of ${presets[0]}'s /$kernel/ kernel $kernel_args"
grep -E "Duration|Registers|Shared Memory|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Issued|Eligible|No Eligible|Throughput|Block Limit|Waves" \
  "$out/${presets[0]}-$tag-sections.txt" | head -60
echo "== stall reasons (warps per issued instruction)"
grep -E "stalled" "$out/${presets[0]}-$tag-stalls.txt" | sort -k3 -n -r | head -14
# Per-instruction costs of the same kernel (Nsight Compute's source page:
# executed instructions and warp-stall samples of every SASS instruction),
# summed per barrier-delimited segment of its loop by scripts/sass_segments.py,
# so a segment's share of the time can be tied to the ops that emitted it.
# shellcheck disable=SC2086
ncu "${ncu_flags[@]}" -k regex:"$kernel" -c 1 --section SourceCounters \
  --section WarpStateStats --page source --print-source sass --csv \
  dist/bin/lina run "${presets[0]}" --shape $shape --device gpu --repeat 1 \
  --no-initial-state --no-cache $kernel_args >"$out/${presets[0]}-$tag-source.csv" 2>&1
echo "== per-segment costs of ${presets[0]}'s /$kernel/ kernel"
python3 scripts/sass_segments.py "$out/${presets[0]}-$tag-source.csv" | head -60
