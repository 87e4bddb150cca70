#!/usr/bin/env bash
# Run 15: compiled pieces after e90f797 (worker runs NVRTC only, bounded exit). Every test with compiled
# pieces on; memcheck and initcheck over the compiled-piece test and the long-program tests; racecheck
# over the compiled-piece test with steps in shared memory. Each step's time says whether it exits.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run15; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run15.tar.xz run15; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
TAPEWISE_COMPILED_PIECES=1 timeout 120 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $? after $((SECONDS - start)) s"; tail -3 $W/tests.txt
grep -E "compiled pieces:" $W/tests.txt | head -3; save
long='Backends/Programs.ChainOfAThousandNodes/cuda:Backends/Programs.LargePiecesWithLanesGiveThePerNodeBits/cuda:Backends/Programs.InterleavedDtypesRunAsPiecesWithThePerNodeBits/cuda'
for tool in memcheck initcheck; do
  t0=$SECONDS
  TAPEWISE_COMPILED_PIECES=1 timeout 160 compute-sanitizer --tool $tool --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter="$long:CompiledPieces.*" > $W/sanitizer_$tool.txt 2>&1
  echo "$tool exit $? in $((SECONDS - t0)) s: $(grep -E 'ERROR SUMMARY' $W/sanitizer_$tool.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $W/sanitizer_$tool.txt | tr '\n' ' ')"; save
done
t0=$SECONDS
TAPEWISE_COMPILED_PIECES=1 TAPEWISE_PIECE_STEPS=shared timeout 110 compute-sanitizer --tool racecheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter="CompiledPieces.*:Backends/Programs.ChainOfAThousandNodes/cuda" > $W/sanitizer_racecheck.txt 2>&1
echo "racecheck exit $? in $((SECONDS - t0)) s: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/sanitizer_racecheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $W/sanitizer_racecheck.txt | tr '\n' ' ')"; save
echo "total $((SECONDS - start)) s"
