#!/usr/bin/env bash
# GPU call X (2026-12-06, fifteenth session): the CLI-driven tests with the runner where the suite looks for it (its build path), then racecheck over the compiled pieces.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
mkdir -p build/bin && cp $B/tapewise-conform $B/tapewise-cross-check build/bin/  # where the suite was built to find them
s=$SECONDS; timeout 150 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Cli.*:ConformTool.*:GraphCommand.*:SweepTool.*:-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests_cli.txt 2>&1
echo "== cli tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|tests from .* ran' $R/tests_cli.txt | head -12
left=$((300 - (SECONDS - T0))); lim=$(( left > 20 ? left : 20 ))
s=$SECONDS; RC_PARAMS="seed=5 max_success=5" timeout $lim compute-sanitizer --tool racecheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='CompiledPieces.*' > $R/t.txt 2>&1
echo "== racecheck: exit $? after $((SECONDS-s)) s (limit $lim): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]|^\[ RUN|^\[       OK' $R/t.txt | tail -4 | tr '\n' ' ')"
tail -c 20000 $R/t.txt > $R/sanitizer_racecheck.txt; rm -f $R/t.txt; echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
