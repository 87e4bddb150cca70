#!/usr/bin/env bash
# GPU call A (2026-12-07, sixteenth session): the final kernels (HEAD 640f3f7) validated: the whole suite (the
# runner at its build path), conform in both math modes, the audit, ATen parity, the per-node bench at 2^26
# in both math modes (issue 44's shares); with the cp312 wheel's files carried (.gpu/site), every 16-bit input against ATen
# (conform/aten_parity16.py); then compute-sanitizer's four tools in the time left.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; LIMIT=${LIMIT:-570}
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
mkdir -p build/bin && cp $B/tapewise-conform $B/tapewise-cross-check build/bin/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
echo "unpacked after $((SECONDS-T0)) s"
s=$SECONDS; timeout 230 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure|tests from .* ran' $R/tests.txt | head -8
for mode in aten exact; do
  s=$SECONDS; timeout 60 $B/tapewise-conform run --backend cuda --math $mode --json $R/conform_$mode.json > $R/conform_$mode.txt 2>&1
  echo "== conform $mode: exit $? after $((SECONDS-s)) s: $(tail -n 1 $R/conform_$mode.txt)"
done
s=$SECONDS; timeout 30 $B/tapewise-conform audit --backend cuda --markdown $R/audit.md > $R/audit.txt 2>&1; echo "== audit: exit $? $(head -n 1 $R/audit.txt)"
s=$SECONDS; timeout 70 python3 conform/aten_parity.py --conform $B/tapewise-conform --out $R/parity > $R/aten_parity.txt 2>&1
echo "== parity: exit $? after $((SECONDS-s)) s: $(grep -E 'graded rows' $R/aten_parity.txt)"; cp $R/parity/aten_parity.json $R/ 2>/dev/null; rm -rf $R/parity
if [ -d .gpu/site/tapewise ]; then
  export PYTHONPATH=$PWD/.gpu/site
  s=$SECONDS; timeout ${P16:-200} python3 -P conform/aten_parity16.py --out $R/parity16 > $R/aten_parity16.txt 2>&1
  echo "== parity16: exit $? after $((SECONDS-s)) s"; tail -n 2 $R/aten_parity16.txt; cp $R/parity16/aten_parity16.json $R/ 2>/dev/null; rm -rf $R/parity16
fi
for mode in aten exact; do
  s=$SECONDS; timeout 40 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32,f64 --ops exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog --reps 20 --no-staged --math $mode --json $R/bench_$mode.json > $R/bench_$mode.txt 2>&1
  echo "== bench $mode: exit $? after $((SECONDS-s)) s"
done
grep -E "^(exp|log|sin|cos|tanh|copy) " $R/bench_exact.txt | head -20
for run in "memcheck CompiledPieces.*:Backends/Programs.*cuda* 110" "initcheck CompiledPieces.* 60" "synccheck CompiledPieces.* 60" "racecheck CompiledPieces.* 90"; do
  set -- $run; tool=$1; f=$2; want=$3
  left=$((LIMIT - (SECONDS - T0))); [ "$left" -lt 30 ] && { echo "== $tool: not reached"; continue; }
  lim=$(( left > want ? want : left ))
  s=$SECONDS; RC_PARAMS="seed=5 max_success=5" timeout $lim compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f: exit $? after $((SECONDS-s)) s (limit $lim): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 30000 $R/t.txt > $R/sanitizer_$tool.txt
done
rm -f $R/t.txt
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
