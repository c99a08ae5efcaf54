#!/usr/bin/env bash
# lina run --device gpu --check for every preset at two shapes, from
# dist/bin/lina (scripts/gpu-check.sh --stage): the CLI's whole path from a
# preset to a GPU result checked against the float64 reference.
set -u
fail=0
for p in linear_attn retnet mamba2 gla deltanet gdn kda rwkv7; do
  for extra in "--shape 2,1000,4" "--shape 1,777,2,4 --varlen 100,0,300,377 --strategy materialize --dtype f32"; do
    out=$(dist/bin/lina run $p $extra --device gpu --check --repeat 3 2>&1)
    rc=$?
    echo "$p [$extra] rc=$rc: $(echo "$out" | grep -E 'rel. error|error:' | head -1)"
    [ $rc -eq 0 ] || fail=1
  done
done
exit $fail
