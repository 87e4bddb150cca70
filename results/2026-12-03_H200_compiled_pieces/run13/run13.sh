#!/usr/bin/env bash
# Run 13: where the host time of a compiled launch goes. The unary and fanout chains at 2^12 and 2^16,
# interpreter only against compiled pieces, with the compiled launches' host time printed.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run13; mkdir -p $W
which perf nsys 2>&1 | head -2
for config in off on; do
  export TAPEWISE_COMPILED_PIECES=$([ $config = on ] && echo 1 || echo 0)
  timeout 150 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16 --chain-shapes unary,fanout --json $W/chain_$config.json > $W/chain_$config.txt 2>&1
  echo "chain $config exit $? after $((SECONDS - start)) s"
  grep -E "^ *2\^" $W/chain_$config.txt | cut -c1-60; grep -E "tape programs" $W/chain_$config.txt | cut -c1-400
done
tar -C /tmp -cJf $OUT/run13.tar.xz run13
