#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# each for a while on its seed corpus: spec text (test/fuzz/corpus,
# examples/), CLI arguments (test/fuzz/cli-seeds), cache import files
# (test/fuzz/cache-corpus and fresh exports from make-cache-seeds). A crash
# fails the script and leaves the input as build-fuzz/crash-*; turn it into a
# regression case: spec text in test/fuzz/corpus, an import file in
# test/fuzz/cache-corpus (cache-tests replays those in every build).
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
build="$root/build-fuzz"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLINA_FUZZ=ON -DLINA_STATIC=OFF >/dev/null
cmake --build "$build" -j "${LINA_JOBS:-2}" --target spec-pipeline-fuzzer cli-fuzzer \
  cache-import-fuzzer make-cache-seeds
export ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=0
corpus="$build/corpus"
mkdir -p "$corpus/spec" "$corpus/cli" "$corpus/cache"
cp "$root"/test/fuzz/corpus/*.mlir "$root"/examples/*.mlir "$corpus/spec/"
cp "$root"/test/fuzz/cli-seeds/* "$corpus/cli/" 2>/dev/null || true
cp "$root"/test/fuzz/cache-corpus/* "$corpus/cache/"
"$build/test/fuzz/make-cache-seeds" "$corpus/cache"
cd "$build"
"$build/test/fuzz/spec-pipeline-fuzzer" -max_total_time="$seconds" \
  -max_len=4096 -timeout=20 "$corpus/spec"
"$build/test/fuzz/cli-fuzzer" -max_total_time="$seconds" -max_len=256 \
  -timeout=20 "$corpus/cli"
"$build/test/fuzz/cache-import-fuzzer" -max_total_time="$seconds" \
  -max_len=65536 -timeout=20 "$corpus/cache"
echo "fuzz: no crashes in ${seconds}s per target"
