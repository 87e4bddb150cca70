#!/usr/bin/env bash
# The GPU calls the seventh session (2026-12-05/06) had ready and no device was lent for: run first next time.
# .gpu/all.tar.xz: bin/ with tapewise_tests, tapewise-bench, tapewise-cross-check (a build of HEAD, stripped),
# tapewise-bench-prev (a build of ae57364: two passes and exact shapes, sin and cos with selected coefficients,
# tanh's float reciprocal) and tapewise-bench-head (464658b: one element after another), xz -9 (about 45 MB).
# Call A: ./calls_not_run_2026-12-06.sh a (about 9 minutes); call B: ./calls_not_run_2026-12-06.sh b.
set -u
case "${1:-a}" in
a)
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
$B/tapewise_tests --gtest_filter='ExactMath.ReciprocalSeedIsWithinBound' > $R/seed.txt 2>&1; echo "== seed: exit $?"; grep -E "rcp|OK|FAILED" $R/seed.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$5,$8}' | paste -sd' ' | cut -c1-1500; }
for v in head prev; do
  s=$SECONDS; timeout 90 $B/tapewise-bench-$v --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact.json > $R/${v}_exact.txt 2>&1
  echo "== $v exact: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact.txt
done
s=$SECONDS; timeout 120 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --map-shapes tuned,t128v2,t256v4 --json $R/new_exact.json > $R/new_exact.txt 2>&1
echo "== new exact: exit $? after $((SECONDS-s)) s"; show $R/new_exact.txt
pack
s=$SECONDS; timeout 90 ncu --kernel-name regex:'map' --section SpeedOfLight --section InstructionStats --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --csv $B/tapewise-bench --once --no-chain --sizes 24 --dtypes f32 --ops exp,sin,tanh,log --no-staged --math exact > $R/ncu_exact.csv 2> $R/ncu_exact.err
echo "== ncu exact: exit $? after $((SECONDS-s)) s, $(wc -l < $R/ncu_exact.csv) lines"
pack
s=$SECONDS; timeout 75 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-160
pack
s=$SECONDS; timeout 200 $B/tapewise_tests --gtest_brief=1 > $R/tests_all.txt 2>&1
echo "== all tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_all.txt | head -12
pack
left=$((${CALL_BUDGET:-470} - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise-cross-check --ops sin,cos,tanh,gelu --vjp --jobs 14 > $R/cross_vjp_a.txt 2>&1
echo "== cross-check --vjp sin,cos,tanh,gelu: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp_a.txt | cut -c1-160
pack; echo "total $((SECONDS-T0)) s"

;;
b)
T0=$SECONDS
[ -x .gpu/bin/tapewise_tests ] || { rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; }
B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
s=$SECONDS; timeout 300 $B/tapewise-cross-check --ops binary --pairs 32 --vjp --jobs 14 > $R/cross_binary_pairs32.txt 2>&1
echo "== cross-check binary 2^32 pairs --vjp: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_binary_pairs32.txt | cut -c1-160
pack
left=$((420 - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise-cross-check --ops exp,sigmoid,silu,softplus,safeLog,log --vjp --jobs 14 > $R/cross_vjp_b.txt 2>&1
echo "== cross-check --vjp exp,sigmoid,silu,softplus,safeLog,log: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp_b.txt | cut -c1-160
pack
left=$((560 - (SECONDS - T0)))
if [ "$left" -gt 40 ]; then
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 1 $B/tapewise_tests --gtest_brief=1 --gtest_filter='ExactMath.*:MathMode.*:*Exact*:-CudaLimits.*' > $R/memcheck.txt 2>&1
  echo "== memcheck (exact): exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/memcheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/memcheck.txt | tr '\n' ' ')"
  tail -c 1000000 $R/memcheck.txt > $R/m.tmp && mv $R/m.tmp $R/memcheck.txt
fi
pack; echo "total $((SECONDS-T0)) s"

;;
esac
