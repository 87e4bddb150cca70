#!/usr/bin/env bash
# Run 14: the final validation of compiled pieces. Every test (compiled pieces on, the default); the
# program tests with the interpreter only; compute-sanitizer's memcheck and initcheck over the
# compiled-piece test and the long-program tests, racecheck and synccheck over the long-program tests.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run14; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
timeout 150 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $? after $((SECONDS - start)) s"; tail -3 $W/tests.txt
grep -E "compiled pieces:" $W/tests.txt
TAPEWISE_COMPILED_PIECES=0 timeout 100 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter='*Programs*:*Dag*:*Graph*:CompiledPieces.*' > $W/tests_interpreter.txt 2>&1
echo "interpreter-only tests exit $? after $((SECONDS - start)) s"; tail -3 $W/tests_interpreter.txt
long='Backends/Programs.ChainOfAThousandNodes/cuda:Backends/Programs.LargePiecesWithLanesGiveThePerNodeBits/cuda:Backends/Programs.InterleavedDtypesRunAsPiecesWithThePerNodeBits/cuda'
for tool in memcheck initcheck racecheck synccheck; do
  filter=$long; [ $tool = memcheck -o $tool = initcheck ] && filter="$long:CompiledPieces.RepeatedRandomBlocksGiveThePerNodeBits"
  timeout 170 compute-sanitizer --tool $tool --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter="$filter" > $W/sanitizer_$tool.txt 2>&1
  echo "$tool exit $? after $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/sanitizer_$tool.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $W/sanitizer_$tool.txt | tr '\n' ' ')"
done
tar -C /tmp -cJf $OUT/run14.tar.xz run14
echo "total $((SECONDS - start)) s"
