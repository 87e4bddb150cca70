#!/usr/bin/env bash
# GPU call B (2026-12-06, twelfth session), on the machine call A left warm: new (2ba2150) beside base
# (c16d2cb) with PyTorch eager, CUDA graphs and torch.compile in the same call, past L2 (100 nodes at
# 2^22-2^26): the float32 unary, bfloat16 fan-out and bfloat16 unary chains; the float32 binary chain
# (which ran out of memory at 2^26, call C); memcheck of the programs' tests with TAPEWISE_LOG=info.
# As it ran (one command line), one statement a line.
T0=$SECONDS; B=.gpu/bin; R=$OUT/r; mkdir -p $R
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu
for job in "f32 unary" "bf16 fanout" "bf16 unary"; do
  set -- $job; dt=$1; shape=$2
  s=$SECONDS; timeout 100 python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --json $R/torch_${dt}_$shape.json > $R/torch_${dt}_$shape.txt 2>&1
  echo "== torch $dt $shape: exit $? after $((SECONDS-s)) s"; grep -E '^chain' $R/torch_${dt}_$shape.txt
  for bin in base new; do
    timeout 30 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --torch $R/torch_${dt}_$shape.json --json $R/bench_${bin}_${dt}_$shape.json > $R/bench_${bin}_${dt}_$shape.txt 2>&1
    echo "== $bin $dt $shape: exit $?"; grep -E '^  2\^' $R/bench_${bin}_${dt}_$shape.txt
  done
done
for bin in base new; do
  s=$SECONDS; timeout 60 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes binary --chain-dtype f32 --json $R/bench_${bin}_f32_binary.json > $R/bench_${bin}_f32_binary.txt 2>&1
  echo "== $bin f32 binary: exit $? after $((SECONDS-s)) s"; grep -E '^  2\^' $R/bench_${bin}_f32_binary.txt
done
s=$SECONDS; RC_PARAMS="seed=5 max_success=10" TAPEWISE_LOG=info timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Backends/Programs.*cuda' > $R/memcheck.txt 2>&1
echo "== memcheck: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/memcheck.txt | tail -1)"; grep -E "NVRTC compiled|PASSED" $R/memcheck.txt | tail -5
echo total $((SECONDS-T0)); tar czf $OUT/results.tar.gz -C $OUT r
