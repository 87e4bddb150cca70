#!/usr/bin/env bash
# Run 7: the final 16-bit shapes (forward_vectors16 / vjp_vectors16): every test, memcheck over the
# 16-bit frame and the CUDA forward/VJP tests, the exhaustive ATen parity in 16 bits, and the 16-bit
# benchmark of every node beside PyTorch eager in the same call.
set -u
start=$SECONDS
bash build-gpu-pack/setup.sh
W=/tmp/run7; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
python3 -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl 2>&1 | tail -2
build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $?"; tail -4 $W/tests.txt
RC_PARAMS="seed=5 max_success=10" timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 build/bin/tapewise_tests --gtest_brief=1 \
  --gtest_filter='CudaMapKernel.*:AllOps/ForwardPaths.*cuda*:AllOps/VjpPaths.*cuda*:AllOps/EveryUnaryInput.*cuda*' > $W/memcheck.txt 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|tests from .* ran|PASSED|FAILED" $W/memcheck.txt | tail -4
python3 -P tools/aten_parity16.py --out $W > $W/aten_parity16.txt 2>&1; echo "parity16 exit $?"; grep -E "graded rows" $W/aten_parity16.txt
python3 tools/bench/bench_torch.py --sizes 26 --dtypes bf16,f16 --chain-sizes '' --no-compile --no-kernels \
  --conform build/bin/tapewise-conform --json $W/torch.json > $W/torch.txt 2>&1; echo "torch exit $?"
build/bin/tapewise-bench --sizes 26 --dtypes bf16,f16 --no-chain --no-staged --torch $W/torch.json \
  --json $W/bench16.json > $W/bench16.txt 2>&1; echo "bench exit $? after $((SECONDS - start)) s"
grep -c " PASS$" $W/bench16.txt; grep -c " MISS$" $W/bench16.txt
tar -C /tmp -cJf $OUT/run7.tar.xz run7
echo "total $((SECONDS - start)) s"
