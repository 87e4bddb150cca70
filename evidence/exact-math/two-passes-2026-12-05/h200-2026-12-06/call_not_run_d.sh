#!/usr/bin/env bash
# Exp's pairs + hi column, tanh's 16-byte pairs, exp's four-vector shape against 72b0dac: a short call.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-800; }
for round in 1 2; do for v in prev new; do
  b=$B/tapewise-bench; [ $v = prev ] && b=$B/tapewise-bench-prev
  s=$SECONDS; timeout 40 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
s=$SECONDS; timeout 40 $B/tapewise-cross-check --ops exp,log,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-120
pack
s=$SECONDS; timeout 45 $B/tapewise-cross-check --ops exp,tanh --vjp --jobs 14 > $R/cross_vjp.txt 2>&1
echo "== cross-check --vjp: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp.txt | cut -c1-120
pack
left=$((200 - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise_tests --gtest_brief=1 --gtest_filter='ExactMath.*:MathMode.*:CompiledPieces.*:*Exact*:*exact*:*Cuda*:*cuda*' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests.txt | head -8
pack; echo "total $((SECONDS-T0)) s"
