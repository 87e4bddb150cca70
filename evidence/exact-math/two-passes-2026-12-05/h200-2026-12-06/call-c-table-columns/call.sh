#!/usr/bin/env bash
# Table columns (exp hi/lo, log inv_c/log_c_hi) against HEAD 72b0dac: exact-mode benchmark, ncu, cross-checks, suite.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$2,$4,$5,$8}' | paste -sd' ' | cut -c1-1200; }
for round in 1 2; do
for v in prev new; do
  b=$B/tapewise-bench; [ $v = prev ] && b=$B/tapewise-bench-prev
  s=$SECONDS; timeout 100 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --map-shapes tuned,t256v4 --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact round $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
s=$SECONDS; timeout 60 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math aten --json $R/new_aten.json > $R/new_aten.txt 2>&1
echo "== new aten: exit $? after $((SECONDS-s)) s"; show $R/new_aten.txt
pack
for v in prev new; do
  b=$B/tapewise-bench; [ $v = prev ] && b=$B/tapewise-bench-prev
  s=$SECONDS; timeout 60 ncu --kernel-name regex:'map' --section SpeedOfLight --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy --section WarpStateStats --csv $b --once --no-chain --sizes 24 --dtypes f32 --ops exp,log,tanh --no-staged --math exact > $R/ncu_${v}.csv 2> $R/ncu_${v}.err
  echo "== ncu $v: exit $? after $((SECONDS-s)) s"
done
pack
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops exp,log,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-160
pack
s=$SECONDS; timeout 90 $B/tapewise-cross-check --ops exp,log,tanh --vjp --jobs 14 > $R/cross_vjp.txt 2>&1
echo "== cross-check --vjp: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp.txt | cut -c1-160
pack
left=$((480 - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise_tests --gtest_brief=1 > $R/tests_all.txt 2>&1
echo "== all tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_all.txt | head -12
pack; echo "total $((SECONDS-T0)) s"
