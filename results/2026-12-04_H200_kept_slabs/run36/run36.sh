#!/usr/bin/env bash
# Run 36: the unary chain at 2^12 and 2^16 in five more tapewise-bench calls, for the spread of the host
# columns between calls (run 31's two calls gave 0.313 and 0.461 us per node at 2^12).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run36; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run36.tar.xz run36; }
[ -x build/bin/tapewise-bench ] || bash build-gpu-pack/setup.sh
for k in 1 2 3 4 5; do
  timeout 40 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16 --chain-shapes unary --commit $commit \
    --json $W/bench_unary_$k.json > $W/bench_unary_$k.txt 2>&1; echo "call $k exit $? after $((SECONDS - start)) s"
  grep -E "^  2\^" $W/bench_unary_$k.txt; save
done
