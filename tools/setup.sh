#!/usr/bin/env bash
# tools/setup.sh — one step from a fresh Debian machine to a built tapewise: installs the Debian
# packages the build needs (idempotent, silent when all are present), configures and builds.
# Build folder: $TAPEWISE_BUILD (default build/); GPU architecture: $CUDA_ARCH (default 90).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ librapidcheck-dev libgtest-dev libeigen3-dev libboost-dev
          libmpfr-dev libgmp-dev libexpected-dev libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "setup: nvcc (CUDA 13) not found; install the CUDA toolkit" >&2; exit 1; }

build="${TAPEWISE_BUILD:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
cmake --build "$build" -j"$(nproc)"
