#!/usr/bin/env bash
# GPU call 3: exact mode's float32 kernels, HEAD (464658b: one element after another) against the working
# tree (two passes, tanh's reciprocal without a branch, exact-mode launch shapes), same card, same call;
# then the whole CUDA test suite and CPU == CUDA on every float32 input of the changed paths.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$4,$5,$8}' | paste -sd' ' | cut -c1-1500; }
s=$SECONDS; timeout 100 $B/tapewise-bench-head --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --map-shapes tuned,t128v2,t256v4 --json $R/head_exact.json > $R/head_exact.txt 2>&1
echo "== HEAD exact: exit $? after $((SECONDS-s)) s"; show $R/head_exact.txt
s=$SECONDS; timeout 100 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --map-shapes tuned,t128v2,t256v4 --json $R/new_exact.json > $R/new_exact.txt 2>&1
echo "== NEW exact: exit $? after $((SECONDS-s)) s"; show $R/new_exact.txt
pack
s=$SECONDS; timeout 200 $B/tapewise_tests --gtest_brief=1 > $R/tests_all.txt 2>&1
echo "== all tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_all.txt | head -12
pack
s=$SECONDS; timeout 80 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; tail -6 $R/cross_forwards.txt | cut -c1-200
for op in tanh gelu; do
  s=$SECONDS; timeout 90 $B/tapewise-cross-check --ops $op --vjp --jobs 14 > $R/cross_vjp_$op.txt 2>&1
  echo "== cross-check $op --vjp: exit $? after $((SECONDS-s)) s"; tail -2 $R/cross_vjp_$op.txt | cut -c1-200
done
pack
left=$((430 - (SECONDS - T0)))
if [ "$left" -gt 30 ]; then
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 1 $B/tapewise_tests --gtest_brief=1 --gtest_filter='MathMode.*:CompiledPieces.*:*Exact*:*exact*:-CudaLimits.*' > $R/memcheck.txt 2>&1
  echo "== memcheck (math mode, exact): exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/memcheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/memcheck.txt | tr '\n' ' ')"
  tail -c 1000000 $R/memcheck.txt > $R/m.tmp && mv $R/m.tmp $R/memcheck.txt
fi
pack; echo "total $((SECONDS-T0)) s"
