#!/usr/bin/env bash
# tools/sanitize.sh — builds the CPU library, the tests and tapewise-conform with AddressSanitizer and
# UndefinedBehaviorSanitizer (g++, build-asan/), runs the CPU test suite and the runner on a sample
# (run, audit, and a vectors -> eval -> check round trip in a temp folder), and fails on any report.
# Installs nothing. On two cores (2026-12-06): the build about 5 minutes, the tests and the runner about 3.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-asan"
start=$SECONDS

rc_params="seed=20261130 max_success=100"
# ASan needs the dynamic C++ runtime (TAPEWISE_STATIC_RUNTIME=OFF); a smaller RapidCheck budget
# keeps the instrumented suite fast. -O1 -g1 (file and line in every report, no variable locations):
# ASan's recommended optimisation, and the build is the step's largest share. A unity build compiles
# each target's sources in batches, so the headers and the templates they share (GoogleTest,
# RapidCheck, JSON, the kernels) are compiled once a batch (2026-12-06, two cores, nothing else
# running: 402 s and 787 CPU-seconds one source at a time, 282 s and 506 in batches).
CC=gcc CXX=g++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_UNITY_BUILD=ON -DTAPEWISE_CUDA=OFF -DTAPEWISE_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAPEWISE_STATIC_RUNTIME=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DTAPEWISE_RC_PARAMS="$rc_params" >/dev/null
# Everything: ctest also runs the example and C-API executables the suite defines.
ninja -C "$build" -j2
echo "sanitize.sh: built in $((SECONDS - start)) s"

# Any report aborts the process that made it (exit status non-zero); the logs are also searched,
# in case a report came from a child whose status was not looked at.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The instruction-set and vector math tests at a fraction of their inputs: under ASan at -O1 their scalar loops dominate.
export TAPEWISE_ISA_STRIDE=65537
export TAPEWISE_VECTOR_MATH_STRIDE=65537  # the vector math test likewise
export TAPEWISE_SWEEP_FLOAT64_CASES=10000  # and the float64 libm nodes' MPFR sweep, a tenth
work="$(mktemp -d "${TMPDIR:-/tmp}/tapewise_sanitize.XXXXXX")"
trap 'rm -rf "$work"' EXIT
reports='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:'

# Runs a command with its output in $work/<name>.log; fails (printing the log's end) on a non-zero
# status other than `allowed`, or on any sanitizer report in the log.
step() {
  local name="$1" allowed="$2"
  shift 2
  local rc=0
  "$@" >"$work/$name.log" 2>&1 || rc=$?
  if { [ "$rc" -ne 0 ] && [ "$rc" -ne "$allowed" ]; } || grep -Eq "$reports" "$work/$name.log"; then
    tail -n 60 "$work/$name.log"
    echo "sanitize.sh: FAILED: $name (exit $rc)" >&2
    exit 1
  fi
  echo "sanitize.sh: ok: $name ($((SECONDS - start)) s)"
}

# The GoogleTest suite in two processes (gtest's shards), not ctest's one process a test: under ASan a
# process start costs ~0.17 s of CPU, ~5 of the suite's 8 CPU-minutes (2026-12-05: ctest 235 s of wall
# clock for all, the two shards 83 s). ctest runs the rest (label gtest excluded): the example, the C ABI
# programs, the build-failure and script tests. The RapidCheck budget is the configure step's.
gtest_shards() {
  local shard rc=0
  for shard in 0 1; do
    GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard RC_PARAMS="$rc_params" "$build/bin/tapewise_tests" --gtest_brief=1 \
      >"$work/gtest_shard$shard.log" 2>&1 &
  done
  for shard in 0 1; do wait -n || rc=1; done
  cat "$work/gtest_shard0.log" "$work/gtest_shard1.log"
  return "$rc"
}
step gtest 0 gtest_shards
step ctest 0 ctest --test-dir "$build" --output-on-failure -j2 -LE gtest
conform="$build/bin/tapewise-conform"
step run 0 "$conform" run --backend cpu --cases 500 --seed 1 --json "$work/run.json"
step audit 0 "$conform" audit --backend cpu --markdown "$work/audit.md"
step vectors 0 "$conform" vectors "$work/vectors" --cases 50 --seed 2
# Answer every suite with tapewise itself (eval), then grade: it must conform.
answer_suites() {
  python3 - "$conform" "$work/vectors" <<'PY'
import json, subprocess, sys
conform, folder = sys.argv[1], sys.argv[2]
for s in json.load(open(folder + "/index.json"))["suites"]:
    d = folder + "/" + s["id"]
    args = [conform, "eval", s["op"], "--backend", "cpu", "--prefix", "out_", "--out", d, "--dtype", s["dtype"]]
    for name, f in s["inputs"].items():
        args += ["--" + name, d + "/" + f]
    if s.get("same"):
        args.append("--same")
    for name, v in s["scalars"].items():
        args += ["--" + name, v.hex() if isinstance(v, float) else str(v)]
    r = subprocess.run(args, capture_output=True, text=True)
    sys.stdout.write(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit("eval failed: " + " ".join(args))
PY
}
step eval 0 answer_suites
step check 0 "$conform" check "$work/vectors" --json "$work/check.json"
echo "sanitize.sh: no sanitizer report; $((SECONDS - start)) s in all"
