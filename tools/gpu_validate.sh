#!/usr/bin/env bash
# tools/gpu_validate.sh OUTDIR [STEP...] — everything that needs the GPU, on a machine with one: the
# test suite (GPU tests included, tensors past 2^31 elements among them), compute-sanitizer's four
# tools over the CUDA tests, the conformance run and audit on CUDA, ATen parity, the consumer example
# on a caller's stream with caller memory, the Python package with PyTorch, and the benchmark beside
# PyTorch, the framework audit (PyTorch eager CPU and CUDA, torch.compile, JAX answering the same
# vectors; check and diff.py), and the benchmark beside PyTorch.
# STEPs (default: all): tests sanitizers conform audit parity consumer python parity16 frameworks sweep
# bench.
# Runs built binaries ($TAPEWISE_BIN, default build/bin; the consumer: $TAPEWISE_CONSUMER, default
# build-consumer/consumer); packs every report into OUTDIR/gpu_validate.tar.gz and prints a digest.
# Exit status: the number of steps that failed.
set -uo pipefail
out=${1:?usage: tools/gpu_validate.sh OUTDIR [STEP...]}
shift
steps=${*:-tests sanitizers conform audit parity consumer python parity16 frameworks sweep bench}
cd "$(dirname "$0")/.." || exit 1
bin=${TAPEWISE_BIN:-build/bin}
work=$(mktemp -d)
failed=0
wanted() { [[ " $steps " == *" $1 "* ]]; }
step() {  # step NAME COMMAND...: runs it, output to $work/NAME.txt, prints the tail
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  tail -n "${TAIL:-6}" "$work/$name.txt"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}

# compute-sanitizer TOOL over the CUDA tests and the compiled-piece tests (a small property budget: the
# tools slow kernels ~100x).
# CudaLimits is left to the plain run: tensors past 2^31 elements, and an allocation meant to fail,
# which memcheck would rightly report as an API error. So are the two tests that start processes and
# end them mid-compilation (they need no GPU and run in CI): under memcheck on an H100 (2026-12-07) the
# filter with them did not finish in 110 s, without them in 99.
sanitize() {
  RC_PARAMS="seed=5 max_success=10" compute-sanitizer --tool "$1" --error-exitcode 1 \
    "$bin/tapewise_tests" --gtest_brief=1 --gtest_filter='*cuda*:*Cuda*:CompiledPieces.*:-CudaLimits.*:CompiledPieces.AnExitWhileCompilingIsClean:CompiledPieces.AChildForkedWhileCompilingExitsAtOnce'
}
sanitizers() {  # one tool after another (their shadow memory does not fit four at once), then verdicts
  local tool rc=0
  for tool in memcheck racecheck initcheck synccheck; do
    sanitize "$tool" >"$work/sanitizer_$tool.txt" 2>&1 || rc=1
    echo "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$work/sanitizer_$tool.txt" | tail -n 1)," \
         "$(grep -E '^\[  (PASSED|FAILED)  \]' "$work/sanitizer_$tool.txt" | tr '\n' ' ')"
  done
  return "$rc"
}
python_checks() {  # the package ($TAPEWISE_WHEEL, else built here from source), its tests with PyTorch
  if [ -n "${TAPEWISE_WHEEL:-}" ]; then
    python3 -m pip install -q --no-deps --force-reinstall "$TAPEWISE_WHEEL"
  else
    python3 -m pip install -q --no-build-isolation --no-deps .
  fi &&
    TAPEWISE_CONFORM="$PWD/$bin/tapewise-conform" python3 -m pytest -q -p no:cacheprovider python/tests \
      proptest/test_c_api_ctypes.py &&
    python3 -P bench/bench_torch_maximum.py --out "$work/python_bench.json"  # -P: the installed package, not the checkout's python/
}
# The exhaustive accuracy sweeps (README "Exhaustive accuracy"): every float32 input of each unary
# node, 2^32 exponent-pair cases per binary float32 node, 2^32 random cases per float64 node; in
# bfloat16 and float16 every input of each unary node and every pair of each binary one.
sweeps() {
  local conform="$PWD/$bin/tapewise-conform" dir="$work/sweep" rc=0
  mkdir -p "$dir"
  # unary, binary and all: the nodes with a sweep reference; each report lists the others as not swept.
  "$conform" sweep --backend cuda --dtype float32 --ops unary --json "$dir/sweep_unary_f32.json" >"$dir/sweep_unary_f32.txt" 2>&1 || rc=1
  "$conform" sweep --backend cuda --dtype float32 --ops binary --json "$dir/sweep_binary_f32.json" >"$dir/sweep_binary_f32.txt" 2>&1 || rc=1
  "$conform" sweep --backend cuda --dtype float64 --ops all --json "$dir/sweep_f64.json" >"$dir/sweep_f64.txt" 2>&1 || rc=1
  "$conform" sweep --backend cuda --dtype bfloat16,float16 --ops all --json "$dir/sweep_16bit.json" >"$dir/sweep_16bit.txt" 2>&1 || rc=1
  tail -n 3 "$dir"/sweep_*.txt
  return "$rc"
}
# The framework audit (conform/frameworks/README.md): every framework answers the same vectors.
frameworks() {
  local conform="$PWD/$bin/tapewise-conform" fw="$work/frameworks" rc=0 name
  # All four dtypes: check grades every suite, diff.py classifies every special point's differences.
  "$conform" vectors "$fw/vectors" --cases "${FRAMEWORK_CASES:-2000}" --seed 20261201 >/dev/null || return 1
  python3 conform/frameworks/answer.py --framework jax --from "$fw/vectors" "$fw/jax" || rc=1
  python3 conform/frameworks/answer.py --framework torch --device cpu --from "$fw/vectors" "$fw/torch-cpu" || rc=1
  python3 conform/frameworks/answer.py --framework torch --device cuda --from "$fw/vectors" "$fw/torch-cuda" || rc=1
  timeout "${COMPILE_TIMEOUT:-300}" python3 conform/frameworks/answer.py --framework torch-compile --device cuda \
    --from "$fw/vectors" "$fw/compile-cuda" || rc=1
  for name in jax torch-cpu torch-cuda compile-cuda; do
    [ -d "$fw/$name" ] || continue
    "$conform" check "$fw/$name" --json "$fw/$name.check.json" >"$fw/$name.check.txt"
    echo "$name: $(tail -n 1 "$fw/$name.check.txt")"
  done
  python3 conform/frameworks/diff.py "$fw/vectors" "$fw"/jax "$fw"/torch-cpu "$fw"/torch-cuda "$fw"/compile-cuda \
    --json "$fw/diff.json" --markdown "$fw/diff.md" >"$fw/diff.txt" || rc=1
  tail -n 30 "$fw/diff.md"
  find "$fw" -path '*random*' -name '*.npy' -delete  # special suites stay (diff.py reruns); random ones are reproducible from the seed
  return "$rc"
}

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$work/gpu.txt"
wanted tests && step tests "$bin/tapewise_tests" --gtest_brief=1
wanted sanitizers && TAIL=8 step sanitizers sanitizers
wanted conform && step conform "$bin/tapewise-conform" run --backend cuda --json "$work/conform.json"
wanted audit && TAIL=2 step audit "$bin/tapewise-conform" audit --backend cuda --markdown "$work/audit.md"
if wanted parity; then
  TAIL=30 step aten_parity python3 conform/aten_parity.py --conform "$bin/tapewise-conform" --out "$work/parity"
  cp "$work/parity/aten_parity.json" "$work/" 2>/dev/null
  rm -rf "$work/parity"
fi
wanted consumer && TAIL=8 step consumer "${TAPEWISE_CONSUMER:-build-consumer/consumer}" --cuda
wanted python && TAIL=30 step python python_checks
# Every 16-bit input against ATen (README "Half precision"): needs the package the python step installs.
if wanted parity16; then
  TAIL=12 step aten_parity16 python3 -P conform/aten_parity16.py --out "$work/parity16"
  cp "$work/parity16/aten_parity16.json" "$work/" 2>/dev/null
  rm -rf "$work/parity16"
fi
wanted frameworks && TAIL=40 step frameworks frameworks
wanted sweep && TAIL=12 step sweep sweeps
wanted bench && TAIL=60 TAPEWISE_BENCH="$bin/tapewise-bench" step bench bash bench/run_bench.sh "$work/bench"
mkdir -p "$out"
tar -C "$work" -czf "$out/gpu_validate.tar.gz" .
echo "== gpu_validate: $failed step(s) failed; reports in $out/gpu_validate.tar.gz"
exit "$failed"
