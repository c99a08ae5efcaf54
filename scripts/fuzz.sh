#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# each for a while on the seed corpus (test/fuzz/corpus, examples/). A crash
# fails the script and leaves the input as build-fuzz/crash-*; turn it into a
# regression case in test/fuzz/corpus.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
build="$root/build-fuzz"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLINA_FUZZ=ON -DLINA_STATIC=OFF >/dev/null
cmake --build "$build" -j "${LINA_JOBS:-2}" --target spec-pipeline-fuzzer cli-fuzzer
export ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=0
corpus="$build/corpus"
mkdir -p "$corpus/spec" "$corpus/cli"
cp "$root"/test/fuzz/corpus/*.mlir "$root"/examples/*.mlir "$corpus/spec/"
cp "$root"/test/fuzz/cli-seeds/* "$corpus/cli/" 2>/dev/null || true
cd "$build"
"$build/test/fuzz/spec-pipeline-fuzzer" -max_total_time="$seconds" \
  -max_len=4096 -timeout=20 "$corpus/spec"
"$build/test/fuzz/cli-fuzzer" -max_total_time="$seconds" -max_len=256 \
  -timeout=20 "$corpus/cli"
echo "fuzz: no crashes in ${seconds}s per target"
