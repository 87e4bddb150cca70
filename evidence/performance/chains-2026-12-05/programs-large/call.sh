#!/usr/bin/env bash
# GPU call T (2026-12-05, fifth session): the 100-node chains at 2^22-2^26 as tape programs (--program-threshold 2^26)
# against the default (node by node past 2^20), float32 and bfloat16, three shapes: does one launch for many nodes
# move fewer bytes than torch.compile's fusion?
set -u
tar xJf .gpu/bench.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
for dt in f32 bf16; do
  s=$SECONDS; timeout 110 $B/tapewise-bench --no-kernels --chain-calls 3 --program-threshold 67108864 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes unary,fanout,binary --chain-dtype $dt --json $R/programs_$dt.json > $R/programs_$dt.txt 2>&1
  echo "== programs $dt: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|spread|^  (unary|binary|fanout)|tape programs" $R/programs_$dt.txt | cut -c1-150
done
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
