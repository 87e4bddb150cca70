#!/usr/bin/env bash
# GPU call K (2026-12-05, fifth session): torch.compile of the 100-node chains at 2^22-2^26 (float32, then bfloat16
# unary in the time left), each beside tapewise-bench in the same call.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
tar xJf .gpu/bench.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
for job in "f32 unary" "f32 fanout" "f32 binary" "bf16 unary" "bf16 fanout"; do
  set -- $job; dt=$1; shape=$2; left=$((540 - (SECONDS - T0)))
  [ "$left" -lt 60 ] && break
  s=$SECONDS; timeout $((left-30)) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --json $R/compile_${dt}_$shape.torch.json > $R/compile_${dt}_$shape.torch.txt 2>&1
  echo "== compile $dt $shape: exit $? after $((SECONDS-s)) s"
  timeout 60 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --torch $R/compile_${dt}_$shape.torch.json --json $R/compile_${dt}_$shape.json > $R/compile_${dt}_$shape.txt 2>&1
  grep -E "^  2\^|spread" $R/compile_${dt}_$shape.txt | cut -c1-150
done
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
