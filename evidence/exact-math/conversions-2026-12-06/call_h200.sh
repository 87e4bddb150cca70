#!/usr/bin/env bash
# Call f (2026-12-06), on an H200: 8930a26 (prev) against 7b08d4b (mid: tanh's shorter fast path, log's bits
# reduction) and the constant-bank constants of exp, tanh, log, sin and cos on top (new); CPU == CUDA for
# every exact unary node; the whole suite; the conversion variants if time is left.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$2,$4,$8}' | paste -sd' ' | cut -c1-900; }
for round in 1 2; do for v in prev mid new; do
  b=$B/tapewise-bench; [ $v != new ] && b=$B/tapewise-bench-$v
  s=$SECONDS; timeout 60 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-120
s=$SECONDS; timeout 220 $B/tapewise-cross-check --ops $OPS --vjp --jobs 14 > $R/cross_vjp.txt 2>&1
echo "== cross-check --vjp: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp.txt | cut -c1-120
pack
left=$((545 - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests_all.txt 2>&1
echo "== all tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_all.txt | head -12
pack
left=$((590 - (SECONDS - T0)))
[ $left -gt 30 ] && { timeout "$left" $B/variants > $R/variants.txt 2>&1; echo "== variants: exit $?"; cut -c1-150 $R/variants.txt; }
pack; echo "total $((SECONDS-T0)) s"
