#!/usr/bin/env bash
# The main job on a fresh machine: build lina, compile a preset to CUDA and a
# cubin (NVRTC, no GPU needed), check the chunkwise algorithm against the
# float64 reference on the CPU, and, where a GPU is present, run the generated
# kernel and check it against the reference there too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${LINA_JOBS:-2}" --target lina lina-opt
lina=build/bin/lina

echo "== the preset, as a spec"
$lina spec gdn --dk 64 --dv 64 --heads 4
echo "== compiled to CUDA C++ and to a cubin for sm_90"
$lina compile gdn --dk 64 --dv 64 --heads 4 --emit cuda -o build/gdn.cu
if $lina compile gdn --dk 64 --dv 64 --heads 4 --emit cubin --arch sm_90 \
     -o build/gdn.cubin; then
  echo "build/gdn.cu ($(wc -l <build/gdn.cu) lines), build/gdn.cubin ($(wc -c <build/gdn.cubin) bytes)"
else
  echo "(no NVRTC here: install CUDA 13 at /usr/local/cuda for cubins)"
fi
echo "== the chunkwise algorithm against the float64 reference, on the CPU"
$lina run gdn --shape 2,300,4 --dk 64 --dv 64
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== the generated kernel on the GPU, against the float64 reference"
  $lina run gdn --shape 2,2048,8 --dk 128 --dv 128 --device gpu --check
else
  echo "== no GPU here: skipping 'lina run gdn --device gpu --check'"
fi
