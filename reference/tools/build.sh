#!/bin/sh
# reference/tools/build.sh — builds the bound-measuring tool by hand (it is deliberately outside the
# CMake globs). Usage: reference/tools/build.sh [build-dir]   (after building tapewise and
# tapewise_reference there). Links MPFR/GMP and the C++ runtime statically, as CMake does, so the
# binary runs on the GPU machine.
set -e
B=${1:-build-ref}
cd "$(dirname "$0")/../.."
mkdir -p "$B/bin"
CUDA=${CUDA_HOME:-/usr/local/cuda}
g++ -std=c++20 -O2 -Wall -Wextra -ffp-contract=off -fno-fast-math \
  -Iinclude -Ireference -I/usr/include/eigen3 -I"$CUDA/include" \
  reference/tools/measure_bounds.cpp "$B/libtapewise.a" "$B/libtapewise_reference.a" \
  -L"$CUDA/lib64" -lcudart_static -ldl -lrt -l:libmpfr.a -l:libgmp.a -pthread \
  -static-libstdc++ -static-libgcc -o "$B/bin/measure_bounds"
echo "built $B/bin/measure_bounds"
