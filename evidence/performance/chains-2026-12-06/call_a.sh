#!/usr/bin/env bash
# GPU call A (2026-12-06, eleventh session): the register history (kHistory = 3 steps) and the register pass.
# The whole test suite, memcheck and initcheck over the programs' and compiled pieces' tests, the 1,000-node
# chains at 2^12-2^20 (unary, fanout; f32) with the new binary and ee97800's, alternated, and ncu's DRAM
# bytes of the fan-out's compiled pieces at 2^24, new and old.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 230 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-CudaLimits.*' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|tests ran|Failure' $R/tests.txt | head -12
for tool in memcheck initcheck; do
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 \
    --gtest_filter='Backends/Programs.*cuda:CompiledPieces.*:StepSources.*' > $R/$tool.txt 2>&1
  echo "== $tool: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/$tool.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/$tool.txt | tr '\n' ' ')"
  tail -c 300000 $R/$tool.txt > $R/t.tmp && mv $R/t.tmp $R/$tool.txt
done
for round in 1 2; do for bin in base new; do
  s=$SECONDS; timeout 60 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,fanout --chain-dtype f32 --json $R/small_${bin}_$round.json > $R/small_${bin}_$round.txt 2>&1
  echo "== small $bin round $round: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|^  (unary|fanout):" $R/small_${bin}_$round.txt | cut -c1-70
done; done
for bin in base new; do
  s=$SECONDS; timeout 60 ncu --kernel-name regex:tapewise_compiled_piece --launch-skip 4 --launch-count 4 --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
    $B/tapewise-bench-$bin --no-kernels --chain-sizes 24 --chain-nodes 96 --chain-shapes fanout --chain-dtype f32 > $R/ncu_fanout_$bin.csv 2> $R/ncu_fanout_$bin.err
  echo "== ncu fanout $bin: exit $? after $((SECONDS-s)) s"; grep -E "dram__bytes|gpu__time" $R/ncu_fanout_$bin.csv | cut -d, -f5,12- | head -12
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
