#!/usr/bin/env bash
# GPU call S1 (twentieth session), the first of two on d701051 (backward programs compute single-use values
# again; a forked child's cache): memcheck over the compiled pieces and the programs (the exit fix of 4d2c328,
# never run under compute-sanitizer), the whole suite, conform in both math modes; then the unary chain (100 nodes at
# 2^22-2^26, 1,000 at 2^12-2^20) storing (--recompute-from 2^62, the code before) and computing again
# (--recompute-from 0), same binary, same call, with torch.compile of the float32 100-node chain (the row that tied).
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; LIMIT=${LIMIT:-580}
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
mkdir -p build/bin && cp $B/tapewise-conform build/bin/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
echo "unpacked after $((SECONDS-T0)) s"
F='CompiledPieces.*:Backends/Programs.*cuda*'
s=$SECONDS; RC_PARAMS="seed=5 max_success=5" timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$F" > $R/t.txt 2>&1
echo "== memcheck $F: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' $R/t.txt | tr '\n' ' ')"
grep -E "Error: process|didn't terminate|Target application" $R/t.txt | head -3
tail -c 30000 $R/t.txt > $R/sanitizer_memcheck.txt; rm -f $R/t.txt
s=$SECONDS; timeout 200 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure|tests from .* ran' $R/tests.txt | head -8
grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|tests from .* ran|FAILED' $R/tests.txt > $R/tests_summary.txt; tail -c 20000 $R/tests.txt > $R/tests_tail.txt; rm $R/tests.txt
for mode in aten exact; do
  s=$SECONDS; timeout 60 $B/tapewise-conform run --backend cuda --math $mode --json $R/conform_$mode.json > $R/conform_$mode.txt 2>&1
  echo "== conform $mode: exit $? after $((SECONDS-s)) s: $(tail -n 1 $R/conform_$mode.txt)"
done
NEVER=4611686018427387904
left=$((LIMIT - (SECONDS - T0)))
s=$SECONDS; timeout $(( left > 300 ? 130 : 10 )) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes unary --chain-dtype f32 --json $R/torch_f32_unary_compile.json > $R/torch_f32_unary_compile.txt 2>&1
echo "== torch.compile f32 unary 2^22-2^26: exit $? after $((SECONDS-s)) s"; grep "^chain" $R/torch_f32_unary_compile.txt
run() {  # run NAME TIMEOUT ARGS...: one tapewise-bench chain run
  local name=$1 lim=$2; shift 2
  local left=$((LIMIT - (SECONDS - T0))); [ "$left" -lt 25 ] && { echo "== $name: not reached"; return; }
  [ "$lim" -gt "$left" ] && lim=$left
  local s=$SECONDS; timeout $lim $B/tapewise-bench --no-kernels --chain-calls 5 "$@" --json $R/$name.json > $R/$name.txt 2>&1
  echo "== $name: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|^  (unary|binary|fanout):|spread" $R/$name.txt | cut -c1-150
}
T=""; [ -s $R/torch_f32_unary_compile.json ] && T="--torch $R/torch_f32_unary_compile.json"
# The unary chain is the shape whose backward computes values again (binary and fan-out nodes' values have
# two inputs or several readers): each size and dtype both ways, storing first.
for mode in store recompute; do
  rf=$NEVER; [ $mode = recompute ] && rf=0
  run large_f32_$mode 60 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes unary --chain-dtype f32 --recompute-from $rf $T
done
for mode in store recompute; do
  rf=$NEVER; [ $mode = recompute ] && rf=0
  run large_bf16_$mode 60 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes unary --chain-dtype bf16 --recompute-from $rf
done
for dt in f32 bf16; do
  for mode in store recompute; do
    rf=$NEVER; [ $mode = recompute ] && rf=0
    run small_${dt}_$mode 50 --chain-sizes 12,16,18,20 --chain-nodes 1000 --chain-shapes unary --chain-dtype $dt --recompute-from $rf
  done
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
