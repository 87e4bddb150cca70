#!/usr/bin/env bash
# tools/test_vendored_headers.sh — the build on a machine without Debian's libexpected-dev and
# libdlpack-dev: configures the library (CPU backend) with CMake told to ignore every system prefix
# (CMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local, so neither tl-expected's package nor dlpack.h is found)
# and checks that it falls back to third_party/, builds it, proves from Ninja's dependency records
# that no object read /usr/include/tl or /usr/include/dlpack, installs it, and builds and runs
# examples/consumer against the install (find_package and pkg-config) with the same check.
# Build folder: build-vendored/ ($TAPEWISE_VENDORED_BUILD). Exit status: non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TAPEWISE_VENDORED_BUILD:-build-vendored}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test_vendored_headers: FAILED: $*" >&2; exit 1; }
quiet() { "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log"; fail "$*"; }; }
# Every header an object of build folder $1 read, from Ninja's deps log; none may be a system copy.
check_no_system_copy() {
  ninja -C "$1" -t deps > "$work/deps.txt"
  if grep -E '^\s*/usr(/local)?/include/(tl/expected\.hpp|dlpack/dlpack\.h)' "$work/deps.txt"; then
    fail "$1 compiled against the system's header above, not third_party's"
  fi
  grep -q "$2" "$work/deps.txt" || fail "no object in $1 read $2"
}

echo "== configure with the system prefixes ignored: the fallback to third_party"
rm -rf "$build"
# Unoptimized and without the x86-64-v3 loop copy (CI time): what is checked here is which headers the
# objects read, which neither changes.
quiet cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0" \
      -DCMAKE_CXX_FLAGS="-DTAPEWISE_NO_ISA_CLONES" -DTAPEWISE_CUDA=OFF \
      -DTAPEWISE_BUILD_TESTS=OFF -DTAPEWISE_BUILD_TOOLS=OFF "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local"
grep 'tapewise: tl/expected.hpp from' "$work/last.log" | sed 's/^-- /   /'
grep -q 'tl/expected.hpp from third_party, dlpack/dlpack.h from third_party' "$work/last.log" ||
  fail "configure did not fall back to third_party for both headers"

echo "== build: every object reads the vendored copies"
quiet cmake --build "$build"
check_no_system_copy "$build" 'third_party/tl-expected/include/tl/expected.hpp'
grep -q 'third_party/dlpack/include/dlpack/dlpack.h' "$work/deps.txt" || fail "no object read the vendored dlpack.h"

echo "== install: the vendored tl/expected.hpp goes with the headers"
quiet cmake --install "$build" --prefix "$work/prefix"
[ -f "$work/prefix/include/tapewise/vendor/tl/expected.hpp" ] || fail "the install has no include/tapewise/vendor/tl/expected.hpp"
cmp -s third_party/tl-expected/include/tl/expected.hpp "$work/prefix/include/tapewise/vendor/tl/expected.hpp" ||
  fail "the installed tl/expected.hpp differs from third_party's"

echo "== examples/consumer through find_package, against the install only"
quiet cmake -S examples/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
      "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local"
quiet cmake --build "$work/consumer"
check_no_system_copy "$work/consumer" 'tapewise/vendor/tl/expected.hpp'
"$work/consumer/consumer" | tail -n 1

echo "== examples/consumer through pkg-config --cflags"
# shellcheck disable=SC2046
g++ -std=c++20 -H examples/consumer/main.cpp -o "$work/consumer_pc" \
    $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs --static tapewise) 2> "$work/includes.txt"
grep -q 'tapewise/vendor/tl/expected.hpp' "$work/includes.txt" || fail "pkg-config's --cflags do not lead to the vendored tl/expected.hpp"
"$work/consumer_pc" | tail -n 1
echo "test_vendored_headers: passed"
