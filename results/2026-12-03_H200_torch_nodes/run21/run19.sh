#!/usr/bin/env bash
# Run 19: the new test fixed; memcheck over the compiled pieces, the long programs and the tape-error
# tests (compiled pieces on, the default); synccheck over the compiled pieces and the long programs; the unary chain again.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run19; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run19.tar.xz run19; }
timeout 30 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter='*TapeErrors*:ShapeDims.*' > $W/tests_tape_errors.txt 2>&1; echo "tape errors exit $?"; tail -2 $W/tests_tape_errors.txt
long='Backends/Programs.ChainOfAThousandNodes/cuda:Backends/Programs.LargePiecesWithLanesGiveThePerNodeBits/cuda:Backends/Programs.InterleavedDtypesRunAsPiecesWithThePerNodeBits/cuda'
RC_PARAMS="seed=5 max_success=10" timeout 80 compute-sanitizer --tool memcheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 \
  --gtest_filter="$long:CompiledPieces.*:Backends/TapeErrors.*/cuda" > $W/sanitizer_memcheck.txt 2>&1
echo "memcheck exit $? after $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY' $W/sanitizer_memcheck.txt | tail -1) $(grep -E 'compiled pieces:|^\[  (PASSED|FAILED)' $W/sanitizer_memcheck.txt | tr '\n' ' ')"; save
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 --gtest_filter="$long:CompiledPieces.*" > $W/sanitizer_synccheck.txt 2>&1
echo "synccheck exit $? after $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY' $W/sanitizer_synccheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $W/sanitizer_synccheck.txt | tr '\n' ' ')"; save
timeout 45 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --chain-shapes unary --json $W/bench_unary_again.json > $W/bench_unary_again.txt 2>&1
grep -E "^  2\^|host .* a compiled launch" $W/bench_unary_again.txt; save
TAPEWISE_COMPILED_PIECES=1 timeout 60 build-gpu-pack/cuda_chain 18 1000 $W/samples_18.txt > $W/cuda_chain_18.txt 2>&1; tail -1 $W/cuda_chain_18.txt; save
echo "total $((SECONDS - start)) s"
