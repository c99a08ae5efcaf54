#!/bin/sh
# lina_c.h's deprecated names of the mma knob (DeprecatedNames.c uses each)
# warn where used, each naming what replaces it.
#   deprecated-names.sh CC INCLUDE_DIR SOURCE
set -u
out=$("$1" -fsyntax-only -I"$2" "$3" 2>&1) || { echo "$out"; exit 1; }
for use in 'use mma' 'use lina_mma' 'use LINA_MMA_DEFAULT' 'use LINA_MMA_WARP' \
  'use LINA_MMA_WARPGROUP'; do
  if ! printf '%s\n' "$out" | grep -q "is deprecated: $use\\b"; then
    printf '%s\n' "$out"
    echo "no warning: is deprecated: $use"
    exit 1
  fi
done
