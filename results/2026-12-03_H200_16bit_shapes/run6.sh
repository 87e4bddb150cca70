#!/usr/bin/env bash
# Run 6: 16-bit launch shapes and conversion forms side by side at 2^26, with PyTorch eager in the
# same run: head (72aac42), v1 (the straight path generalised, one vector a thread: should equal head),
# v2 (two vectors a thread), single (head with cvt.rn.bf16.f32 in place of the packing form).
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/ab; mkdir -p $W
cp build/bin/tapewise-bench $W/tapewise-bench-head
for v in v1 v2 single; do xz -dc build-gpu-pack/tapewise-bench-$v.xz > $W/tapewise-bench-$v; chmod +x $W/tapewise-bench-$v; done
cp build/bin/tapewise-conform $W/
python3 tools/bench/bench_torch.py --sizes 26 --dtypes bf16,f16 --chain-sizes '' --no-compile --no-kernels \
  --conform build/bin/tapewise-conform --json $W/torch.json > $W/torch.txt 2>&1; echo "torch exit $? after $((SECONDS - start)) s"
for round in 1 2; do
  for v in head v1 v2 single; do
    $W/tapewise-bench-$v --sizes 26 --dtypes bf16,f16 --no-chain --no-staged --torch $W/torch.json \
      --json $W/ab_${v}_$round.json > $W/ab_${v}_$round.txt 2>&1; echo "$v round $round exit $? after $((SECONDS - start)) s"
  done
done
for v in head v1 v2 single; do
  cuobjdump -sass $W/tapewise-bench-$v > /tmp/all.sass && python3 build-exp/sin_sass.py /tmp/all.sass $W/sin_$v
  for dt in bf16 f16; do echo "$v sin $dt: $(python3 build-exp/fastpath.py $W/sin_${v}_$dt.sass)"; done
done 2>&1 | cut -c1-200 | tee $W/sass_counts.txt
rm -f $W/tapewise-bench-* $W/tapewise-conform
tar -C /tmp -cJf $OUT/ab.tar.xz ab
echo "total $((SECONDS - start)) s"
