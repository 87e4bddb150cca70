#!/usr/bin/env bash
# Run 9: the 16-bit node kernels' compute rooflines. Nsight Compute's instruction counts for every
# bfloat16 and float16 forward and fused VJP at 2^26 (tools/bench/roofline.py), then the 16-bit
# benchmark with them (--roofline), in the same call.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run9; mkdir -p $W
timeout 150 ncu --clock-control none --csv --print-kernel-base mangled --kernel-name-base mangled -k 'regex:ForwardFn|VjpFn' \
  --metrics "$(python3 tools/bench/roofline.py --print-metrics)" \
  build/bin/tapewise-bench --once --no-staged --sizes 26 --dtypes bf16,f16 --no-chain > $W/ncu16.csv 2> $W/ncu16.log
echo "ncu exit $? after $((SECONDS - start)) s"
python3 tools/bench/roofline.py $W/ncu16.csv --json $W/roofline16.json 2> $W/roofline16.txt; echo "roofline exit $?"
tar -C /tmp -cJf $OUT/run9.tar.xz run9
timeout 90 build/bin/tapewise-bench --sizes 26 --dtypes bf16,f16 --no-chain --no-staged --roofline $W/roofline16.json \
  --json $W/bench16_roofline.json > $W/bench16_roofline.txt 2>&1; echo "bench exit $? after $((SECONDS - start)) s"
tar -C /tmp -cJf $OUT/run9.tar.xz run9
echo "total $((SECONDS - start)) s"
