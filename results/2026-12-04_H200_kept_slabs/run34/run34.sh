#!/usr/bin/env bash
# Run 34: compute-sanitizer racecheck over the same tests as run 32 (whose 140 s limit it passed), with
# the whole call's time; full gtest output, so that a limit shows how far it got.
set -u
start=$SECONDS
W=/tmp/run34; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run34.tar.xz run34; }
[ -x build/bin/tapewise_tests ] || bash build-gpu-pack/setup.sh
RC_PARAMS="seed=5 max_success=10" timeout 570 compute-sanitizer --tool racecheck --error-exitcode 1 \
  build/bin/tapewise_tests --gtest_filter='*cuda*:*Cuda*:CompiledPieces.*:-CudaLimits.*' > $W/sanitizer_racecheck.txt 2>&1
echo "racecheck exit $? after $((SECONDS - start)) s: $(grep -E 'RACECHECK SUMMARY' $W/sanitizer_racecheck.txt | tail -n 1)" \
     "$(grep -E '^\[  (PASSED|FAILED)  \]' $W/sanitizer_racecheck.txt | tr '\n' ' ')"
grep -c '^\[       OK \]' $W/sanitizer_racecheck.txt; grep '^\[ RUN' $W/sanitizer_racecheck.txt | tail -1; save
