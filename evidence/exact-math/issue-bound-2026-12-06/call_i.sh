#!/usr/bin/env bash
# Call i (2026-12-06, tenth session): the first pass's table reads by mad.wide (log, exp, tanh and the nodes on
# them) and tanh's clamp by FMNMX, against b7a048c (head) at 2^26; the new build's kernels in each launch shape;
# Nsight Compute's instruction counts of every exact float32 kernel at 2^26 in the tuned shapes and in t256v4;
# CPU == CUDA on every float32 input of the five forwards and of every exact node's VJPs; the exact-mode tests.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$5,$8}' | paste -sd' ' | cut -c1-1500; }
bench() {  # $1 version, $2 tag, rest: extra options
  local v=$1 tag=$2; shift 2; s=$SECONDS
  timeout 90 $B/tapewise-bench-$v --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/$tag.json "$@" > $R/$tag.txt 2>&1
  echo "== $tag: exit $? after $((SECONDS-s)) s"; show $R/$tag.txt
}
bench head head_exact
bench new new_exact
bench new new_shapes --map-shapes tuned,t128v2,t256v4
pack
M=gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts.sum
for shape in tuned t256v4; do  # TAPEWISE_MAP_SHAPE did not reach the bench: both files were the tuned shapes (the second is not kept)
  s=$SECONDS; TAPEWISE_MAP_SHAPE=$shape timeout 90 ncu --metrics $M --csv --kernel-name regex:map_kernel \
    $B/tapewise-bench-new --once --no-chain --sizes 26 --dtypes f32 --ops $OPS --no-staged --math exact > $R/ncu_26_$shape.csv 2> $R/ncu_26_$shape.err
  echo "== ncu 2^26 $shape: exit $? after $((SECONDS-s)) s, $(grep -c '"gpu__time_duration.sum"' $R/ncu_26_$shape.csv) kernels"
done
pack
s=$SECONDS; timeout 70 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-120
pack
s=$SECONDS; timeout 120 $B/tapewise_tests --gtest_brief=1 --gtest_filter='MathMode.*:CompiledPieces.*:ExactMath.*:*Exact*:CpuVectorMath.*' > $R/tests_exact.txt 2>&1
echo "== exact tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_exact.txt | head -12
pack
for op in exp log tanh sigmoid silu gelu softplus safeLog sin cos; do
  left=$((585 - (SECONDS - T0))); [ $left -lt 20 ] && { echo "== no time left for the VJP of $op"; continue; }
  [ $left -gt 45 ] && left=45
  s=$SECONDS; timeout $left $B/tapewise-cross-check --ops $op --vjp --jobs 14 > $R/cross_vjp_$op.txt 2>&1
  echo "== cross-check --vjp $op: exit $? after $((SECONDS-s)) s: $(grep -E 'results differ' $R/cross_vjp_$op.txt | cut -c1-110)"
done
pack; echo "total $((SECONDS-T0)) s"
