#!/usr/bin/env bash
# GPU call V (2026-12-06, fifteenth session): the final kernels (HEAD 24b86da) validated: the whole suite,
# the conformance run in both math modes, the audit, ATen parity; memcheck, initcheck, synccheck and racecheck over the
# compiled pieces' tests; exact mode's speed at 2^26 beside aten mode's (issue 44).
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
s=$SECONDS; timeout 170 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure|tests from .* ran' $R/tests.txt | head -8
for mode in aten exact; do
  s=$SECONDS; timeout 60 $B/tapewise-conform run --backend cuda --math $mode --json $R/conform_$mode.json > $R/conform_$mode.txt 2>&1
  echo "== conform $mode: exit $? after $((SECONDS-s)) s: $(tail -n 1 $R/conform_$mode.txt)"
done
s=$SECONDS; timeout 30 $B/tapewise-conform audit --backend cuda --markdown $R/audit.md > $R/audit.txt 2>&1; echo "== audit: exit $? $(head -n 1 $R/audit.txt)"
s=$SECONDS; timeout 70 python3 conform/aten_parity.py --conform $B/tapewise-conform --out $R/parity > $R/aten_parity.txt 2>&1
echo "== parity: exit $? after $((SECONDS-s)) s: $(grep -E 'graded rows' $R/aten_parity.txt)"; cp $R/parity/aten_parity.json $R/ 2>/dev/null; rm -rf $R/parity
for mode in aten exact; do
  s=$SECONDS; timeout 35 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32,f64 --ops exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog --reps 20 --no-staged --math $mode --json $R/bench_$mode.json > $R/bench_$mode.txt 2>&1
  echo "== bench $mode: exit $? after $((SECONDS-s)) s"
done
grep -E "^(exp|log|sin|cos|tanh|copy) " $R/bench_exact.txt | head -20
for run in "memcheck CompiledPieces.*:Backends/Programs.*cuda 100" "initcheck CompiledPieces.* 50" "synccheck CompiledPieces.* 50" "racecheck CompiledPieces.* 70"; do
  set -- $run; tool=$1; f=$2; want=$3
  left=$((360 - (SECONDS - T0))); [ "$left" -lt 30 ] && { echo "== $tool: not reached"; continue; }
  lim=$(( left > want ? want : left ))
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout $lim compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f: exit $? after $((SECONDS-s)) s (limit $lim): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 30000 $R/t.txt > $R/sanitizer_$tool.txt
done
rm -f $R/t.txt
for job in "f32 small 12,16,18,20 1000" "bf16 small 12,16,18,20 1000" "f32 large 22,24,26 100" "bf16 large 22,24,26 100"; do
  set -- $job; left=$((545 - (SECONDS - T0))); [ "$left" -lt 30 ] && { echo "== chains $1 $2: not reached"; continue; }
  s=$SECONDS; timeout $((left - 10)) $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes $3 --chain-nodes $4 --chain-shapes unary,binary,fanout --chain-dtype $1 --json $R/chains_$1_$2.json > $R/chains_$1_$2.txt 2>&1
  echo "== chains $1 $2: exit $? after $((SECONDS-s)) s"; grep -E "^  2\\^" $R/chains_$1_$2.txt | cut -c1-150
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
