#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS_PER_HARNESS] — builds the libFuzzer harnesses of proptest/fuzz (clang,
# ASan + UBSan) into build-fuzz/ and runs each for SECONDS_PER_HARNESS (default 60) on a copy of its
# seed corpus in a temp folder (the committed corpus is never modified), as many at once as there are
# cores. One summary line per harness; exits non-zero when any harness finds a crash, leak or UB (its
# input is kept under build-fuzz/artifacts/). Installs nothing: tools/setup.sh provides clang.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: tools/fuzz.sh [SECONDS_PER_HARNESS (a whole number >= 1, default 60)]" >&2
  exit 2
fi
jobs="${TAPEWISE_FUZZ_JOBS:-$(nproc)}"
if ! [[ "$jobs" =~ ^[0-9]+$ ]] || [ "$jobs" -lt 1 ]; then
  echo "fuzz.sh: TAPEWISE_FUZZ_JOBS is '$jobs'; it takes a whole number >= 1" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-fuzz"
harnesses=(npy_fuzz index_fuzz special_points_fuzz c_api_fuzz)

# The libraries get coverage instrumentation (fuzzer-no-link) and the sanitizers (TAPEWISE_SANITIZE);
# the harnesses add -fsanitize=fuzzer themselves (proptest/fuzz/CMakeLists.txt).
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DTAPEWISE_CUDA=OFF -DTAPEWISE_BUILD_FUZZERS=ON \
  -DTAPEWISE_BUILD_TESTS=OFF -DTAPEWISE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
ninja -C "$build" -j2 "${harnesses[@]}"

work="$(mktemp -d "${TMPDIR:-/tmp}/tapewise_fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# One harness for its full time, in its own temp folder (libFuzzer writes nothing anywhere else); the
# summary line goes to $work/<harness>/summary and the exit status to $work/<harness>/status.
fuzz_one() {
  local h=$1 corpus_name="${1%_fuzz}" result=ok
  mkdir -p "$work/$h/corpus" "$work/$h/artifacts"
  cp -R "$root/proptest/fuzz/corpus/$corpus_name/." "$work/$h/corpus/"
  local log="$work/$h/log"
  if ! (cd "$work/$h" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$build/bin/$h" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/$h/artifacts/" corpus >"$log" 2>&1); then
    result="FAILED (log: build-fuzz/artifacts/$h.log)"
  fi
  local runs cov
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)"
  printf '%-20s runs %-10s coverage %-6s (edges) %s\n' "$h" "${runs:-?}" "${cov:-?}" "$result" >"$work/$h/summary"
  [ "$result" = ok ]
}

# Each harness is one process on one core: as many run at once as there are cores, each for its full
# time, so the step takes ceil(harnesses / cores) * SECONDS_PER_HARNESS instead of the sum.
running=0
for h in "${harnesses[@]}"; do
  fuzz_one "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true

status=0
for h in "${harnesses[@]}"; do
  cat "$work/$h/summary"
  if ! grep -q ' ok$' "$work/$h/summary"; then
    status=1
    mkdir -p "$build/artifacts"
    cp "$work/$h/log" "$build/artifacts/$h.log"
    cp -R "$work/$h/artifacts/." "$build/artifacts/" 2>/dev/null || true
  fi
done
exit "$status"
