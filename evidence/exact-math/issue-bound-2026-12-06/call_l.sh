#!/usr/bin/env bash
# Call l (2026-12-06, tenth session): compute-sanitizer's memcheck over the test that runs every node of the
# CUDA backend in exact mode against the CPU backend (all dtypes, both VJP paths, node by node and as
# programs), on 2adedc0's kernels: the table reads now compute their own addresses (table_read).
set -u
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/smi.txt
s=$SECONDS; timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 \
  --gtest_filter='MathMode.CudaInExactModeGivesTheCpuBackendsBits:ExactMath.*' > $R/memcheck_exact.txt 2>&1
echo "== memcheck: exit $? after $((SECONDS-s)) s"; grep -E 'ERROR SUMMARY|PASSED|FAILED|tests ran' $R/memcheck_exact.txt | head
