#!/usr/bin/env bash
# Run 5: the pack16 conversion experiment, then HEAD (72aac42)'s validation: every test, memcheck over
# the 16-bit CUDA tests, the exhaustive ATen parity in 16 bits.
set -u
start=$SECONDS
bash build-exp/run.sh 2>&1 | tail -8
bash build-gpu-pack/setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl 2>&1 | tail -2
build/bin/tapewise_tests --gtest_brief=1 > $OUT/tests.txt 2>&1; echo "tests exit $?"; tail -4 $OUT/tests.txt
RC_PARAMS="seed=5 max_success=10" timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 \
  --gtest_filter='CudaMapKernel.*:AllOps/ForwardPaths.*cuda*:AllOps/VjpPaths.*cuda*:AllOps/EveryUnaryInput.*cuda*' > $OUT/memcheck.txt 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|tests from .* ran|PASSED|FAILED" $OUT/memcheck.txt | tail -4
python3 -P tools/aten_parity16.py --out $OUT/parity16 > $OUT/aten_parity16.txt 2>&1; echo "parity16 exit $?"; grep -E "graded rows|wrote" $OUT/aten_parity16.txt
build/bin/tapewise-bench --sizes 26 --dtypes bf16,f16 --no-chain --no-staged --ops sin,sigmoid,tanh,log,sqrt,exp --json $OUT/bench16.json > $OUT/bench16.txt 2>&1; echo "bench exit $?"
echo "total $((SECONDS - start)) s"
