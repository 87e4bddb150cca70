#!/usr/bin/env bash
# Run 32: compute-sanitizer's four tools over the CUDA tests and the compiled pieces (as
# tools/gpu_validate.sh's sanitizers step, each tool under its own time limit), on the final code.
set -u
start=$SECONDS
W=/tmp/run32; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run32.tar.xz run32; }
[ -x build/bin/tapewise_tests ] || bash build-gpu-pack/setup.sh
for tool in memcheck racecheck initcheck synccheck; do
  left=$((575 - (SECONDS - start)))
  RC_PARAMS="seed=5 max_success=10" timeout $(( left < 140 ? left : 140 )) compute-sanitizer --tool $tool --error-exitcode 1 \
    build/bin/tapewise_tests --gtest_brief=1 --gtest_filter='*cuda*:*Cuda*:CompiledPieces.*:-CudaLimits.*' > $W/sanitizer_$tool.txt 2>&1
  echo "$tool exit $? after $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/sanitizer_$tool.txt | tail -n 1)" \
       "$(grep -E '^\[  (PASSED|FAILED)  \]' $W/sanitizer_$tool.txt | tr '\n' ' ')"; save
done
echo "total $((SECONDS - start)) s"
