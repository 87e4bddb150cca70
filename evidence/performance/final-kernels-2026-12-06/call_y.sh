#!/usr/bin/env bash
# GPU call Y (2026-12-06, fifteenth session): memcheck over the compiled pieces' tests, in the device time left.
set -u
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu bin/tapewise_tests; B=.gpu/bin; R=$OUT/r; mkdir -p $R
s=$SECONDS; RC_PARAMS="seed=5 max_success=5" timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='CompiledPieces.*' > $R/t.txt 2>&1
echo "== memcheck: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
tail -c 20000 $R/t.txt > $R/sanitizer_memcheck.txt; rm -f $R/t.txt
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
