#!/usr/bin/env bash
# The catalog of specs no preset spells (examples/catalog/*.mlir) on the GPU:
# each against the float64 reference, timed beside the preset its header
# names as nearest, at one shape, with the schedule a user gets untuned.
# Runs from dist/bin/lina (staged by scripts/gpu-check.sh --stage).
#
#   bash scripts/gpu-catalog.sh                 # 1 x 8192 tokens, 96 value heads
#   bash scripts/gpu-catalog.sh 2,4096,32       # B,T,HV
#
# The float64 reference runs on the CPU and takes at most 2^26 elements a
# tensor (1 x 8192 x 96 x 128 is 1.5 times that), so each variant is checked
# at a shape of its own, LINA_CATALOG_CHECK_SHAPE (B,T,HV; default
# 2,1024,16) with fresh random inputs, and timed at the shape given.
#
# Prints a Markdown table (variant, its time, the preset's, their ratio, the
# variant's relative error, PASS/FAIL, and the first error line of a run that
# failed) and writes every report as JSON lines to $OUT/catalog.jsonl when
# OUT is set, else dist/logs/catalog.jsonl; each run's stderr goes to
# catalog.log beside it. Exit status: 0 every variant matched the reference,
# 1 one did not, 2 dist/ is not staged.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
lina=dist/bin/lina
[ -x "$lina" ] || { echo "gpu-catalog: $lina is missing: run scripts/gpu-check.sh --stage on the build machine" >&2; exit 2; }
shape=${1:-1,8192,96}
IFS=, read -r batch tokens value_heads <<<"$shape"
check_shape=${LINA_CATALOG_CHECK_SHAPE:-2,1024,16}
IFS=, read -r check_batch check_tokens check_value_heads <<<"$check_shape"
logs=${OUT:-dist/logs}
mkdir -p "$logs"
jsonl="$logs/catalog.jsonl"
errors="$logs/catalog.log"
: >"$jsonl"
: >"$errors"
# Runs lina with its stderr appended to catalog.log under a header line.
run() {
  echo "== lina $*" >>"$errors"
  "$lina" "$@" 2>>"$errors"
}

# The spec's heads and value heads (grouped specs keep their ratio).
field() { sed -n "s/.*$1 = \([0-9]*\).*/\1/p" "$2" | head -1; }

status=0
echo "| variant | nearest preset | variant ms | preset ms | ratio | rel. error | check | why not |"
echo "|---|---|---|---|---|---|---|---|"
for spec in examples/catalog/*.mlir; do
  name=$(basename "$spec" .mlir)
  preset=$(sed -n 's/^\/\/ nearest preset: \([a-z_0-9]*\);.*/\1/p' "$spec")
  [ -n "$preset" ] || { echo "gpu-catalog: $spec names no nearest preset ('// nearest preset: NAME; ...')" >&2; exit 2; }
  heads=$(field heads "$spec") vheads=$(field value_heads "$spec")
  group=$((vheads / heads))
  run_shape="$batch,$tokens,$((value_heads / group)),$value_heads"
  check_run_shape="$check_batch,$check_tokens,$((check_value_heads / group)),$check_value_heads"
  checked=$(run run "$spec" --device gpu --check --shape "$check_run_shape" --json)
  variant=$(run run "$spec" --device gpu --shape "$run_shape" --json)
  nearest=$(run run "$preset" --device gpu --shape "$batch,$tokens,$value_heads" --json)
  row=$(python3 - "$name" "$preset" "$checked" "$variant" "$nearest" "$jsonl" <<'PY'
import json, sys
name, preset, checked, variant, nearest, jsonl = sys.argv[1:7]
def load(text):
    try:
        return json.loads(text)
    except ValueError:
        return None
c, v, p = load(checked), load(variant), load(nearest)
with open(jsonl, "a") as out:
    for role, report in (("check", c), ("variant", v), ("nearest", p)):
        out.write(json.dumps({"catalog": name, "role": role, "report": report}) + "\n")
ms = lambda r: r and (r.get("timing") or {}).get("median_ms")
vm, pm = ms(v), ms(p)
ratio = f"{vm / pm:.2f}" if vm and pm else "-"
err = c and (c.get("errors") or {}).get("output")
# A pass needs the checked run's verdict and a timed run that finished.
ok = bool(c and c.get("pass") and vm)
failure = next((r.get("failure") for r in (c, v, p) if r and r.get("failure")), None)
if failure is None and not (c and v and p):
    failure = "a run printed no report: catalog.log has its error"
cell = lambda x: f"{x:.3f}" if x else "-"
print(f"| {name} | {preset} | {cell(vm)} | {cell(pm)} | {ratio} | "
      f"{'-' if err is None else f'{err:.1e}'} | {'PASS' if ok else 'FAIL'} | "
      f"{'' if ok or failure is None else str(failure).splitlines()[0]} |")
PY
)
  echo "$row"
  case $row in *"| FAIL |"*) status=1 ;; esac
done
exit $status
