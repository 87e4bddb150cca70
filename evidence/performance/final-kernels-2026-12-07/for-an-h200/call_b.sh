#!/usr/bin/env bash
# GPU call B (2026-12-07, sixteenth session): issue 46's chain table on the final kernels (HEAD 640f3f7):
# PyTorch eager and CUDA graphs (bench/bench_torch.py --no-compile), then tapewise-bench (--chain-calls 5: the
# median of five timed blocks and their spread) of the same chains in the same call, float32 and bfloat16,
# three shapes, 1,000 nodes at 2^12-2^20 and 100 at 2^22-2^26; then torch.compile of the 100-node chains at
# 2^22-2^26 (one compiled function for the three sizes), each beside tapewise-bench again, in the time left.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; LIMIT=${LIMIT:-575}
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu bin/tapewise-bench bin/tapewise-conform; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
for dt in bf16 f32; do
  for part in "small 12,16,18,20 1000" "large 22,24,26 100"; do
    set -- $part; name=$1; sizes=$2; nodes=$3
    s=$SECONDS; timeout 100 python3 bench/bench_torch.py --sizes '' --no-compile --no-kernels --conform $B/tapewise-conform --chain-sizes $sizes --chain-nodes $nodes --chain-shapes unary,binary,fanout --chain-dtype $dt --json $R/torch_${dt}_$name.json > $R/torch_${dt}_$name.txt 2>&1
    echo "== torch $dt $name: exit $? after $((SECONDS-s)) s"
    s=$SECONDS; timeout 90 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes $sizes --chain-nodes $nodes --chain-shapes unary,binary,fanout --chain-dtype $dt --torch $R/torch_${dt}_$name.json --json $R/bench_${dt}_$name.json > $R/bench_${dt}_$name.txt 2>&1
    echo "== tapewise $dt $name: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|^  (unary|binary|fanout):" $R/bench_${dt}_$name.txt | cut -c1-170
  done
done
for job in "bf16 unary" "bf16 fanout" "f32 fanout" "f32 unary" "bf16 binary" "f32 binary"; do
  set -- $job; dt=$1; shape=$2; left=$((LIMIT - (SECONDS - T0)))
  [ "$left" -lt 80 ] && { echo "== compile $dt $shape: not reached ($left s left)"; continue; }
  s=$SECONDS; timeout $((left-30)) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --json $R/compile_${dt}_$shape.torch.json > $R/compile_${dt}_$shape.torch.txt 2>&1
  echo "== compile $dt $shape: exit $? after $((SECONDS-s)) s"
  timeout 25 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --torch $R/compile_${dt}_$shape.torch.json --json $R/compile_${dt}_$shape.json > $R/compile_${dt}_$shape.txt 2>&1
  echo "== tapewise beside it: exit $?"; grep -E "^  2\^" $R/compile_${dt}_$shape.txt | cut -c1-170
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
