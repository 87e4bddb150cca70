#!/usr/bin/env bash
# Run 10: compiled pieces, first light. The compiled-piece tests, the chain in its three shapes with
# the interpreter only, compiled pieces reading steps from the parameter and from shared memory
# (side by side in one call), then every test with compiled pieces on.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run10; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
ldconfig -p | grep -i nvrtc | head -3
build/bin/tapewise_tests --gtest_filter='CompiledPieces.*:Programs/*cuda*' > $W/compiled_tests.txt 2>&1
echo "compiled tests exit $? after $((SECONDS - start)) s"; grep -E "compiled pieces:|FAILED|PASSED|Failure" -A2 $W/compiled_tests.txt | head -20
for config in off parameter shared; do
  case $config in
    off) export TAPEWISE_COMPILED_PIECES=0 ;;
    parameter) export TAPEWISE_COMPILED_PIECES=1 TAPEWISE_PIECE_STEPS=parameter ;;
    shared) export TAPEWISE_COMPILED_PIECES=1 TAPEWISE_PIECE_STEPS=shared ;;
  esac
  timeout 200 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --json $W/chain_$config.json > $W/chain_$config.txt 2>&1
  echo "chain $config exit $? after $((SECONDS - start)) s"
  grep -E "^ *(unary|binary|fanout):|^ *2\^" $W/chain_$config.txt | cut -c1-60
done
unset TAPEWISE_COMPILED_PIECES TAPEWISE_PIECE_STEPS
timeout 150 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $?"; tail -4 $W/tests.txt
tar -C /tmp -cJf $OUT/run10.tar.xz run10
echo "total $((SECONDS - start)) s"
