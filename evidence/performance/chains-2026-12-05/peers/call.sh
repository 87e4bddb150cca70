#!/usr/bin/env bash
# GPU call M (2026-12-05, fifth session): issue 46's chain table. tapewise-bench of this tree (--chain-calls 5: the
# median of five timed blocks and their spread) beside PyTorch eager and CUDA graphs, float32 and bfloat16, three
# shapes, 1,000 nodes at 2^12-2^20 and 100 at 2^22-2^26; torch.compile of the bf16 unary chain in the time left.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
tar xJf .gpu/bench.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
for dt in f32 bf16; do
  for part in "small 12,16,18,20 1000" "large 22,24,26 100"; do
    set -- $part; name=$1; sizes=$2; nodes=$3
    s=$SECONDS; timeout 150 python3 bench/bench_torch.py --sizes '' --no-compile --no-kernels --conform $B/tapewise-conform --chain-sizes $sizes --chain-nodes $nodes --chain-shapes unary,binary,fanout --chain-dtype $dt --json $R/torch_${dt}_$name.json > $R/torch_${dt}_$name.txt 2>&1
    echo "== torch $dt $name: exit $? after $((SECONDS-s)) s"
    s=$SECONDS; timeout 150 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes $sizes --chain-nodes $nodes --chain-shapes unary,binary,fanout --chain-dtype $dt --torch $R/torch_${dt}_$name.json --json $R/bench_${dt}_$name.json > $R/bench_${dt}_$name.txt 2>&1
    echo "== tapewise $dt $name: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|spread|^  (unary|binary|fanout):" $R/bench_${dt}_$name.txt | cut -c1-150
  done
done
left=$((560 - (SECONDS - T0)))
if [ "$left" -gt 60 ]; then
  s=$SECONDS; timeout $((left-25)) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 16 --chain-shapes unary --chain-dtype bf16 --json $R/compile_bf16_unary_16.torch.json > $R/compile_bf16_unary_16.torch.txt 2>&1
  echo "== compile bf16 unary 2^16: exit $? after $((SECONDS-s)) s"
  timeout 20 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes 16 --chain-shapes unary --chain-dtype bf16 --torch $R/compile_bf16_unary_16.torch.json --json $R/compile_bf16_unary_16.json > $R/compile_bf16_unary_16.txt 2>&1
  grep -E "^  2\^|spread" $R/compile_bf16_unary_16.txt
fi
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT
