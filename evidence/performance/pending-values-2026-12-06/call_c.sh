#!/usr/bin/env bash
# GPU call C (2026-12-06, twelfth session), the same warm machine: the float32 binary chain at 2^22 and
# 2^24 (at 2^26 its 101 leaves, 100 values and 101 returned gradients of 256 MiB need 81 GB, more than
# the H100's 80), new (2ba2150) beside base (c16d2cb) and PyTorch in the same call. As it ran.
T0=$SECONDS; B=.gpu/bin; R=$OUT/r; mkdir -p $R
[ -x $B/tapewise-bench-new ] || { rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; }
s=$SECONDS; timeout 90 python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24 --chain-nodes 100 --chain-shapes binary --chain-dtype f32 --json $R/torch_f32_binary.json > $R/torch_f32_binary.txt 2>&1
echo "== torch f32 binary: exit $? after $((SECONDS-s)) s"; grep -E '^chain' $R/torch_f32_binary.txt
for bin in base new; do
  s=$SECONDS; timeout 60 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24 --chain-nodes 100 --chain-shapes binary --chain-dtype f32 --torch $R/torch_f32_binary.json --json $R/bench_${bin}_f32_binary.json > $R/bench_${bin}_f32_binary.txt 2>&1
  echo "== $bin f32 binary: exit $? after $((SECONDS-s)) s"; grep -E '^  2\^' $R/bench_${bin}_f32_binary.txt
done
echo total $((SECONDS-T0)); tar czf $OUT/results.tar.gz -C $OUT r; rm -rf $R
