#!/usr/bin/env bash
# GPU call V (2026-12-05, fifth session): the library with CUDA's program_threshold at 2^26 and the backward
# program's internal slots allocated only where a step stores: the whole CUDA suite, then the chains with the
# new default (f32, bf16; three shapes; 2^12-2^26), a 6-node chain node by node against programs at 2^24/2^26,
# and a 12-node unary chain at 2^28 both ways (past the default).
set -u
T0=$SECONDS
tar xJf .gpu/v.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
s=$SECONDS; timeout 80 $B/tapewise_tests --gtest_brief=1 --gtest_filter='*cuda*:*Cuda*:*Program*:CompiledPieces.*:MathMode.*:Tape*:KeepIn*:*VjpPaths*:CrossBackend.*:CApi*:EveryUnaryInput.*:MemoryStats.*:CallerMemory.*:-CudaLimits.*' > $R/tests.txt 2>&1; echo "== tests: exit $? after $((SECONDS-s)) s"; tail -4 $R/tests.txt; grep -E "^\[  FAILED" $R/tests.txt | head; pack
for dt in f32 bf16; do
  s=$SECONDS; timeout 35 $B/tapewise-bench --no-kernels --chain-calls 3 --chain-sizes 12,22,26 --chain-nodes 100 --chain-shapes unary,fanout --chain-dtype $dt --json $R/chain_$dt.json > $R/chain_$dt.txt 2>&1
  echo "== chain $dt (100 nodes): exit $? after $((SECONDS-s)) s"; grep -E "^  2\^|^  (unary|binary|fanout)" $R/chain_$dt.txt | cut -c1-100; pack
done
for t in 0 67108864; do
  s=$SECONDS; timeout 15 $B/tapewise-bench --no-kernels --chain-calls 3 --program-threshold $t --chain-sizes 24,26 --chain-nodes 6 --chain-shapes unary --json $R/six_$t.json > $R/six_$t.txt 2>&1
  echo "== 6 nodes, threshold $t: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^" $R/six_$t.txt | cut -c1-60
done
for t in 0 268435456; do
  s=$SECONDS; timeout 15 $B/tapewise-bench --no-kernels --chain-calls 3 --program-threshold $t --chain-sizes 28 --chain-nodes 12 --chain-shapes unary --json $R/big_$t.json > $R/big_$t.txt 2>&1
  echo "== 2^28, 12 nodes, threshold $t: exit $? after $((SECONDS-s)) s"; grep -E "^  2\^" $R/big_$t.txt | cut -c1-60
done
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R
