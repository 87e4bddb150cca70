#!/usr/bin/env bash
# tools/test.sh — every test, after tools/setup.sh --for-tests has built build/: the GoogleTest and
# RapidCheck suite and the runner's CLI tests (ctest), the prover and its mutants (prove), the installed
# package and its consumers
# (test_package.sh), the build without the system's tl-expected and dlpack headers
# (test_vendored_headers.sh), the Python package (pip install . and pytest, with the framework adapters'
# tests), the Doxygen API reference with no undocumented public symbol (api_docs.sh), the ASan+UBSan
# build (sanitize.sh), the threaded C ABI test under ThreadSanitizer (tsan.sh)
# and a short fuzzing run (fuzz.sh). Runs every step,
# then prints one line per step and "N passed, N failed"; exit status: the number of failed steps.
# FUZZ_SECONDS (default 60) is the time per fuzz harness. Python is the virtual environment that
# setup.sh --for-tests made ($TAPEWISE_VENV, default .venv/), first on the PATH for every step.
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
results=()
failed=0
step() {  # step NAME COMMAND...
  local name=$1; shift
  local start=$SECONDS
  echo "===== $name"
  "$@"
  local rc=$?
  results+=("$(printf '%-10s %s after %d s' "$name" "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" $((SECONDS - start)))")
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
python_tests() {
  # The architectures setup.sh built for (CUDA_ARCH, default 90), not the package's default list: that
  # list costs 5-10 minutes more here and this machine runs no kernel. The long option: Debian 12's pip
  # (23.0) has no -C.
  python3 -m pip install -q --no-build-isolation --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" . &&
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
step ctest ctest --test-dir "$build" --output-on-failure -j2
step prove prove_tests
step package tools/test_package.sh
step vendored tools/test_vendored_headers.sh
step python python_tests
step apidocs tools/api_docs.sh
step sanitize tools/sanitize.sh
step tsan tools/tsan.sh
step fuzz tools/fuzz.sh "${FUZZ_SECONDS:-60}"
echo "===== summary"
printf '%s\n' "${results[@]}"
echo "test.sh: $((${#results[@]} - failed)) passed, $failed failed"
exit "$failed"
