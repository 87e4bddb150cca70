#!/usr/bin/env bash
# Run 26: the tests on the final code (after run 25, same wheel and binaries): every C++ test; the Python
# tests of tapewise.torch, the kernel table and the region door; compute-sanitizer's memcheck over the
# tape programs' tests (a backward's gradients in between now live in one workspace allocation).
set -u
start=$SECONDS
W=/tmp/run26; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run26.tar.xz run26; }
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
[ -x build/bin/tapewise_tests ] || bash build-gpu-pack/setup.sh
python3 -c "import tapewise" 2>/dev/null || python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl
timeout 170 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $? after $((SECONDS - start)) s"; tail -3 $W/tests.txt; save
timeout 230 python3 -m pytest -q -p no:cacheprovider python/tests/test_torch.py python/tests/test_node_kernels.py \
  python/tests/test_region_values.py > $W/pytest.txt 2>&1; echo "pytest exit $? after $((SECONDS - start)) s: $(tail -1 $W/pytest.txt)"; save
left=$((570 - (SECONDS - start)))
RC_PARAMS="seed=5 max_success=10" timeout $((left > 30 ? left : 30)) compute-sanitizer --tool memcheck --error-exitcode 9 \
  build/bin/tapewise_tests --gtest_filter='Backends/Programs.*/cuda:*WantedGradientsOnly*cuda*' --gtest_brief=1 > $W/memcheck.txt 2>&1
echo "memcheck exit $? after $((SECONDS - start)) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $W/memcheck.txt | tail -3; save
