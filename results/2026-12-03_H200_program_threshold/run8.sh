#!/usr/bin/env bash
# Run 8: where per-node kernels overtake tape programs. The float32 chain in its three shapes at
# 2^18-2^20 with the program threshold at 2^17, 2^18, 2^19 and 2^20 (the library's), two rounds in turn.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run8; mkdir -p $W
for round in 1 2; do
  for t in 17 18 19 20; do
    build/bin/tapewise-bench --no-kernels --chain-sizes 18,19,20 --program-threshold $((1 << t)) \
      --json $W/chain_t${t}_$round.json > $W/chain_t${t}_$round.txt 2>&1
    echo "threshold 2^$t round $round exit $? after $((SECONDS - start)) s"
    grep -E "^ *(unary|binary|fanout):|^ *2\^" $W/chain_t${t}_$round.txt | cut -c1-75
  done
done
tar -C /tmp -cJf $OUT/run8.tar.xz run8
echo "total $((SECONDS - start)) s"
