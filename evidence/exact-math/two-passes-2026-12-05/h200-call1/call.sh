#!/usr/bin/env bash
# GPU call 1 (2026-12-05, sixth session): exact mode's float32 map kernels in two passes (a vector's
# elements through the branch-free fast paths, then the flagged ones through the scalar code). The CUDA
# math-mode tests, every float32 input of the five functions CPU vs CUDA, the speed at 2^26 in each
# launch shape beside aten mode, Nsight Compute on the exact forwards.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
s=$SECONDS; timeout 120 $B/tapewise_tests --gtest_brief=1 --gtest_filter='MathMode.*:CompiledPieces.*:*Exact*:*exact*' > $R/tests_math.txt 2>&1
echo "== tests (math mode, pieces, exact): exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests ran' $R/tests_math.txt | head -12
s=$SECONDS; timeout 150 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards exp,log,sin,cos,tanh: exit $? after $((SECONDS-s)) s"; tail -7 $R/cross_forwards.txt | cut -c1-240
pack
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
s=$SECONDS; timeout 60 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 10 --no-staged --math aten --json $R/aten.json > $R/aten.txt 2>&1
echo "== aten: exit $? after $((SECONDS-s)) s"
for shape in tuned t128v2 t256v4; do
  s=$SECONDS; TAPEWISE_MAP_SHAPE=$shape timeout 60 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 10 --no-staged --math exact --json $R/exact_$shape.json > $R/exact_$shape.txt 2>&1
  echo "== exact $shape: exit $? after $((SECONDS-s)) s"; grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $R/exact_$shape.txt | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-400
done
pack
s=$SECONDS; timeout 100 ncu --kernel-name regex:'map' --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --csv $B/tapewise-bench --once --no-chain --sizes 24 --dtypes f32 --ops exp,sin,tanh --no-staged --math exact > $R/ncu_exact.csv 2> $R/ncu_exact.err
echo "== ncu exact: exit $? after $((SECONDS-s)) s, $(wc -l < $R/ncu_exact.csv) lines"
pack; ls -la $OUT; echo "total $((SECONDS-T0)) s"
