#!/usr/bin/env bash
# GPU call P (2026-12-05, fifth session), binaries of eb630f7 (kernels as HEAD): why the bfloat16 chain trails
# (chain timings f32 vs bf16, which paths ran, ncu of the chain's kernels), exact mode's speed at 2^26 and
# ncu of its float32 forwards, safeLog's VJP cross-check, memcheck in the time left.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; which ncu nsys compute-sanitizer
for dt in f32 bf16; do
  s=$SECONDS; timeout 90 $B/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --chain-shapes unary,fanout --chain-dtype $dt --json $OUT/chain_$dt.json > $OUT/chain_$dt.txt 2>&1
  echo "== chain $dt: exit $? after $((SECONDS-s)) s"; grep -E "unary|fanout" $OUT/chain_$dt.txt | head -12
done
TAPEWISE_LOG=debug timeout 40 $B/tapewise-bench --no-kernels --chain-sizes 16 --chain-shapes unary --chain-dtype bf16 --chain-nodes 100 > $OUT/log_bf16.txt 2>&1
echo "== log bf16: $(wc -l < $OUT/log_bf16.txt) lines"; sed -E 's/[0-9]+/N/g' $OUT/log_bf16.txt | sort | uniq -c | sort -rn | head -15
for dt in f32 bf16; do for n in 16 20; do
  s=$SECONDS; timeout 100 ncu --launch-skip 2000 --launch-count 24 --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --csv $B/tapewise-bench --no-kernels --chain-sizes $n --chain-shapes unary --chain-dtype $dt > $OUT/ncu_chain_${dt}_$n.csv 2> $OUT/ncu_chain_${dt}_$n.err
  echo "== ncu chain $dt 2^$n: exit $? after $((SECONDS-s)) s, $(wc -l < $OUT/ncu_chain_${dt}_$n.csv) lines"
done; done
s=$SECONDS; timeout 80 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops exp,log,sin,cos,tanh,sigmoid,gelu,softplus --reps 20 --no-staged --math exact --json $OUT/exact.json > $OUT/exact.txt 2>&1
echo "== exact 2^26: exit $? after $((SECONDS-s)) s"; grep -E "^ *(exp|log|sin|cos|tanh|sigmoid|gelu|softplus) " $OUT/exact.txt | head -20
s=$SECONDS; timeout 90 ncu --kernel-name regex:'map|Map' --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section WarpStateStats --csv $B/tapewise-bench --once --no-chain --sizes 24 --dtypes f32 --ops exp,sin,tanh --math exact > $OUT/ncu_exact.csv 2> $OUT/ncu_exact.err
echo "== ncu exact: exit $? after $((SECONDS-s)) s, $(wc -l < $OUT/ncu_exact.csv) lines"
s=$SECONDS; timeout 150 $B/tapewise-cross-check --ops safeLog --vjp --jobs 14 > $OUT/cross_safelog.txt 2>&1; echo "== cross-check safeLog --vjp: exit $? after $((SECONDS-s)) s"; tail -2 $OUT/cross_safelog.txt | cut -c1-300
left=$((570 - (SECONDS - T0)))
if [ "$left" -gt 30 ]; then
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 1 $B/tapewise_tests --gtest_brief=1 --gtest_filter='*cuda*:*Cuda*:CompiledPieces.*:MathMode.*:-CudaLimits.*' > $OUT/sanitizer_memcheck.txt 2>&1
  echo "== memcheck: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $OUT/sanitizer_memcheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/sanitizer_memcheck.txt | tr '\n' ' ')"
  tail -c 2000000 $OUT/sanitizer_memcheck.txt > $OUT/s.tmp && mv $OUT/s.tmp $OUT/sanitizer_memcheck.txt
fi
ls -la $OUT
