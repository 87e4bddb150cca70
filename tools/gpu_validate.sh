#!/usr/bin/env bash
# tools/gpu_validate.sh OUTDIR — everything that needs the GPU, in one go, on a machine with one: the
# whole test suite (GPU tests included), the conformance run and audit on the CUDA backend, ATen parity
# and the benchmark beside PyTorch. Runs built binaries ($TAPEWISE_BIN, default build/bin); packs every
# report into OUTDIR/gpu_validate.tar.gz and prints a digest. Exit status: the number of steps that failed.
set -uo pipefail
out=${1:?usage: tools/gpu_validate.sh OUTDIR}
cd "$(dirname "$0")/.." || exit 1
bin=${TAPEWISE_BIN:-build/bin}
work=$(mktemp -d)
failed=0
step() {  # step NAME COMMAND...: runs it, output to $work/NAME.txt, prints the tail
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  tail -n "${TAIL:-6}" "$work/$name.txt"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$work/gpu.txt"
step tests "$bin/tapewise_tests" --gtest_brief=1
step conform "$bin/tapewise-conform" run --backend cuda --json "$work/conform.json"
TAIL=2 step audit "$bin/tapewise-conform" audit --backend cuda --markdown "$work/audit.md"
TAIL=30 step aten_parity python3 tools/aten_parity.py --conform "$bin/tapewise-conform" --out "$work/parity"
cp "$work/parity/aten_parity.json" "$work/" 2>/dev/null
rm -rf "$work/parity"
TAIL=60 TAPEWISE_BENCH="$bin/tapewise-bench" step bench bash tools/run_bench.sh "$work/bench"
mkdir -p "$out"
tar -C "$work" -czf "$out/gpu_validate.tar.gz" .
echo "== gpu_validate: $failed step(s) failed; reports in $out/gpu_validate.tar.gz"
exit "$failed"
