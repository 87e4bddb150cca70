#!/usr/bin/env bash
# tools/test.sh — every test, after tools/setup.sh --for-tests has built build/: the GoogleTest and
# RapidCheck suite and the runner's CLI tests (ctest), the prover and its mutants (prove), the installed
# package and its consumers (test_package.sh), the build without the system's tl-expected and dlpack
# headers (test_vendored_headers.sh), the Python package (pip install . and pytest, with the framework
# adapters' tests), the Doxygen API reference with no undocumented public symbol (api_docs.sh), the
# ASan+UBSan build (sanitize.sh), the threaded C ABI test under ThreadSanitizer (tsan.sh) and a short
# fuzzing run (fuzz.sh). Runs every step, then prints one line per step and "N passed, N failed"; exit
# status: the number of failed steps.
#
# The steps run in two lanes at once: the sanitizer and package builds keep both cores busy while the
# other lane's single-threaded work (pytest, the solver, the fuzzers) runs beside them. Each step's
# output is printed whole when it ends; no step shares a build folder with another lane's.
# TAPEWISE_TEST_LANES=1 runs the steps one after another. FUZZ_SECONDS (default 30) is the time per
# fuzz harness. Python is the virtual environment that setup.sh --for-tests made ($TAPEWISE_VENV,
# default .venv/), first on the PATH for every step.
set -uo pipefail
cd "$(dirname "$0")/.."
build="${TAPEWISE_BUILD:-build}"
venv="${TAPEWISE_VENV:-.venv}"
[[ "$venv" = /* ]] || venv="$PWD/$venv"
if [ ! -x "$venv/bin/python3" ]; then
  echo "test.sh: no virtual environment at $venv: run tools/setup.sh --for-tests first" >&2
  exit 2
fi
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
lanes="${TAPEWISE_TEST_LANES:-2}"
if [ "$lanes" != 1 ] && [ "$lanes" != 2 ]; then
  echo "test.sh: TAPEWISE_TEST_LANES is '$lanes'; it takes 1 or 2" >&2
  exit 2
fi
logs="$(mktemp -d "${TMPDIR:-/tmp}/tapewise_test.XXXXXX")"
trap 'rm -rf "$logs"' EXIT

python_tests() {
  # The CPU backend only: the module's own code calls no CUDA, build/ has compiled the kernels already,
  # and this step runs no kernel (no GPU here; where one is, tools/gpu_validate.sh tests the CUDA wheel).
  # A CUDA build of the package would compile the kernels a second time: 5-10 minutes on 2 cores. Nor does
  # it compile the CPU loops' x86-64-v3 and -v4 copies (minutes): ctest checks them, and the bindings'
  # tests give the same bits in any instruction set. The long option: Debian 12's pip (23.0) has no -C.
  python3 -m pip install -q --no-build-isolation --config-settings=cmake.define.TAPEWISE_CUDA=OFF \
    --config-settings=cmake.define.CMAKE_CXX_FLAGS=-DTAPEWISE_NO_ISA_CLONES . &&
    TAPEWISE_CONFORM="$PWD/$build/bin/tapewise-conform" python3 -m pytest -q -p no:cacheprovider python/tests conform/frameworks
}
# The prover: its solver's bfloat16 rounding against an exact one, every node's forms proven equal to
# the spec's staging in the four dtypes (tapewise-conform prove, with the ATen formulas' audit), and
# every seeded mutant of the kernels refuted with a replayed counterexample.
prove_tests() {
  python3 prove/solver.py --self-test &&
    "$build/bin/tapewise-conform" prove --frameworks --json "$build/prove.json" &&
    python3 prove/mutants.py --build "$build" --out "$build/prove-mutants" --jobs "$(nproc)"
}

# step NAME COMMAND...: runs the command with its output in $logs/NAME.log, then prints the log whole
# (under a lock, so two lanes' logs never interleave) and records "NAME passed/FAILED after N s".
step() {
  local name=$1; shift
  local start=$SECONDS rc
  "$@" >"$logs/$name.log" 2>&1
  rc=$?
  local verdict="passed"
  [ "$rc" -eq 0 ] || verdict="FAILED (exit $rc)"
  {
    flock 9
    echo "===== $name"
    cat "$logs/$name.log"
    printf '%-10s %s after %d s\n' "$name" "$verdict" $((SECONDS - start)) >"$logs/$name.result"
  } 9>"$logs/.lock"
  return 0
}
# Balanced on a 2-core machine (a clean clone, 2026-12-06, fourteenth session): the ASan build and its
# tests, the API reference, the vendored-headers build and ThreadSanitizer (903 s) against the other five
# (925 s).
lane_a() {
  step ctest ctest --test-dir "$build" --output-on-failure -j2
  step prove prove_tests
  step python python_tests
  step fuzz tools/fuzz.sh "${FUZZ_SECONDS:-30}"
  step package tools/test_package.sh
}
lane_b() {
  step sanitize tools/sanitize.sh
  step apidocs tools/api_docs.sh
  step vendored tools/test_vendored_headers.sh
  step tsan tools/tsan.sh
}
if [ "$lanes" = 2 ]; then
  lane_a &
  lane_b &
  wait
else
  lane_a
  lane_b
fi

echo "===== summary"
failed=0
total=0
for name in ctest prove package vendored python apidocs sanitize tsan fuzz; do
  total=$((total + 1))
  if [ -f "$logs/$name.result" ]; then
    cat "$logs/$name.result"
    grep -q " passed after " "$logs/$name.result" || failed=$((failed + 1))
  else
    printf '%-10s FAILED (did not run)\n' "$name"
    failed=$((failed + 1))
  fi
done
echo "test.sh: $((total - failed)) passed, $failed failed"
exit "$failed"
