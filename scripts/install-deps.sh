#!/usr/bin/env bash
# Installs what lina needs to build and test on Debian 12 / Ubuntu: LLVM/MLIR 19
# (with FileCheck and lit's sources), SQLite, ninja, GoogleTest, static zlib and
# zstd for the self-contained binaries, python3-venv for the `pip install .`
# check, ccache (scripts/test.sh compiles through it, so that check reuses the
# Release tree's objects). CUDA (NVRTC) is optional: when /usr/local/cuda is
# present, the NVRTC tests compile kernels without a GPU.
set -euo pipefail
packages=(cmake ninja-build g++ python3 python3-venv llvm-19-dev libmlir-19-dev
          mlir-19-tools llvm-19-tools libsqlite3-dev libgtest-dev libgmock-dev
          zlib1g-dev libzstd-dev clang libclang-rt-14-dev ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
