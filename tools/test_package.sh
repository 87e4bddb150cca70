#!/usr/bin/env bash
# tools/test_package.sh — tapewise as other projects use it: installs the build (build/, or
# $TAPEWISE_BUILD) into a temporary prefix and builds and runs examples/consumer (C++ and C) against
# it through find_package, checks the pkg-config file (no machine paths; --static for the static
# library), builds the consumer again through add_subdirectory, and does it all once more with
# BUILD_SHARED_LIBS=ON (CPU backend): the library's exports (the public API only,
# tools/check_exports.py), pkg-config without --static, the installed runner (self-contained),
# find_package's components (cpu found, cuda refused), a switch given a value that is not ON/OFF
# (refused), and the C ABI's ctypes test on its libtapewise.so. Exit status: non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TAPEWISE_BUILD:-build}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet() { "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log"; echo "test_package: FAILED: $*" >&2; exit 1; }; }

echo "== install $build into a temporary prefix"
quiet cmake --install "$build" --prefix "$work/prefix"
(cd "$work/prefix" && find . -type f | sort | sed 's/^/   /')

echo "== examples/consumer through find_package(tapewise)"
quiet cmake -S examples/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/consumer"
"$work/consumer/consumer"
"$work/consumer/consumer_c"

echo "== pkg-config (static library: --static gives the full link set)"
pc() { PKG_CONFIG_PATH="$1/lib/pkgconfig" pkg-config "${@:2}" tapewise; }
pc "$work/prefix" --modversion
# No build-machine paths in the .pc: only ${prefix}-relative ones (the prefix is the temporary one).
if grep -n '/usr/\|/opt/\|cuda/' "$work/prefix/lib/pkgconfig/tapewise.pc"; then
  echo "test_package: FAILED: tapewise.pc names a machine path" >&2; exit 1
fi
# A CUDA build's runtime goes by name only: the consumer puts CUDA's lib dir on its link path.
cuda_ldflags=()
cudart=$(sed -n 's/^CUDA_cudart_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
if grep -q '^TAPEWISE_CUDA:BOOL=ON' "$build/CMakeCache.txt" && [ -n "$cudart" ]; then
  cuda_ldflags=("-L$(dirname "$cudart")")
fi
# shellcheck disable=SC2046
g++ -std=c++20 examples/consumer/main.cpp -o "$work/consumer_pc" $(pc "$work/prefix" --cflags) \
    "${cuda_ldflags[@]}" $(pc "$work/prefix" --libs --static)
"$work/consumer_pc" | tail -n 1

echo "== the installed runner finds its data"
"$work/prefix/bin/tapewise-conform" --version
"$work/prefix/bin/tapewise-conform" run --backend cpu --ops relu,max --cases 200 | tail -n 1

echo "== examples/consumer through add_subdirectory (CPU backend)"
quiet cmake -S examples/consumer -B "$work/subdir" -G Ninja -DTAPEWISE_SOURCE="$PWD" -DTAPEWISE_CUDA=OFF
quiet cmake --build "$work/subdir"
"$work/subdir/consumer" | tail -n 1

echo "== BUILD_SHARED_LIBS=ON (CPU backend): install, consumer, C ABI from Python ctypes"
shared_build="${TAPEWISE_SHARED_BUILD:-build-shared}"
# Unoptimized, without the CPU backend's x86-64-v3 loop copy: this build checks linking, exports and
# installation, which optimization does not change, and -O0 compiles the runner's prover about 10x
# faster (CI time; the optimized code is tested in build/).
quiet cmake -S . -B "$shared_build" -G Ninja -DBUILD_SHARED_LIBS=ON -DTAPEWISE_CUDA=OFF \
      -DTAPEWISE_BUILD_TESTS=OFF -DTAPEWISE_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="-O0" -DCMAKE_C_FLAGS_DEBUG="-O0" -DCMAKE_CXX_FLAGS="-DTAPEWISE_NO_ISA_CLONES"
# The library and the runner alone: the only targets the install holds (the other tools are not installed).
quiet cmake --build "$shared_build" --target tapewise tapewise-conform
quiet cmake --install "$shared_build" --prefix "$work/shared"
quiet cmake -S examples/consumer -B "$work/consumer_shared" -G Ninja -DCMAKE_PREFIX_PATH="$work/shared"
quiet cmake --build "$work/consumer_shared"
ldd "$work/consumer_shared/consumer" | grep -o 'libtapewise[^ ]* => [^ ]*'
"$work/consumer_shared/consumer" | tail -n 1
"$work/consumer_shared/consumer_c" | tail -n 1
echo "== shared install: its exports, pkg-config without --static, the runner, the find_package components"
python3 tools/check_exports.py --self-test
python3 tools/check_exports.py "$(ls "$work"/shared/lib/libtapewise.so)"
# shellcheck disable=SC2046
g++ -std=c++20 examples/consumer/main.cpp -o "$work/consumer_pc_shared" $(pc "$work/shared" --cflags --libs)
LD_LIBRARY_PATH="$work/shared/lib" "$work/consumer_pc_shared" | tail -n 1
# The installed runner carries the engine it needs (linked statically: the shared library does not
# export it), so it runs from the install tree with no LD_LIBRARY_PATH.
env -u LD_LIBRARY_PATH "$work/shared/bin/tapewise-conform" --version
# find_package components: cpu is always there; cuda is refused, with a reason, by a CPU-only build.
mkdir -p "$work/components"
cat >"$work/components/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(tapewise_components LANGUAGES CXX)
find_package(tapewise 0.4 REQUIRED COMPONENTS ${COMPONENTS})
CMAKE
quiet cmake -S "$work/components" -B "$work/components/cpu" -DCMAKE_PREFIX_PATH="$work/shared" -DCOMPONENTS=cpu
if cmake -S "$work/components" -B "$work/components/cuda" -DCMAKE_PREFIX_PATH="$work/shared" \
     -DCOMPONENTS=cuda >"$work/components.log" 2>&1; then
  echo "test_package: FAILED: COMPONENTS cuda found in a CPU-only build" >&2; exit 1
fi
grep -q "built without CUDA" "$work/components.log" || {
  cat "$work/components.log"; echo "test_package: FAILED: no reason given for COMPONENTS cuda" >&2; exit 1; }
echo "   COMPONENTS cpu: found; COMPONENTS cuda: refused (built without CUDA)"
# A switch given a value CMake would read as false is refused, by name, before anything is built.
if cmake -S . -B "$work/bad_switch" -G Ninja -DTAPEWISE_CUDA=OFF -DTAPEWISE_UNITY_BUILD=banana \
     >"$work/bad_switch.log" 2>&1; then
  echo "test_package: FAILED: TAPEWISE_UNITY_BUILD=banana configured" >&2; exit 1
fi
grep -q "TAPEWISE_UNITY_BUILD is 'banana'; it takes ON or OFF" "$work/bad_switch.log" || {
  cat "$work/bad_switch.log"; echo "test_package: FAILED: no reason given for TAPEWISE_UNITY_BUILD=banana" >&2; exit 1; }
echo "   TAPEWISE_UNITY_BUILD=banana: refused by name"
TAPEWISE_LIB="$(ls "$work"/shared/lib/libtapewise.so)" python3 -m pytest -q -p no:cacheprovider proptest/test_c_api_ctypes.py
echo "test_package: all passed"
