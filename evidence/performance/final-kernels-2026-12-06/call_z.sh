#!/usr/bin/env bash
# GPU call Z (2026-12-06, fifteenth session): the float32 chains at 2^22-2^26 (100 nodes), then memcheck over the programs' CUDA tests, in the device time left.
set -u
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu bin/tapewise_tests bin/tapewise-bench; B=.gpu/bin; R=$OUT/r; mkdir -p $R
s=$SECONDS; timeout 80 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes unary,binary,fanout --chain-dtype f32 --json $R/chains_f32_large.json > $R/chains_f32_large.txt 2>&1
echo "== chains f32 large: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|^  (unary|binary|fanout):" $R/chains_f32_large.txt | cut -c1-150
s=$SECONDS; RC_PARAMS="seed=5 max_success=5" timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Backends/Programs.*cuda*' > $R/t.txt 2>&1
echo "== memcheck programs: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
tail -c 20000 $R/t.txt > $R/sanitizer_memcheck_programs.txt; rm -f $R/t.txt
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
