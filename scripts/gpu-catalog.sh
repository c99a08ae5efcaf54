#!/usr/bin/env bash
# The catalog of specs no preset spells (examples/catalog/*.mlir) on the GPU:
# each against the float64 reference, timed beside the preset its header
# names as nearest, at one shape, with the schedule a user gets untuned.
# Runs from dist/bin/lina (staged by scripts/gpu-check.sh --stage).
#
#   bash scripts/gpu-catalog.sh                 # 1 x 8192 tokens, 96 value heads
#   bash scripts/gpu-catalog.sh 2,4096,32       # B,T,HV
#
# Prints a Markdown table (variant, its time, the preset's, their ratio, the
# variant's relative error, PASS/FAIL) and writes every report as JSON lines
# to $OUT/catalog.jsonl when OUT is set, else dist/logs/catalog.jsonl.
# Exit status: 0 every variant matched the reference, 1 one did not, 2 dist/
# is not staged.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
lina=dist/bin/lina
[ -x "$lina" ] || { echo "gpu-catalog: $lina is missing: run scripts/gpu-check.sh --stage on the build machine" >&2; exit 2; }
shape=${1:-1,8192,96}
IFS=, read -r batch tokens value_heads <<<"$shape"
logs=${OUT:-dist/logs}
mkdir -p "$logs"
jsonl="$logs/catalog.jsonl"
: >"$jsonl"

# The spec's heads and value heads (grouped specs keep their ratio).
field() { sed -n "s/.*$1 = \([0-9]*\).*/\1/p" "$2" | head -1; }

status=0
echo "| variant | nearest preset | variant ms | preset ms | ratio | rel. error | check |"
echo "|---|---|---|---|---|---|---|"
for spec in examples/catalog/*.mlir; do
  name=$(basename "$spec" .mlir)
  preset=$(sed -n 's/^\/\/ nearest preset: \([a-z_0-9]*\);.*/\1/p' "$spec")
  [ -n "$preset" ] || { echo "gpu-catalog: $spec names no nearest preset ('// nearest preset: NAME; ...')" >&2; exit 2; }
  heads=$(field heads "$spec") vheads=$(field value_heads "$spec")
  group=$((vheads / heads))
  run_shape="$batch,$tokens,$((value_heads / group)),$value_heads"
  variant=$("$lina" run "$spec" --device gpu --shape "$run_shape" --json 2>"$logs/catalog-$name.err")
  nearest=$("$lina" run "$preset" --device gpu --shape "$batch,$tokens,$value_heads" --json 2>"$logs/catalog-$preset.err")
  row=$(python3 - "$name" "$preset" "$variant" "$nearest" "$jsonl" <<'PY'
import json, sys
name, preset, variant, nearest, jsonl = sys.argv[1:6]
def load(text):
    try:
        return json.loads(text)
    except ValueError:
        return None
v, p = load(variant), load(nearest)
with open(jsonl, "a") as out:
    for role, report in (("variant", v), ("nearest", p)):
        out.write(json.dumps({"catalog": name, "role": role, "report": report}) + "\n")
ms = lambda r: r and (r.get("timing") or {}).get("median_ms")
vm, pm = ms(v), ms(p)
ratio = f"{vm / pm:.2f}" if vm and pm else "-"
err = v and (v.get("errors") or {}).get("output")
ok = bool(v and v.get("pass"))
cell = lambda x: f"{x:.3f}" if x else "-"
print(f"| {name} | {preset} | {cell(vm)} | {cell(pm)} | {ratio} | "
      f"{err:.1e} | {'PASS' if ok else 'FAIL'} |" if err is not None else
      f"| {name} | {preset} | {cell(vm)} | {cell(pm)} | {ratio} | - | FAIL |")
PY
)
  echo "$row"
  case $row in *"| FAIL |") status=1 ;; esac
done
exit $status
