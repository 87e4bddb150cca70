#!/usr/bin/env bash
# Call h (2026-12-06, tenth session): exact mode's float32 kernels of 8930a26 (prev), b7a048c (head: the last
# GPU-checked kernels) and the new tanh first pass (new) at 2^26, two rounds; the same kernels at 2^22, where
# input and output stay in the L2, timed by Nsight Compute (their compute-bound speed, which an H100 and an
# H200 share: the same 132 SMs at 1,980 MHz); CPU == CUDA for tanh (the kernel that changed) and softplus's
# VJPs; the exact-mode tests.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-900; }
for round in 1 2; do for v in prev head new; do
  b=$B/tapewise-bench-$v
  s=$SECONDS; timeout 60 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
M=gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
ncu_at_22() {  # $1: version, $2: metrics, $3: file tag
  s=$SECONDS; timeout 90 ncu --clock-control none --cache-control none --metrics $2 --csv --kernel-name regex:map_kernel \
    $B/tapewise-bench-$1 --once --no-chain --sizes 22 --dtypes f32 --ops neg,$OPS --no-staged --math exact > $R/ncu_$3_$1.csv 2> $R/ncu_$3_$1.err
  echo "== ncu 2^22 $3 $1: exit $? after $((SECONDS-s)) s, $(grep -c '"gpu__time_duration.sum"\|"dram__bytes.sum"' $R/ncu_$3_$1.csv) rows"
}
for v in prev head new; do ncu_at_22 $v $M l2; done
ncu_at_22 new l1tex__data_pipe_lsu_wavefronts.sum,lts__t_sector_hit_rate.pct,dram__bytes.sum,gpu__time_duration.sum mem
pack
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops tanh --jobs 14 > $R/cross_tanh.txt 2>&1
echo "== cross-check tanh: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_tanh.txt | cut -c1-120
for op in tanh softplus; do
  s=$SECONDS; timeout 90 $B/tapewise-cross-check --ops $op --vjp --jobs 14 > $R/cross_vjp_$op.txt 2>&1
  echo "== cross-check --vjp $op: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp_$op.txt | cut -c1-120
done
pack
s=$SECONDS; timeout 120 $B/tapewise_tests --gtest_brief=1 --gtest_filter='MathMode.*:CompiledPieces.*:ExactMath.*:*Exact*:CpuVectorMath.*' > $R/tests_exact.txt 2>&1
echo "== exact tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_exact.txt | head -12
pack; echo "total $((SECONDS-T0)) s"
