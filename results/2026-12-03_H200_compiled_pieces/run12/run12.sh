#!/usr/bin/env bash
# Run 12: compiled pieces compiled in the background and launched through the driver. The compiled-piece
# tests; the chain's three shapes at 2^12-2^20 with the interpreter only and with compiled pieces (steps
# read from the kernel parameter, or copied to shared memory first), side by side; every test.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run12; mkdir -p $W
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
  grep -E "^ *(unary|binary|fanout):|^ *2\^|tape programs" $W/chain_$config.txt | cut -c1-60
  grep -E "tape programs" $W/chain_$config.txt | cut -c1-300
done
unset TAPEWISE_COMPILED_PIECES TAPEWISE_PIECE_STEPS
timeout 200 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $?"; tail -4 $W/tests.txt
tar -C /tmp -cJf $OUT/run12.tar.xz run12
echo "total $((SECONDS - start)) s"
