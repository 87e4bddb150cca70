#!/usr/bin/env bash
# GPU call W (2026-12-06, fifteenth session): the whole suite with room to finish, then initcheck, synccheck and racecheck over the compiled pieces.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu bin/tapewise_tests; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 270 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure|tests from .* ran' $R/tests.txt | head -8; tail -3 $R/tests.txt
for tool in initcheck synccheck racecheck; do
  left=$((430 - (SECONDS - T0))); [ "$left" -lt 20 ] && { echo "== $tool: not reached"; continue; }
  lim=$(( left > 60 ? 60 : left ))
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout $lim compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='CompiledPieces.*' > $R/t.txt 2>&1
  echo "== $tool: exit $? after $((SECONDS-s)) s (limit $lim): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 20000 $R/t.txt > $R/sanitizer_$tool.txt
done
rm -f $R/t.txt; echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
