#!/usr/bin/env bash
# Call j (2026-12-06, tenth session): log's exact forward in four vectors a thread (new) against b7a048c (head),
# two rounds at 2^26; Nsight Compute's instruction counts of every exact float32 kernel of new at 2^26; CPU ==
# CUDA on every float32 input of log's forward; the exact-mode tests.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-1500; }
for round in 1 2; do for v in head new; do
  s=$SECONDS; timeout 60 $B/tapewise-bench-$v --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
M=gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts.sum
s=$SECONDS; timeout 90 ncu --metrics $M --csv --kernel-name regex:map_kernel $B/tapewise-bench-new --once --no-chain --sizes 26 \
  --dtypes f32 --ops $OPS --no-staged --math exact > $R/ncu_26_new.csv 2> $R/ncu_26_new.err
echo "== ncu 2^26 new: exit $? after $((SECONDS-s)) s, $(grep -c '"gpu__time_duration.sum"' $R/ncu_26_new.csv) kernels"
pack
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops log --jobs 14 > $R/cross_log.txt 2>&1
echo "== cross-check log: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_log.txt | cut -c1-120
s=$SECONDS; timeout 120 $B/tapewise_tests --gtest_brief=1 --gtest_filter='MathMode.*:CompiledPieces.*:ExactMath.*:*Exact*:CpuVectorMath.*' > $R/tests_exact.txt 2>&1
echo "== exact tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_exact.txt | head -12
pack; echo "total $((SECONDS-T0)) s"
