#!/usr/bin/env bash
# tools/tsan.sh — builds the CPU library and the threaded C ABI test (proptest/c_api_threads_test.c: 8
# threads, each with tapes of its own on one shared backend) with ThreadSanitizer (g++, build-tsan/),
# runs it, and fails on any ThreadSanitizer report or wrong result. Installs nothing.
# Time on two busy cores: about 80 s from an empty build-tsan/ (60 s of it building), 15 s when it is built.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-tsan"
start=$SECONDS

# Only the library and the one test are built; the tests' dependencies are still looked up at
# configure time, as proptest/CMakeLists.txt defines the test beside the others.
CC=gcc CXX=g++ cmake -S "$root" -B "$build" -G Ninja -DTAPEWISE_CUDA=OFF -DTAPEWISE_BUILD_TOOLS=OFF \
  -DTAPEWISE_BUILD_TESTS=ON -DTAPEWISE_INSTALL=OFF -DTAPEWISE_STATIC_RUNTIME=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
ninja -C "$build" -j2 tapewise_c_api_threads_test >/dev/null
echo "tsan.sh: built in $((SECONDS - start)) s"

# A report makes the process exit non-zero; the log is searched as well, in case one did not.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
log="$(mktemp "${TMPDIR:-/tmp}/tapewise_tsan.XXXXXX")"
trap 'rm -f "$log"' EXIT
rc=0
"$build/bin/tapewise_c_api_threads_test" >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || grep -q "ThreadSanitizer" "$log"; then
  tail -n 80 "$log"
  echo "tsan.sh: FAILED: tapewise_c_api_threads_test (exit $rc)" >&2
  exit 1
fi
cat "$log"
echo "tsan.sh: no ThreadSanitizer report; $((SECONDS - start)) s in all"
