#!/usr/bin/env bash
# Run 11: why run 10's chain did not run compiled: the unary chain at 2^12 and 2^20 with the compiled
# pieces' counts printed, and the compiled-piece test.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run11; mkdir -p $W
timeout 120 build/bin/tapewise-bench --no-kernels --chain-sizes 12,20 --chain-shapes unary --json $W/chain.json > $W/chain.txt 2>&1
echo "chain exit $? after $((SECONDS - start)) s"; grep -E "^ *2\^|tape programs" $W/chain.txt | cut -c1-400
TAPEWISE_COMPILED_PIECES=0 timeout 120 build/bin/tapewise-bench --no-kernels --chain-sizes 12,20 --chain-shapes unary --json $W/chain_off.json > $W/chain_off.txt 2>&1
echo "chain off exit $? after $((SECONDS - start)) s"; grep -E "^ *2\^|tape programs" $W/chain_off.txt | cut -c1-400
tar -C /tmp -cJf $OUT/run11.tar.xz run11
