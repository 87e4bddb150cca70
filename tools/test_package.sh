#!/usr/bin/env bash
# tools/test_package.sh — tapewise as other projects use it: installs the build (build/, or
# $TAPEWISE_BUILD) into a temporary prefix and builds and runs examples/consumer (C++ and C) against
# it through find_package, checks the pkg-config file, builds the consumer again through
# add_subdirectory, and does it all once more with BUILD_SHARED_LIBS=ON (CPU backend), whose
# libtapewise.so also serves the C ABI's ctypes test. Exit status: non-zero on the first failure.
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

echo "== pkg-config"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --modversion tapewise
# shellcheck disable=SC2046
g++ -std=c++20 examples/consumer/main.cpp -o "$work/consumer_pc" \
    $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs tapewise)
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
quiet cmake -S . -B "$shared_build" -G Ninja -DBUILD_SHARED_LIBS=ON -DTAPEWISE_CUDA=OFF \
      -DTAPEWISE_BUILD_TESTS=OFF -DTAPEWISE_BUILD_TOOLS=OFF
quiet cmake --build "$shared_build"
quiet cmake --install "$shared_build" --prefix "$work/shared"
quiet cmake -S examples/consumer -B "$work/consumer_shared" -G Ninja -DCMAKE_PREFIX_PATH="$work/shared"
quiet cmake --build "$work/consumer_shared"
ldd "$work/consumer_shared/consumer" | grep -o 'libtapewise[^ ]* => [^ ]*'
"$work/consumer_shared/consumer" | tail -n 1
"$work/consumer_shared/consumer_c" | tail -n 1
TAPEWISE_LIB="$(ls "$work"/shared/lib/libtapewise.so)" python3 -m pytest -q -p no:cacheprovider proptest/test_c_api_ctypes.py
echo "test_package: all passed"
